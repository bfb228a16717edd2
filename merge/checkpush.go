package merge

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/gitexec"
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
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Env = append(gitexec.WithoutOwner(os.Environ()), "FOREMAN_ITEM="+string(id), "FOREMAN_COMMIT="+commit)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	code := -1
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	}
	return &CheckError{Item: id, Command: argv, ExitCode: code, Output: out.String(), Err: err}
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
