package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLandFlagIsChecked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, land := range []string{"pr", "pr:octocat", "prx", "pr:a/b?colour=red", "pr:a/b?interval=soon"} {
		code, _, stderr := f.foreman(t, append(f.runArgs(), "-land", land)...)
		assert.Equal(t, exitUsage, code, land)
		assert.Contains(t, stderr, "-land", land)
	}
	out, err := exec.Command(binary, "-h").CombinedOutput()
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(out), "-land string") && strings.Contains(string(out), "pull request"), "-h documents -land")
}
