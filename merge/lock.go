package merge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/agentforeman/foreman/internal/clock"
)

// repoLock serializes worktree add/remove and merges on one repository.
//
// Two layers, and why they are enough without package-level state:
//   - flock(2) on <git-common-dir>/foreman.lock. Every acquisition opens its
//     own file description, and flock locks conflict between open file
//     descriptions even inside one process. So the file lock alone already
//     serializes every Manager on the repository: in this process, in other
//     processes, and across Managers that know nothing of each other.
//   - a per-Manager channel mutex in front of it, so that the goroutines of
//     one Manager queue in Go (cancellable, no OS thread each) instead of all
//     polling the file lock.
//
// A process-wide registry keyed by repository path would only save the
// polling between two Managers of one process, at the cost of global mutable
// state; hosts that want one queue per repository share one Manager.
//
// The polling is paced by the wall clock, never by Config.Clock: the holder
// may be another process, whose release no fake clock in this one governs,
// so a fake clock that nobody advances would otherwise stall every waiter.
type repoLock struct {
	sem  chan struct{}
	path string
	log  *slog.Logger
}

func newRepoLock(path string, log *slog.Logger) *repoLock {
	return &repoLock{sem: make(chan struct{}, 1), path: path, log: log}
}

// lock blocks until this caller holds the repository, or ctx ends.
func (l *repoLock) lock(ctx context.Context) (unlock func(), err error) {
	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	f, err := l.flock(ctx)
	if err != nil {
		<-l.sem
		return nil, err
	}
	return func() {
		// Unlock before closing: a child forked meanwhile by any goroutine
		// holds a copy of the descriptor until it execs, and closing ours
		// alone would leave the flock held (the next waiter polls) until then.
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
		<-l.sem
	}, nil
}

// flock takes the file lock, polling with a short backoff: a blocking
// flock(2) cannot be interrupted by ctx.
func (l *repoLock) flock(ctx context.Context) (*os.File, error) {
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("merge: open repo lock: %w", err)
	}
	wait := 200 * time.Microsecond
	for polls := 0; ; polls++ {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("merge: flock %s: %w", l.path, err)
		}
		if polls == 0 {
			l.log.Debug("merge: waiting for the repository lock held by another Manager or process", "lock", l.path)
		}
		if err := clock.Sleep(ctx, clock.Real(), wait); err != nil {
			_ = f.Close()
			return nil, err
		}
		wait = min(wait*2, 10*time.Millisecond)
	}
}
