package demo

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A newcomer's global git config must not break the demo: a global hook
// that rejects every commit and commit signing with no key would each make
// the first commit fail.
func TestDemoRepoIgnoresAHostileGlobalGitConfig(t *testing.T) {
	home := t.TempDir()
	hooks := filepath.Join(home, "hooks")
	require.NoError(t, os.MkdirAll(hooks, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(hooks, "pre-commit"), []byte("#!/bin/sh\necho rejected >&2\nexit 1\n"), 0o755))
	config := "[core]\n\thooksPath = " + hooks + "\n[commit]\n\tgpgsign = true\n"
	require.NoError(t, os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(config), 0o644))
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))

	// The hostile config is in effect for plain git.
	plain := t.TempDir()
	require.NoError(t, exec.Command("git", "-C", plain, "init", "-q").Run())
	commit := exec.Command("git", "-C", plain, "commit", "-q", "--allow-empty", "-m", "x")
	commit.Env = append(os.Environ(), GitEnv()[:4]...) // the identity alone
	out, err := commit.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "rejected", "plain git should be stopped by the global hook")

	repo := filepath.Join(t.TempDir(), "repo")
	require.NoError(t, NewGoModuleRepo(context.Background(), repo))

	// A scripted agent's commit with GitEnv goes through as well.
	require.NoError(t, os.WriteFile(filepath.Join(repo, "x.txt"), []byte("x\n"), 0o644))
	for _, args := range [][]string{{"add", "x.txt"}, {"commit", "-q", "-m", "agent"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), GitEnv()...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	log, err := exec.Command("git", "-C", repo, "log", "--format=%s").Output()
	require.NoError(t, err)
	assert.Equal(t, "agent\ncalc: initial module\n", string(log))
}
