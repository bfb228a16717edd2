package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A story whose sandboxed agent wrote outside its worktree waits for a
// person before it lands (exit 3, -status says why); -resolve ID=resume
// lands it. With -land-refused it lands like the others.
func TestARefusedAgentsStoryWaitsForAPersonUnlessLandRefused(t *testing.T) {
	requireSandbox(t)
	t.Parallel()
	for _, landRefused := range []bool{false, true} {
		f := newFixture(t)
		require.NoError(t, os.WriteFile(f.plan, []byte(threeStories), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(f.ctl, "US-003.evil"), nil, 0o644))
		args := []string{"-repo", f.repo, "-plan", f.plan, "-agent", shellQuote(f.agent) + " {prompt}", "-bind", f.ctl, "-http", "", "-gate", "true"}
		if landRefused {
			code, stdout, stderr := f.foreman(t, append(args, "-land-refused")...)
			require.Equal(t, exitMerged, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			assert.ElementsMatch(t, []string{"US-001", "US-002", "US-003"}, f.merged(t))
			continue
		}
		code, stdout, stderr := f.foreman(t, args...)
		require.Equal(t, exitNeedsPerson, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
		assert.ElementsMatch(t, []string{"US-001", "US-002"}, f.merged(t), "the others landed")
		_, status, _ := f.foreman(t, "-repo", f.repo, "-status")
		assert.Contains(t, status, "its agents were refused 1 time(s)")
		assert.Contains(t, status, `wrote "EVIL" into the hidden main checkout`)
		assert.Regexp(t, `(?m)^  US-003: 1, of these kinds .*\n    1x \S+ to \S+: the OS sandbox: wrote "EVIL" into the hidden main checkout`, status,
			"-status lists each kind of refusal with its count and times")
		_, js, _ := f.foreman(t, "-repo", f.repo, "-status", "-json")
		assert.Regexp(t, `"refusedKinds": \[\s*\{\s*"detail": "the OS sandbox: wrote \\"EVIL\\" into the hidden main checkout[^"]*",\s*"count": 1,`, js)
		assert.NoFileExists(t, filepath.Join(f.repo, "EVIL"))

		code, _, stderr = f.foreman(t, "-repo", f.repo, "-resolve", "US-003=resume")
		require.Equal(t, exitMerged, code, stderr)
		code, stdout, stderr = f.foreman(t, args...)
		require.Equal(t, exitMerged, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
		assert.ElementsMatch(t, []string{"US-001", "US-002", "US-003"}, f.merged(t))
	}
}
