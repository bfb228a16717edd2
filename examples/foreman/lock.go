package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// errBusy: another foreman process runs the team on this repository.
var errBusy = errors.New("another foreman process is running the team on this repository")

// runLock is held by the process running the team, so that two processes
// never coordinate one repository at once (each would hand out the same
// stories). The kernel drops an flock when its holder dies, however it
// dies, so a crashed run never leaves the repository locked.
type runLock struct{ f *os.File }

// lockPath is the lock file in the team's state directory.
func lockPath(repo string) string { return filepath.Join(repo, ".foreman", "run.lock") }

// acquireRun takes the repository's run lock, or fails with errBusy
// naming the holder's pid.
func acquireRun(repo string) (*runLock, error) {
	path := lockPath(repo)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (pid %s)", errBusy, holder(path))
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &runLock{f: f}, nil
}

func (l *runLock) release() {
	if l != nil && l.f != nil {
		_ = l.f.Truncate(0)
		_ = l.f.Close() // closing drops the flock
		l.f = nil
	}
}

// runningPid reports whether a process runs the team on repo, and its pid:
// it tries the lock (shared, so that two status readers do not see each
// other) and lets it go at once.
func runningPid(repo string) (running bool, pid string) {
	path := lockPath(repo)
	f, err := os.Open(path)
	if err != nil {
		return false, ""
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err == nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return false, ""
	}
	return true, holder(path)
}

func holder(path string) string {
	data, err := os.ReadFile(path)
	if err != nil || strings.TrimSpace(string(data)) == "" {
		return "unknown"
	}
	return strings.TrimSpace(string(data))
}
