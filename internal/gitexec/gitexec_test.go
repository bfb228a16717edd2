package gitexec

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunnerCommitsWithExplicitIdentity(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	r := &Runner{Author: Identity{Name: "Ada", Email: "ada@example.com"},
		// A developer's core.hooksPath or commit.gpgsign must not break the commit.
		Env: []string{"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1"}}
	_, err := r.Run(ctx, dir, "init", "-q", "-b", "main")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f.txt"), []byte("x\n"), 0o644))
	_, err = r.Run(ctx, dir, "add", "f.txt")
	require.NoError(t, err)
	_, err = r.Run(ctx, dir, "commit", "-q", "-m", "first; rm -rf / $(echo no shell)")
	require.NoError(t, err)

	out, err := r.Run(ctx, dir, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s")
	require.NoError(t, err)
	assert.Equal(t, "Ada <ada@example.com>|Ada <ada@example.com>|first; rm -rf / $(echo no shell)", strings.TrimSpace(out))

	lines, err := r.Lines(ctx, dir, "ls-files")
	require.NoError(t, err)
	assert.Equal(t, []string{"f.txt"}, lines)
}

func TestRunnerTypedErrorCarriesStderrAndExitCode(t *testing.T) {
	dir := t.TempDir()
	// Stop git's upward search at dir: a TMPDIR inside some work tree would
	// otherwise make dir part of that repository.
	r := Runner{Env: []string{"GIT_CEILING_DIRECTORIES=" + filepath.Dir(dir)}}
	_, err := r.Run(context.Background(), dir, "rev-parse", "HEAD")
	var gerr *Error
	require.ErrorAs(t, err, &gerr)
	assert.Equal(t, 128, gerr.ExitCode)
	assert.Equal(t, 128, ExitCode(err))
	assert.Contains(t, gerr.Stderr, "not a git repository")
	assert.Contains(t, err.Error(), "git rev-parse HEAD")
	assert.Equal(t, -1, ExitCode(errors.New("other")))
}

func TestRunnerMissingBinary(t *testing.T) {
	r := Runner{Git: "/nonexistent/git"}
	_, err := r.Run(context.Background(), t.TempDir(), "status")
	var gerr *Error
	require.ErrorAs(t, err, &gerr)
	assert.Equal(t, -1, gerr.ExitCode)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestRunnerHonoursCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var r Runner
	_, err := r.Run(ctx, t.TempDir(), "status")
	assert.ErrorIs(t, err, context.Canceled)

	// A command that blocks on stdin is killed when its context ends.
	dir := t.TempDir()
	_, err = r.Run(context.Background(), dir, "init", "-q")
	require.NoError(t, err)
	ctx2, cancel2 := context.WithCancel(context.Background())
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	defer pw.Close()
	defer pr.Close()
	done := make(chan error, 1)
	go func() {
		_, err := r.RunCmd(ctx2, Cmd{Dir: dir, Args: []string{"hash-object", "--stdin"}, Stdin: pr})
		done <- err
	}()
	cancel2()
	assert.ErrorIs(t, <-done, context.Canceled)
}

func TestRunnerExtraEnv(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	r := Runner{Env: []string{"GIT_DIR=/nonexistent-foreman"}}
	_, err := r.Run(context.Background(), t.TempDir(), "rev-parse", "--git-dir")
	assert.Error(t, err, "GIT_DIR from Env must reach git")
	_, err = r.RunCmd(context.Background(), Cmd{Dir: t.TempDir(), Args: []string{"--version"}, Env: []string{"GIT_DIR=/x"}})
	assert.NoError(t, err)
}

func TestSplitLines(t *testing.T) {
	assert.Equal(t, []string{"a", "b"}, SplitLines("a\r\n\nb\n"))
	assert.Nil(t, SplitLines(""))
}
