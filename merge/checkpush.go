package merge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/phases/gates"
)

func (m *Manager) clearLeftoverCheck(id foreman.ItemID) error {
	path := filepath.Join(m.root, checkPrefix+string(id))
	admin, _ := inspectWorktree(path)
	return m.clearStale(path, admin)
}

// runCheck runs argv in a temporary detached checkout of commit.
func (m *Manager) runCheck(ctx context.Context, id foreman.ItemID, commit string, argv []string) error {
	dir := filepath.Join(m.root, checkPrefix+string(id))
	if err := m.ensureExcluded(); err != nil {
		return err
	}
	if _, err := m.git.Run(ctx, m.topDir, "worktree", "add", "-q", "--detach", dir, commit); err != nil {
		return err
	}
	defer func() {
		admin, _ := inspectWorktree(dir)
		if err := m.clearStale(dir, admin); err != nil {
			m.log.Error("merge: removing check worktree", "path", dir, "err", err)
		}
	}()
	// Its own end: a check that never ends would hold the merge, and the
	// repository's lock, for good.
	checkCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var timedOut atomic.Bool
	timer := m.clk.AfterFunc(m.cfg.CheckTimeout, func() {
		timedOut.Store(true)
		cancel()
	})
	defer timer.Stop()
	run := gates.CheckCommand{Dir: dir, Argv: argv, Env: []string{"FOREMAN_ITEM=" + string(id), "FOREMAN_COMMIT=" + commit}}
	env := append(gitexec.WithoutOwner(os.Environ()), run.Env...)
	done := func() []string { return nil }
	if m.cfg.CheckSandbox != nil {
		contained, err := m.cfg.CheckSandbox.Contain(checkCtx, run)
		if err != nil {
			return &CheckError{Item: id, Command: argv, ExitCode: -1, Err: fmt.Errorf("%w: %w", gates.ErrNotContained, err)}
		}
		if len(contained.Argv) == 0 {
			return &CheckError{Item: id, Command: argv, ExitCode: -1, Err: fmt.Errorf("%w: the sandbox returned no command", gates.ErrNotContained)}
		}
		if contained.Done != nil {
			done = func() []string { return contained.Done(context.WithoutCancel(ctx)) }
		}
		run, env = contained.CheckCommand, contained.Env
	}
	cmd := exec.CommandContext(checkCtx, run.Argv[0], run.Argv[1:]...)
	cmd.Dir = run.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Env = env
	// A process that left the group and holds the output open is not
	// waited for past this (nor is a killed check's).
	cmd.WaitDelay = checkWaitDelay
	out := &tailBuffer{limit: checkOutputLimit}
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	refused := done()
	if r, ok := m.cfg.CheckSandbox.(homeRemover); ok {
		// The checkout is temporary: so is the home its sandbox kept for
		// it (a Go build cache: tens of MB a story).
		if err := r.RemoveHome(context.WithoutCancel(ctx), dir); err != nil {
			m.log.Warn("merge: removing the check's home", "path", dir, "err", err)
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if timedOut.Load() {
		return &CheckError{Item: id, Command: argv, ExitCode: -1, Output: out.String(), Refused: refused, TimedOut: true,
			Err: fmt.Errorf("timed out after %s; its process group was killed", m.cfg.CheckTimeout)}
	}
	if err == nil && len(refused) == 0 {
		return nil
	}
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		code = -1
	}
	return &CheckError{Item: id, Command: argv, ExitCode: code, Output: out.String(), Refused: refused, Err: err}
}

// homeRemover is a CheckSandbox that keeps a home per workspace
// (agentcmd.Driver): the check's is removed with its checkout.
type homeRemover interface {
	RemoveHome(ctx context.Context, workspace string) error
}

// checkWaitDelay bounds how long a check's output may stay open after it
// ended or was killed.
const checkWaitDelay = 5 * time.Second

// checkOutputLimit bounds the output of Request.Check kept for its
// CheckError: the tail, where a failure says why.
const checkOutputLimit = 64 << 10

// tailBuffer keeps the last limit bytes written to it.
type tailBuffer struct {
	mu    sync.Mutex
	limit int
	buf   []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > 2*b.limit {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.limit:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf) > b.limit {
		return string(b.buf[len(b.buf)-b.limit:])
	}
	return string(b.buf)
}

// pushIfAsked pushes the target and confirms the remote ref holds res.Commit.
func (m *Manager) pushIfAsked(ctx context.Context, res Result, req Request) (Result, error) {
	if !req.Push {
		return res, nil
	}
	perr := &PushError{Remote: m.cfg.Remote, Ref: m.target, Want: res.Commit}
	if _, err := m.git.Run(ctx, m.topDir, "push", "-q", m.cfg.Remote, m.target+":"+m.target); err != nil {
		perr.Err = err
		return res, perr
	}
	out, err := m.git.Run(ctx, m.topDir, "ls-remote", m.cfg.Remote, m.target)
	if err != nil {
		perr.Err = err
		return res, perr
	}
	if f := strings.Fields(out); len(f) > 0 {
		perr.Got = f[0]
	}
	if perr.Got == "" {
		return res, perr
	}
	if perr.Got != res.Commit {
		// After an AlreadyMerged retry the remote tip may be a later commit:
		// it must contain ours.
		if _, err := m.git.Run(ctx, m.topDir, "merge-base", "--is-ancestor", res.Commit, perr.Got); err != nil {
			return res, perr
		}
	}
	res.Pushed = true
	return res, nil
}
