package demo

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSplitWords(t *testing.T) {
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
		got, err := SplitWords(tt.in)
		if tt.err != "" {
			assert.ErrorContains(t, err, tt.err, tt.in)
			continue
		}
		assert.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got, tt.in)
	}
}
