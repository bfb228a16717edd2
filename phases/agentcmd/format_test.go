package agentcmd

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseFormat(t *testing.T) {
	tests := []struct {
		in   string
		want Format
		ok   bool
	}{
		{"", FormatText, true},
		{"text", FormatText, true},
		{"claude", FormatClaude, true},
		{"claude-stream-json", FormatClaude, true},
		{"codex", FormatCodex, true},
		{"codex-json", FormatCodex, true},
		{"gemini", FormatGemini, true},
		{"gemini-stream-json", FormatGemini, true},
		{"opencode", "", false},
		{"Claude", "", false},
	}
	for _, tt := range tests {
		got, err := ParseFormat(tt.in)
		if !tt.ok {
			assert.ErrorIs(t, err, ErrUnknownFormat, tt.in)
			continue
		}
		assert.NoError(t, err, tt.in)
		if tt.in == "" {
			assert.Equal(t, Format(""), got)
			continue
		}
		assert.Equal(t, tt.want, got, tt.in)
	}
}
