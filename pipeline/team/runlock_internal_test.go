package team

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A descriptor of the run lock copied into a child process between its fork
// and its exec (any goroutine may be starting git) must not keep the lock
// held after Run released it. The copy is made here with dup, which shares
// the open file the same way.
func TestReleasedRunLockIsFreeWhileACopyOfItsDescriptorLives(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lock, err := acquireRunLock(context.Background(), dir, runInfo{PID: 1})
	require.NoError(t, err)
	copied, err := syscall.Dup(int(lock.f.Fd()))
	require.NoError(t, err)
	defer syscall.Close(copied)

	lock.release()
	again, err := acquireRunLock(context.Background(), dir, runInfo{PID: 2})
	require.NoError(t, err, "the lock was released")
	again.release()
}

// deadPID returns a pid no process has, nor can have.
func deadPID(t *testing.T) int {
	t.Helper()
	// Above the kernel's pid_max no process can ever be: a pid of a
	// process that exited may be reused on a busy machine before the test
	// looks (seen: the "freed" case found it alive).
	data, err := os.ReadFile("/proc/sys/kernel/pid_max")
	require.NoError(t, err)
	max, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)
	pid := max + 1
	require.True(t, errors.Is(syscall.Kill(pid, 0), syscall.ESRCH))
	return pid
}

// The lock of a host that died is held a moment longer by a child it forked
// and that has not exec'd yet: a Run waits for it, bounded; the lock of a
// live holder is refused at once.
func TestARunWaitsForTheLockOfADeadHolderOnly(t *testing.T) {
	t.Parallel()
	host, _ := os.Hostname()
	for _, tc := range []struct {
		name    string
		holder  func(t *testing.T) int
		release bool // the dead holder's last descriptor closes
		wait    time.Duration
		busy    bool
	}{
		{"a dead holder's lock, freed", deadPID, true, time.Hour, false},
		{"a dead holder's lock, never freed", deadPID, false, 50 * time.Millisecond, true},
		{"a live holder", func(*testing.T) int { return os.Getpid() }, false, time.Hour, true},
		{"a holder on another host", deadPID, false, time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			holderHost := host
			if tc.name == "a holder on another host" {
				holderHost = "elsewhere"
			}
			held, err := acquireRunLock(context.Background(), dir, runInfo{PID: tc.holder(t), Host: holderHost})
			require.NoError(t, err)
			if tc.release {
				go held.release()
			} else {
				defer held.release()
			}
			// os.Getpid()+1 as the new holder's pid: not the live holder's.
			lock, err := acquireRunLockWaiting(context.Background(), dir, runInfo{PID: os.Getpid() + 1, Host: host}, tc.wait)
			if tc.busy {
				assert.ErrorIs(t, err, ErrBusy)
				return
			}
			require.NoError(t, err)
			lock.release()
		})
	}
}

// A holder empties the lock's file just before it unlocks (and a new one
// just after it locks): a Run that finds the lock held with nothing written
// in it looks again instead of giving up at once (seen in CI: "another
// process is running this team" while the holder released).
func TestALockChangingHandsIsLookedAtAgain(t *testing.T) {
	t.Parallel()
	host, _ := os.Hostname()
	dir := t.TempDir()
	f, err := os.OpenFile(runLockPath(dir), os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer f.Close()
	fd := int(f.Fd())
	require.NoError(t, syscall.Flock(fd, syscall.LOCK_EX))
	unlocked := make(chan struct{})
	go func() { // the holder's unlock, after its truncate
		defer close(unlocked)
		_ = syscall.Flock(fd, syscall.LOCK_UN)
	}()
	lock, err := acquireRunLockWaiting(context.Background(), dir, runInfo{PID: os.Getpid() + 1, Host: host}, time.Hour)
	<-unlocked
	require.NoError(t, err)
	lock.release()
}

// A pid the holder had, now another process's (started after the holder
// took the lock), is the holder's death, not its life: its lock is waited
// for; a holder that is what it says is busy at once.
func TestAReusedPIDIsNotTheLocksHolder(t *testing.T) {
	t.Parallel()
	host, _ := os.Hostname()
	other := exec.Command("sleep", "60")
	require.NoError(t, other.Start())
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	assert.True(t, startedAfter(os.Getpid(), time.Now().Add(-24*time.Hour)), "this process started within the day")
	assert.False(t, startedAfter(os.Getpid(), time.Now().Add(time.Minute)))

	ticks, ok := startTicks(other.Process.Pid)
	require.True(t, ok)
	for _, tc := range []struct {
		name    string
		started time.Time
		since   int64
		busy    bool
	}{
		{"its pid reused since", time.Now().Add(-time.Hour), 0, false},
		{"the holder itself", time.Now().Add(time.Hour), 0, true},
		{"its pid reused within the second (another start)", time.Now(), ticks - 1, false},
		{"the holder itself, by its start", time.Now().Add(-time.Hour), ticks, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			held, err := acquireRunLock(context.Background(), dir, runInfo{PID: other.Process.Pid, Host: host, Started: tc.started, Since: tc.since})
			require.NoError(t, err)
			if tc.busy {
				defer held.release()
			} else {
				go held.release()
			}
			lock, err := acquireRunLockWaiting(context.Background(), dir, runInfo{PID: os.Getpid() + 1, Host: host}, time.Hour)
			if tc.busy {
				assert.ErrorIs(t, err, ErrBusy)
				return
			}
			require.NoError(t, err)
			lock.release()
		})
	}
}
