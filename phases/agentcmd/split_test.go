package agentcmd_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/phases/agentcmd"
)

func TestSplitCommand(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  string
	}{
		{`go test ./...`, []string{"go", "test", "./..."}, ""},
		{`sh -c "echo hi there"`, []string{"sh", "-c", "echo hi there"}, ""},
		{`a 'b c' d\ e "f\"g" ''`, []string{"a", "b c", "d e", `f"g`, ""}, ""},
		{`x{prompt}y`, []string{"x{prompt}y"}, ""},
		{`  `, nil, ""},
		{`'open`, nil, "unterminated single quote"},
		{`"open`, nil, "unterminated double quote"},
		{`end\`, nil, "trailing backslash"},
	}
	for _, tt := range tests {
		got, err := agentcmd.SplitCommand(tt.in)
		if tt.err != "" {
			assert.ErrorContains(t, err, tt.err, tt.in)
			continue
		}
		assert.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got, tt.in)
	}
}

func TestSplitCommandUndoesShellQuoting(t *testing.T) {
	for _, s := range []string{"", "plain", "/tmp/sp ace/x", "it's", `a"b\c $d`, "'", "tab\there"} {
		words, err := agentcmd.SplitCommand("cmd " + demo.ShellQuote(s) + " tail")
		require.NoError(t, err)
		assert.Equal(t, []string{"cmd", s, "tail"}, words, s)
	}
}
