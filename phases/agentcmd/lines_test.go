package agentcmd

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestReadLinesSplitsExactly(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		maxLine int
		want    []int // line lengths
	}{
		{"short lines", "a\nbb\n\nccc", 100, []int{1, 2, 0, 3}},
		{"crlf", "a\r\nb\r\n", 100, []int{1, 1}},
		{"longer than the read buffer", strings.Repeat("x", 150_000) + "\n", 100_000, []int{100_000, 50_000}},
		{"exact multiple", strings.Repeat("y", 200) + "\nz\n", 100, []int{100, 100, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := make(chan outputLine, 16)
			go readLines(strings.NewReader(tt.input), false, tt.maxLine, out)
			var got []int
			for l := range out {
				if l.eof {
					break
				}
				got = append(got, len(l.text))
			}
			assert.Equal(t, tt.want, got)
		})
	}
}
