package merge

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// orphanHelperEnv makes the test binary a host that commits in the
// repository it names and is killed while the commit's hook runs.
const orphanHelperEnv = "FOREMAN_MERGE_ORPHAN_HELPER"

func orphanHelper(repo string) int {
	_, err := testRunner().Run(context.Background(), repo, "commit", "-a", "-q", "-m", "from a killed host")
	if err != nil {
		return 1
	}
	return 0
}

// TestNewWaitsForTheGitOfAKilledHost: a host killed while its git commits
// leaves that git running; New waits for it to finish before it goes on,
// so the commit lands whole and no lock is left in the repairs' way.
func TestNewWaitsForTheGitOfAKilledHost(t *testing.T) {
	repo := newRepo(t, nil)
	writeFile(t, repo, "README.md", "changed by the killed host\n")
	fifos := t.TempDir()
	started, release := filepath.Join(fifos, "started"), filepath.Join(fifos, "release")
	require.NoError(t, syscall.Mkfifo(started, 0o600))
	require.NoError(t, syscall.Mkfifo(release, 0o600))
	hook := "#!/bin/sh\necho started > '" + started + "'\nread line < '" + release + "'\n"
	require.NoError(t, os.MkdirAll(filepath.Join(repo, ".git", "hooks"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".git", "hooks", "pre-commit"), []byte(hook), 0o755))

	host := exec.Command(os.Args[0])
	host.Env = append(os.Environ(), orphanHelperEnv+"="+repo)
	require.NoError(t, host.Start())
	_, err := os.ReadFile(started) // the hook runs: git holds index.lock
	require.NoError(t, err)
	require.NoError(t, host.Process.Kill())
	_ = host.Wait()

	waiting := make(chan struct{})
	type opened struct {
		m   *Manager
		err error
	}
	done := make(chan opened, 1)
	go func() {
		m, err := New(context.Background(), Config{Repo: repo, Author: Identity(testIdentity),
			Logger: slog.New(&signalOnMessage{msg: "merge: waiting for a git left running by a host that is gone", ch: waiting})})
		done <- opened{m, err}
	}()
	select {
	case <-waiting:
	case got := <-done:
		t.Fatalf("New returned (%v) without waiting for the killed host's git", got.err)
	}
	require.NoError(t, os.WriteFile(release, []byte("go\n"), 0o600))
	got := <-done
	require.NoError(t, got.err)
	assert.Equal(t, "from a killed host", git(t, repo, "log", "-1", "--format=%s"), "the commit landed whole")
	assert.NoFileExists(t, filepath.Join(repo, ".git", "index.lock"))
	_, err = got.m.Create(context.Background(), "US-1")
	assert.NoError(t, err)
}
