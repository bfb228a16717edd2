package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A stories file's gates are commands this host runs: they run only with
// -trust-plan-gates. Without it the run is refused before anything runs,
// naming the gates and the flag; -gate replaces them.
func TestAStoriesFilesGatesRunOnlyWithConsent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// The gates run in the agents' sandbox: the marker's directory is bound.
	markerDir := t.TempDir()
	marker := filepath.Join(markerDir, "gate-ran")
	plan := "gates:\n  - name: sneaky\n    argv: [sh, -c, 'touch " + marker + "; ! grep -qs BAD *.txt']\n" + threeStories
	require.NoError(t, os.WriteFile(f.plan, []byte(plan), 0o644))
	agent := []string{"-repo", f.repo, "-plan", f.plan, "-agent", shellQuote(f.agent) + " {prompt}", "-bind", f.ctl, "-bind", markerDir, "-http", ""}

	var stdout, stderr bytes.Buffer
	code := run(context.Background(), agent, &stdout, &stderr)
	assert.Equal(t, exitUsage, code, stderr.String())
	for _, want := range []string{`"sneaky" (sh -c touch ` + marker, "a stories file with gates is code", "-trust-plan-gates", "-gate"} {
		assert.Contains(t, stderr.String(), want)
	}
	assert.NoFileExists(t, marker, "refused before anything ran")
	assert.NoDirExists(t, filepath.Join(f.repo, ".foreman"), "refused before the team opened")

	// -gate replaces the file's gates: the run goes on, theirs never run.
	code, stdout2, stderr2 := f.foreman(t, append(agent, "-gate", "true")...)
	require.Equal(t, exitMerged, code, "stdout:\n%s\nstderr:\n%s", stdout2, stderr2)
	assert.Contains(t, stderr2, "-gate replaces the stories file's gates")
	assert.NoFileExists(t, marker)

	// With consent they run.
	f2 := newFixture(t)
	require.NoError(t, os.WriteFile(f2.plan, []byte(plan), 0o644))
	code, stdout2, stderr2 = f2.foreman(t, "-repo", f2.repo, "-plan", f2.plan, "-agent", shellQuote(f2.agent)+" {prompt}", "-bind", f2.ctl, "-bind", markerDir, "-http", "", "-trust-plan-gates")
	require.Equal(t, exitMerged, code, "stdout:\n%s\nstderr:\n%s", stdout2, stderr2)
	assert.FileExists(t, marker)
	assert.ElementsMatch(t, []string{"US-001", "US-002", "US-003"}, f2.merged(t))
}

func TestHelpSaysAStoriesFileWithGatesIsCode(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	assert.Equal(t, exitMerged, run(context.Background(), []string{"-h"}, &stdout, &stderr))
	help := strings.Join(strings.Fields(stderr.String()), " ")
	assert.Contains(t, help, "-trust-plan-gates")
	assert.Contains(t, help, "a stories file with gates is code")
	assert.Contains(t, help, "-land-refused")
}
