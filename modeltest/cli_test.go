package modeltest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/realagent"
	"github.com/agentforeman/foreman/modeltest"
)

// cliRun is one run of a real CLI: what it printed and how long it took.
type cliRun struct {
	stdout, stderr []byte
	lines          []map[string]any
	err            error
	wall           time.Duration // start to exit
	firstRequest   time.Duration // start to the server's first request
}

func (r cliRun) find(typ string) []map[string]any {
	var out []map[string]any
	for _, l := range r.lines {
		if l["type"] == typ {
			out = append(out, l)
		}
	}
	return out
}

func runCLI(t *testing.T, srv *modeltest.Server, dir string, env []string, argv ...string) cliRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	before := len(srv.Requests())
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := cliRun{stdout: stdout.Bytes(), stderr: stderr.Bytes(), err: err, wall: time.Since(start)}
	if reqs := srv.Requests(); len(reqs) > before {
		r.firstRequest = reqs[before].At.Sub(start)
	}
	sc := bufio.NewScanner(bytes.NewReader(r.stdout))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			r.lines = append(r.lines, m)
		}
	}
	return r
}

// claude runs Claude Code in dir against srv (HOME in a fresh directory,
// the extra environment after the usual one).
func claude(t *testing.T, srv *modeltest.Server, dir string, extraEnv []string, args ...string) cliRun {
	bin := realagent.Require(t, realagent.Claude)
	env := append(realagent.ClaudeEnv(srv.URL(), t.TempDir()), extraEnv...)
	return runCLI(t, srv, dir, env, append([]string{bin}, args...)...)
}

// codex runs Codex in dir against srv, with a fresh CODEX_HOME.
func codex(t *testing.T, srv *modeltest.Server, dir string, args ...string) cliRun {
	bin := realagent.Require(t, realagent.Codex)
	env, err := realagent.CodexEnv(srv.URL(), realagent.CodexHome(t))
	require.NoError(t, err)
	return runCLI(t, srv, dir, env, append([]string{bin}, args...)...)
}
