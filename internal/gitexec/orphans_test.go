package gitexec

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/internal/proc"
)

// The helper process is the host the orphan test kills: it runs one git
// commit whose pre-commit hook never ends, so that its git holds the
// worktree's index.lock when the helper dies.
const (
	orphanHelperEnv    = "GITEXEC_ORPHAN_HELPER"
	orphanHelperDirEnv = "GITEXEC_ORPHAN_HELPER_DIR"
)

func TestOrphanHelperProcess(t *testing.T) {
	if os.Getenv(orphanHelperEnv) != "1" {
		t.Skip("helper process for the OrphanReaper tests")
	}
	_, err := hangingCommitRunner().Run(context.Background(), os.Getenv(orphanHelperDirEnv), "commit", "-a", "-q", "-m", "never")
	t.Fatalf("the helper's git runs until the test kills the helper; it returned %v", err)
}

// hangingCommitRunner's commits run the repository's pre-commit hook with
// no global or system configuration in the way.
func hangingCommitRunner() *Runner {
	return &Runner{Env: []string{"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1"}}
}

// hangingRepo makes a repository with a changed file and a pre-commit hook
// (which `git commit -a` runs holding index.lock) that writes to the fifo
// started (so the test knows git runs, holding index.lock) and then waits
// for a line on the fifo release, which nobody writes unless the test does.
func hangingRepo(t *testing.T) (dir, started, release string) {
	t.Helper()
	ctx := context.Background()
	fifos := t.TempDir()
	dir, started, release = t.TempDir(), filepath.Join(fifos, "started"), filepath.Join(fifos, "release")
	r := hangingCommitRunner()
	_, err := r.Run(ctx, dir, "init", "-q", "-b", "main")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f.txt"), []byte("x\n"), 0o644))
	_, err = r.Run(ctx, dir, "add", "f.txt")
	require.NoError(t, err)
	_, err = r.Run(ctx, dir, "commit", "-q", "-m", "first")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f.txt"), []byte("y\n"), 0o644))
	require.NoError(t, syscall.Mkfifo(started, 0o600))
	require.NoError(t, syscall.Mkfifo(release, 0o600))
	hook := "#!/bin/sh\necho started > '" + started + "'\nread line < '" + release + "'\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".git", "hooks", "pre-commit"), []byte(hook), 0o755))
	return dir, started, release
}

// awaitHook blocks until the hook has written to the fifo.
func awaitHook(t *testing.T, fifo string) {
	t.Helper()
	data, err := os.ReadFile(fifo) // opening a fifo for reading waits for its writer
	require.NoError(t, err)
	require.Equal(t, "started\n", string(data))
}

func TestRunnerMarksItsGitsWithTheirOwner(t *testing.T) {
	out, err := (&Runner{}).Run(context.Background(), t.TempDir(), "-c", "alias.owner=!printenv "+OwnerEnv, "owner")
	require.NoError(t, err)
	owner := strings.TrimSpace(out)
	assert.True(t, strings.HasPrefix(owner, strconv.Itoa(os.Getpid())+"."), "pid.start time of this process: %q", owner)
	assert.True(t, ownerAlive(owner))
	assert.False(t, ownerAlive(owner+"1"), "the same pid with another start time is another process")
	assert.True(t, ownerAlive("not an owner"), "what cannot be read is never taken for dead")
}

// orphanOfAKilledHost starts a helper host whose git commit hangs in its
// hook, kills the helper, and returns the repository and the release fifo.
func orphanOfAKilledHost(t *testing.T) (dir, release string, host int) {
	t.Helper()
	dir, fifo, release := hangingRepo(t)
	helper := exec.Command(os.Args[0], "-test.run=^TestOrphanHelperProcess$")
	helper.Env = append(os.Environ(), orphanHelperEnv+"=1", orphanHelperDirEnv+"="+dir)
	require.NoError(t, helper.Start())
	awaitHook(t, fifo)
	lock := filepath.Join(dir, ".git", "index.lock")
	require.FileExists(t, lock, "the hook runs while git holds the index")

	require.NoError(t, helper.Process.Kill())
	_ = helper.Wait()
	found, err := findOrphans(resolveRoots([]string{dir}))
	require.NoError(t, err)
	require.Len(t, found, 1, "the killed host's git, with its hook, still runs")
	t.Cleanup(func() { _ = syscall.Kill(-found[0].orphan.PGID, syscall.SIGKILL) })
	return dir, release, helper.Process.Pid
}

func TestOrphanReaperLetsAnOrphanFinish(t *testing.T) {
	dir, release, _ := orphanOfAKilledHost(t)
	ctx := context.Background()
	start := time.Now()
	fake := clock.NewFake(start)
	type reaped struct {
		orphans []Orphan
		err     error
	}
	done := make(chan reaped, 1)
	go func() {
		orphans, err := OrphanReaper{Clock: fake, Patience: time.Hour, Grace: time.Second}.Reap(ctx, []string{dir})
		done <- reaped{orphans, err}
	}()
	require.NoError(t, fake.BlockUntil(ctx, 2), "ReapOrphans found the orphan and waits for it")
	require.NoError(t, os.WriteFile(release, []byte("go\n"), 0o600))
	var got reaped
	for got.orphans == nil && got.err == nil {
		select {
		case got = <-done:
		default:
			fake.Advance(orphanPoll) // each tick is one look at the group
			runtime.Gosched()
		}
	}
	require.NoError(t, got.err)
	require.Len(t, got.orphans, 1)
	assert.Empty(t, got.orphans[0].Signal, "it ended on its own")
	assert.Empty(t, got.orphans[0].Survivors)
	assert.Less(t, fake.Since(start), time.Hour, "no signal was due")
	out, err := hangingCommitRunner().Run(ctx, dir, "log", "-1", "--format=%s")
	require.NoError(t, err)
	assert.Equal(t, "never\n", out, "the killed host's commit landed, as if its host had died a moment later")
	assert.NoFileExists(t, filepath.Join(dir, ".git", "index.lock"))
}

func TestOrphanReaperEndsAnOrphanThatDoesNotFinish(t *testing.T) {
	dir, _, host := orphanOfAKilledHost(t)
	lock := filepath.Join(dir, ".git", "index.lock")
	ctx := context.Background()
	orphans, err := OrphanReaper{Grace: 5 * time.Second}.Reap(ctx, []string{t.TempDir()})
	require.NoError(t, err)
	assert.Empty(t, orphans, "gits working elsewhere are left alone")

	orphans, err = OrphanReaper{Patience: 50 * time.Millisecond, Grace: 5 * time.Second}.Reap(ctx, []string{dir})
	require.NoError(t, err)
	require.Len(t, orphans, 1)
	o := orphans[0]
	assert.Equal(t, "SIGTERM", o.Signal, "git ends on SIGTERM")
	assert.Empty(t, o.Survivors)
	assert.GreaterOrEqual(t, len(o.PIDs), 2, "git and its hook: %v", o.PIDs)
	assert.Contains(t, o.PIDs, o.PGID, "git leads its group")
	assert.True(t, strings.HasPrefix(o.Owner, strconv.Itoa(host)+"."), "owner %q", o.Owner)
	real, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	assert.Equal(t, real, o.Dir)
	running, err := proc.GroupMembers(o.PGID, 0)
	require.NoError(t, err)
	assert.Empty(t, running, "the whole group is gone (zombies wait for init)")
	assert.NoFileExists(t, lock, "git removed its lock on SIGTERM")
}

func TestOrphanReaperLeavesTheGitsOfALivingHost(t *testing.T) {
	dir, fifo, _ := hangingRepo(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := hangingCommitRunner().Run(ctx, dir, "commit", "-a", "-q", "-m", "never")
		done <- err
	}()
	awaitHook(t, fifo)
	orphans, err := OrphanReaper{Grace: 5 * time.Second}.Reap(context.Background(), []string{dir})
	require.NoError(t, err)
	assert.Empty(t, orphans, "this process's own git is no orphan")
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
}
