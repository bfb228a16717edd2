package gitexec

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/agentforeman/foreman/internal/clock"
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
func hangingRepo(t *testing.T, hookPrelude string) (dir, started, release string) {
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
	hook := "#!/bin/sh\n" + hookPrelude + "echo started > '" + started + "'\nread line < '" + release + "'\n"
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

	env := WithoutOwner([]string{"A=1", OwnerEnv + "=1.2", "B=2"})
	assert.Equal(t, []string{"A=1", "B=2"}, env, "agents, gates and checks get no inherited owner")
}

// orphan is what a killed helper host left running: its git and the git's
// hook, with a pidfd each to wait for their end.
type orphan struct {
	dir, release string
	host         int
	pids         []int
	exited       []int // pidfds
}

// orphanOfAKilledHost starts a helper host whose git commit hangs in its
// hook (after hookPrelude), and kills the helper.
func orphanOfAKilledHost(t *testing.T, hookPrelude string) orphan {
	t.Helper()
	dir, started, release := hangingRepo(t, hookPrelude)
	helper := exec.Command(os.Args[0], "-test.run=^TestOrphanHelperProcess$")
	helper.Env = append(os.Environ(), orphanHelperEnv+"=1", orphanHelperDirEnv+"="+dir)
	require.NoError(t, helper.Start())
	awaitHook(t, started)
	require.FileExists(t, filepath.Join(dir, ".git", "index.lock"), "the hook runs while git holds the index")

	require.NoError(t, helper.Process.Kill())
	_ = helper.Wait()
	found, err := findOrphans(OwnerEnv, resolveRoots([]string{dir}))
	require.NoError(t, err)
	require.Len(t, found, 2, "the killed host's git, and its hook, still run")
	o := orphan{dir: dir, release: release, host: helper.Process.Pid}
	for _, p := range found {
		o.pids = append(o.pids, p.pid)
		fd, err := unix.PidfdOpen(p.pid, 0)
		require.NoError(t, err)
		o.exited = append(o.exited, fd)
		t.Cleanup(func() { _ = unix.Close(fd); _ = syscall.Kill(p.pid, syscall.SIGKILL) })
	}
	return o
}

// awaitExit blocks until the process behind the pidfd has ended.
func awaitExit(t *testing.T, pidfd int) {
	t.Helper()
	for {
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		require.NoError(t, err)
		require.Equal(t, 1, n)
		return
	}
}

// reaping runs an OrphanReaper on a fake clock.
type reaping struct {
	fake  *clock.Fake
	looks chan struct{} // one per look at /proc while it waits
	done  chan struct{}
	got   []Orphan
	err   error
}

func startReaping(ctx context.Context, dir string, patience, grace time.Duration) *reaping {
	r := &reaping{fake: clock.NewFake(time.Unix(0, 0)), looks: make(chan struct{}, 1<<16), done: make(chan struct{})}
	reaper := OrphanReaper{Clock: r.fake, Patience: patience, Grace: grace, looked: func() { r.looks <- struct{}{} }}
	go func() {
		defer close(r.done)
		r.got, r.err = reaper.Reap(ctx, []string{dir})
	}()
	return r
}

// waiting blocks until the reaper waits on the clock (a deadline and its
// poll ticker).
func (r *reaping) waiting(t *testing.T) {
	t.Helper()
	require.NoError(t, r.fake.BlockUntil(context.Background(), 2))
}

// finish ticks the poll, one tick per look the reaper has taken, until
// Reap returns: called once the orphans it waits for are gone, so that the
// next look ends it, and the fake clock moves no faster than the reaper.
func (r *reaping) finish(t *testing.T) ([]Orphan, error) {
	t.Helper()
	for {
		r.fake.Advance(orphanPoll)
		select {
		case <-r.done:
			return r.got, r.err
		case <-r.looks:
		}
	}
}

func TestOrphanReaperLetsAnOrphanFinish(t *testing.T) {
	o := orphanOfAKilledHost(t, "")
	r := startReaping(context.Background(), o.dir, time.Minute, time.Minute)
	r.waiting(t)
	require.NoError(t, os.WriteFile(o.release, []byte("go\n"), 0o600))
	for _, fd := range o.exited {
		awaitExit(t, fd)
	}
	got, err := r.finish(t)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Empty(t, got[0].Signal, "it ended on its own")
	assert.Empty(t, got[0].Survivors)
	assert.ElementsMatch(t, o.pids, got[0].PIDs)
	assert.Less(t, r.fake.Since(time.Unix(0, 0)), time.Minute, "no signal was due")
	out, err := hangingCommitRunner().Run(context.Background(), o.dir, "log", "-1", "--format=%s")
	require.NoError(t, err)
	assert.Equal(t, "never\n", out, "the killed host's commit landed, as if its host had died a moment later")
	assert.NoFileExists(t, filepath.Join(o.dir, ".git", "index.lock"))
}

func TestOrphanReaperEndsAnOrphanThatDoesNotFinish(t *testing.T) {
	o := orphanOfAKilledHost(t, "")
	orphans, err := OrphanReaper{}.Reap(context.Background(), []string{t.TempDir()})
	require.NoError(t, err)
	assert.Empty(t, orphans, "gits working elsewhere are left alone")

	r := startReaping(context.Background(), o.dir, time.Minute, time.Minute)
	r.waiting(t)
	r.fake.Advance(time.Minute) // patience is over: SIGTERM
	for _, fd := range o.exited {
		awaitExit(t, fd)
	}
	got, err := r.finish(t)
	require.NoError(t, err)
	require.Len(t, got, 1)
	g := got[0]
	assert.Equal(t, "SIGTERM", g.Signal, "git ends on SIGTERM")
	assert.Empty(t, g.Survivors)
	assert.ElementsMatch(t, o.pids, g.PIDs, "git and its hook")
	assert.Contains(t, g.PIDs, g.PGID, "git leads its group")
	assert.True(t, strings.HasPrefix(g.Owner, strconv.Itoa(o.host)+"."), "owner %q", g.Owner)
	real, err := filepath.EvalSymlinks(o.dir)
	require.NoError(t, err)
	assert.Contains(t, []string{real, filepath.Join(real, ".git")}, g.Dir)
	assert.NoFileExists(t, filepath.Join(o.dir, ".git", "index.lock"), "git removed its lock on SIGTERM")
	out, err := hangingCommitRunner().Run(context.Background(), o.dir, "status", "--porcelain")
	require.NoError(t, err)
	assert.Equal(t, " M f.txt\n", out, "the commit did not happen")
}

func TestOrphanReaperKillsWhatIgnoresSIGTERM(t *testing.T) {
	o := orphanOfAKilledHost(t, "trap '' TERM\n")
	r := startReaping(context.Background(), o.dir, time.Minute, time.Minute)
	r.waiting(t)
	r.fake.Advance(time.Minute) // SIGTERM: git ends, its hook does not
	r.waiting(t)
	r.fake.Advance(time.Minute) // SIGKILL
	for _, fd := range o.exited {
		awaitExit(t, fd)
	}
	got, err := r.finish(t)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "SIGKILL", got[0].Signal)
	assert.Empty(t, got[0].Survivors)
}

func TestOrphanReaperStopsWaitingWhenCancelled(t *testing.T) {
	o := orphanOfAKilledHost(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	r := startReaping(ctx, o.dir, time.Minute, time.Minute)
	r.waiting(t)
	cancel()
	<-r.done
	require.ErrorIs(t, r.err, context.Canceled)
	require.Len(t, r.got, 1)
	assert.Empty(t, r.got[0].Signal, "nothing was signalled")
	assert.Empty(t, r.got[0].Survivors, "nothing outlived a SIGKILL")
	found, err := findOrphans(OwnerEnv, resolveRoots([]string{o.dir}))
	require.NoError(t, err)
	assert.Len(t, found, 2, "the orphans run on")
}

// commitHanging runs, in this process, a git commit that hangs in its
// hook, and returns once the hook runs; stop cancels the commit and
// returns its error.
func commitHanging(t *testing.T) (dir string, stop func() error) {
	t.Helper()
	dir, started, _ := hangingRepo(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := hangingCommitRunner().Run(ctx, dir, "commit", "-a", "-q", "-m", "never")
		done <- err
	}()
	awaitHook(t, started)
	return dir, func() error { cancel(); return <-done }
}

func TestOrphanReaperLeavesTheGitsOfALivingHost(t *testing.T) {
	dir, stop := commitHanging(t)
	orphans, err := OrphanReaper{}.Reap(context.Background(), []string{dir})
	require.NoError(t, err)
	assert.Empty(t, orphans, "this process's own git is no orphan")
	assert.ErrorIs(t, stop(), context.Canceled)
}

func TestOrphanReaperLeavesAProcessThatInheritedADeadOwner(t *testing.T) {
	dir := t.TempDir()
	// This process's child, and a detached one, both carrying a dead owner.
	for _, detached := range []bool{false, true} {
		cmd := exec.Command("sleep", "60")
		cmd.Dir = dir
		// No process can have this pid (above the kernel's limit): a dead owner.
		cmd.Env = append(os.Environ(), OwnerEnv+"=999999999.1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: !detached, Setsid: detached}
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	orphans, err := OrphanReaper{}.Reap(context.Background(), []string{dir})
	require.NoError(t, err)
	assert.Empty(t, orphans)
}

// A cancelled git gets SIGTERM, on which it removes its lock files: SIGKILL
// left index.lock in the way of the next command.
func TestRunnerCancelledLeavesNoLock(t *testing.T) {
	dir, stop := commitHanging(t)
	require.FileExists(t, filepath.Join(dir, ".git", "index.lock"))
	require.ErrorIs(t, stop(), context.Canceled)
	assert.NoFileExists(t, filepath.Join(dir, ".git", "index.lock"))
	_, err := hangingCommitRunner().Run(context.Background(), dir, "add", "-A")
	assert.NoError(t, err, "the next command finds the index free")
}
