package demo

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestShellQuoteRoundTrips(t *testing.T) {
	for _, s := range []string{"", "plain", "/tmp/sp ace/x", "it's", `a"b\c $d`, "'", "tab\there"} {
		out, err := exec.Command("sh", "-c", "printf %s "+ShellQuote(s)).Output()
		require.NoError(t, err)
		assert.Equal(t, s, string(out), s)
	}
}
