package team

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// A descriptor of the run lock copied into a child process between its fork
// and its exec (any goroutine may be starting git) must not keep the lock
// held after Run released it. The copy is made here with dup, which shares
// the open file the same way.
func TestReleasedRunLockIsFreeWhileACopyOfItsDescriptorLives(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lock, err := acquireRunLock(dir, runInfo{PID: 1})
	require.NoError(t, err)
	copied, err := syscall.Dup(int(lock.f.Fd()))
	require.NoError(t, err)
	defer syscall.Close(copied)

	lock.release()
	again, err := acquireRunLock(dir, runInfo{PID: 2})
	require.NoError(t, err, "the lock was released")
	again.release()
}
