package gitexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Identity is a git author or committer.
type Identity struct {
	Name  string
	Email string
}

// DefaultIdentity is used when a Runner has none configured.
func DefaultIdentity() Identity { return Identity{Name: "Foreman", Email: "foreman@localhost"} }

// Runner runs git commands. The zero value is ready to use.
type Runner struct {
	// Git is the git binary; default "git" from PATH.
	Git string
	// Author and Committer are set on every command through the
	// GIT_AUTHOR_* and GIT_COMMITTER_* variables; default DefaultIdentity();
	// the committer defaults to the author.
	Author    Identity
	Committer Identity
	// Env is appended to the environment after Foreman's own variables.
	Env []string
	// WaitDelay bounds how long a cancelled command may take to exit after
	// SIGTERM before git is killed; default 5s.
	WaitDelay time.Duration
}

// Error is a git command that could not start, failed, or was cancelled.
type Error struct {
	Dir      string
	Args     []string
	ExitCode int // -1 when git did not exit normally
	Stderr   string
	Err      error
}

func (e *Error) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("git %s (in %s): exit %d: %s", strings.Join(e.Args, " "), e.Dir, e.ExitCode, msg)
}

// Unwrap returns the underlying cause: an *exec.ExitError, exec.ErrNotFound,
// or the context's error when the command was cancelled.
func (e *Error) Unwrap() error { return e.Err }

// Cmd is one git invocation.
type Cmd struct {
	Dir   string
	Args  []string
	Stdin io.Reader
	Env   []string // extra variables for this call only
}

// Run runs git args in dir and returns its standard output.
func (r *Runner) Run(ctx context.Context, dir string, args ...string) (string, error) {
	return r.RunCmd(ctx, Cmd{Dir: dir, Args: args})
}

// Lines runs git and splits its output into non-empty lines.
func (r *Runner) Lines(ctx context.Context, dir string, args ...string) ([]string, error) {
	out, err := r.Run(ctx, dir, args...)
	if err != nil {
		return nil, err
	}
	return SplitLines(out), nil
}

// RunCmd runs c and returns its standard output.
func (r *Runner) RunCmd(ctx context.Context, c Cmd) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", &Error{Dir: c.Dir, Args: c.Args, ExitCode: -1, Err: err}
	}
	git := r.Git
	if git == "" {
		git = "git"
	}
	cmd := exec.CommandContext(ctx, git, c.Args...)
	cmd.Dir = c.Dir
	cmd.Stdin = c.Stdin
	cmd.Env = r.environ(c.Env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// git may have children (hooks, remote helpers): signal the group.
		// SIGTERM, on which git removes its lock files before it exits: a
		// SIGKILL left index.lock behind, in the way of the next command.
		// WaitDelay later, exec kills git outright.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	}
	cmd.WaitDelay = r.WaitDelay
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = 5 * time.Second
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil {
		return stdout.String(), nil
	}
	gerr := &Error{Dir: c.Dir, Args: c.Args, ExitCode: -1, Stderr: stderr.String(), Err: err}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		gerr.ExitCode = exit.ExitCode()
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		gerr.Err = ctxErr
	}
	return stdout.String(), gerr
}

func (r *Runner) environ(extra []string) []string {
	author, committer := r.Author, r.Committer
	if author.Name == "" {
		author = DefaultIdentity()
	}
	if committer.Name == "" {
		committer = author
	}
	env := append(os.Environ(),
		"LC_ALL=C",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_EDITOR=true",
		"GIT_AUTHOR_NAME="+author.Name,
		"GIT_AUTHOR_EMAIL="+author.Email,
		"GIT_COMMITTER_NAME="+committer.Name,
		"GIT_COMMITTER_EMAIL="+committer.Email,
		OwnerEnv+"="+OwnerValue(),
	)
	env = append(env, r.Env...)
	return append(env, extra...)
}

// ExitCode returns the exit code carried by err, or -1.
func ExitCode(err error) int {
	var gerr *Error
	if errors.As(err, &gerr) {
		return gerr.ExitCode
	}
	return -1
}

// SplitLines splits s on newlines and drops empty lines.
func SplitLines(s string) []string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if line = strings.TrimRight(line, "\r"); line != "" {
			out = append(out, line)
		}
	}
	return out
}
