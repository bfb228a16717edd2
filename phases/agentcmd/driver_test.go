package agentcmd

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
)

func TestExecuteStreamsLinesInOrder(t *testing.T) {
	dir := t.TempDir()
	agent := writeScript(t, dir, "agent", `
echo one
echo two
echo warn >&2
printf 'three\r\nno-newline'
`)
	rec := &recorder{}
	res, err := New(Config{Argv: []string{agent}}).Execute(context.Background(),
		phases.AgentRequest{WorkspacePath: dir, TaskPrompt: "do it"}, rec.callback)
	require.NoError(t, err)

	assert.True(t, res.Success)
	assert.Equal(t, 0, res.ExitCode)
	assert.Empty(t, res.Signal)
	assert.False(t, res.TimedOut)
	assert.Positive(t, res.Duration)
	assert.Equal(t, []string{"one", "two", "three", "no-newline"}, rec.stdoutLines())
	assert.Equal(t, []string{"warn"}, rec.lines(phases.StreamStderr))
	assert.Equal(t, "one\ntwo\nthree\nno-newline\n", res.Output)
	assert.Equal(t, "warn\n", res.Stderr)
	for _, ev := range rec.events {
		assert.False(t, ev.Time.IsZero())
		assert.Equal(t, ev.Line, ev.Text)
	}
}

func TestExecuteNonZeroExitIsAResultNotAnError(t *testing.T) {
	dir := t.TempDir()
	agent := writeScript(t, dir, "agent", "echo 'compile error' >&2\nexit 3\n")
	res, err := New(Config{Argv: []string{agent}}).Execute(context.Background(),
		phases.AgentRequest{WorkspacePath: dir}, nil)
	require.NoError(t, err)
	assert.False(t, res.Success)
	assert.Equal(t, 3, res.ExitCode)
	assert.Empty(t, res.Signal)
	assert.Equal(t, "compile error\n", res.Stderr)
}

// fakeAgent installs a script named name on a fresh PATH that records its
// arguments, one per line, in args.txt and prints the fixture.
func fakeAgent(t *testing.T, name, fixture string, exit int) (dir string) {
	t.Helper()
	bin := t.TempDir()
	// The fixture goes beside the script: the sandbox binds the program's
	// directory, not the repository's testdata (which, in a checkout under
	// /tmp, the sandbox's own /tmp hides).
	b, err := os.ReadFile(filepath.Join("testdata", fixture))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(bin, "fixture.out"), b, 0o644))
	writeScript(t, bin, name, `
for a in "$@"; do printf '%s\n' "$a"; done > "$FOREMAN_WORKSPACE/args.txt"
cat > "$FOREMAN_WORKSPACE/stdin.txt"
cat "$(dirname "$0")/fixture.out"
exit `+strconv.Itoa(exit)+`
`)
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return t.TempDir()
}

// readStdin is what the fake agent read from its stdin.
func readStdin(t *testing.T, ws string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ws, "stdin.txt"))
	require.NoError(t, err)
	return string(b)
}

func readArgs(t *testing.T, ws string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ws, "args.txt"))
	require.NoError(t, err)
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func TestExecuteClaudeCode(t *testing.T) {
	tests := []struct {
		name      string
		fixture   string
		exit      int
		req       phases.AgentRequest
		wantArgs  []string
		wantStdin string
		check     func(t *testing.T, res phases.AgentResult)
	}{
		{
			name: "first iteration", fixture: "claude_success.jsonl",
			req:       phases.AgentRequest{TaskPrompt: "fix the tests"},
			wantArgs:  []string{"-p", "--output-format", "stream-json", "--verbose"},
			wantStdin: "fix the tests",
			check: func(t *testing.T, res phases.AgentResult) {
				assert.True(t, res.Success)
				assert.Equal(t, "3f2c9a1e-7b4d-4e21-9c55-0a8d6e2b1f47", res.SessionID)
				assert.Equal(t, phases.TokenUsage{Input: 13, Output: 256, CacheRead: 43550, CacheWrite: 5650}, res.Tokens)
				assert.InDelta(t, 0.0412875, res.CostUSD, 1e-12)
				assert.Equal(t, "claude-sonnet-4-5-20250929", res.Model)
				assert.Equal(t, "Fixed the off-by-one in Add; the tests pass now.", res.Result)
			},
		},
		{
			name: "resumed with constraints", fixture: "claude_success.jsonl",
			req: phases.AgentRequest{
				TaskPrompt: "fix the tests", Feedback: "TestAdd still fails", SessionID: "3f2c9a1e-7b4d-4e21-9c55-0a8d6e2b1f47", Iteration: 2,
				Constraints: phases.AgentConstraints{MaxTurns: 7, AllowedTools: []string{"Read", "Edit"}, Model: "opus"},
			},
			wantArgs: []string{"-p", "--output-format", "stream-json", "--verbose",
				"--model", "opus", "--max-turns", "7", "--allowedTools=Read,Edit", "--resume", "3f2c9a1e-7b4d-4e21-9c55-0a8d6e2b1f47"},
			wantStdin: "fix the tests\n\n## Feedback from the previous iteration\n\nTestAdd still fails",
			check:     func(t *testing.T, res phases.AgentResult) { assert.True(t, res.Success) },
		},
		{
			name: "agent error with exit 0", fixture: "claude_error_max_turns.jsonl",
			req:       phases.AgentRequest{TaskPrompt: "x"},
			wantArgs:  []string{"-p", "--output-format", "stream-json", "--verbose"},
			wantStdin: "x",
			check: func(t *testing.T, res phases.AgentResult) {
				assert.False(t, res.Success)
				assert.Equal(t, 0, res.ExitCode)
				assert.Equal(t, "error_max_turns: Reached maximum number of turns (1)", res.Error)
				assert.Equal(t, "5d8e2f90-1a3b-4c5d-8e6f-7a8b9c0d1e2f", res.SessionID)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := fakeAgent(t, "claude", tt.fixture, tt.exit)
			tt.req.WorkspacePath = ws
			rec := &recorder{}
			res, err := New(Config{Format: FormatClaude, Permissions: PermissionsNone}).Execute(context.Background(), tt.req, rec.callback)
			require.NoError(t, err)
			assert.Equal(t, tt.wantArgs, readArgs(t, ws))
			assert.Equal(t, tt.wantStdin, readStdin(t, ws), "the prompt goes on stdin")
			assert.Equal(t, fixtureLines(t, tt.fixture), rec.stdoutLines())
			last := rec.events[len(rec.events)-1]
			assert.Equal(t, phases.StreamResult, last.Kind)
			tt.check(t, res)
		})
	}
}

func TestExecuteCodex(t *testing.T) {
	tests := []struct {
		name      string
		fixture   string
		exit      int
		req       phases.AgentRequest
		wantArgs  []string
		wantStdin string
		check     func(t *testing.T, res phases.AgentResult)
	}{
		{
			name: "first iteration", fixture: "codex_success.jsonl",
			req:      phases.AgentRequest{TaskPrompt: "-fix the tests"},
			wantArgs: []string{"exec", "--json", "-"}, wantStdin: "-fix the tests",
			check: func(t *testing.T, res phases.AgentResult) {
				assert.True(t, res.Success)
				assert.Equal(t, "0199a213-81c0-7800-8aa1-bbab2a035a53", res.SessionID)
				assert.Equal(t, phases.TokenUsage{Input: 315, Output: 122, CacheRead: 24448}, res.Tokens)
				assert.Equal(t, "Fixed the off-by-one in `Add`; `go test ./...` passes.", res.Result)
			},
		},
		{
			name: "resumed", fixture: "codex_success.jsonl",
			req: phases.AgentRequest{TaskPrompt: "fix", SessionID: "0199a213-81c0-7800-8aa1-bbab2a035a53",
				Constraints: phases.AgentConstraints{Model: "gpt-5-codex", MaxTurns: 3}},
			wantArgs: []string{"exec", "--json", "--model", "gpt-5-codex", "resume", "0199a213-81c0-7800-8aa1-bbab2a035a53", "-"}, wantStdin: "fix",
			check: func(t *testing.T, res phases.AgentResult) { assert.True(t, res.Success) },
		},
		{
			name: "turn failed with exit 0", fixture: "codex_turn_failed.jsonl",
			req:      phases.AgentRequest{TaskPrompt: "fix"},
			wantArgs: []string{"exec", "--json", "-"}, wantStdin: "fix",
			check: func(t *testing.T, res phases.AgentResult) {
				assert.False(t, res.Success)
				assert.Equal(t, 0, res.ExitCode)
				assert.Contains(t, res.Error, "stream disconnected")
			},
		},
		{
			name: "turn failed with exit 1", fixture: "codex_turn_failed.jsonl", exit: 1,
			req:      phases.AgentRequest{TaskPrompt: "fix"},
			wantArgs: []string{"exec", "--json", "-"}, wantStdin: "fix",
			check: func(t *testing.T, res phases.AgentResult) {
				assert.False(t, res.Success)
				assert.Equal(t, 1, res.ExitCode)
				assert.Equal(t, "0199b5c7-2d41-7a10-9f3e-4c2d1b0a9e88", res.SessionID)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := fakeAgent(t, "codex", tt.fixture, tt.exit)
			tt.req.WorkspacePath = ws
			rec := &recorder{}
			res, err := New(Config{Format: FormatCodex, Permissions: PermissionsNone}).Execute(context.Background(), tt.req, rec.callback)
			require.NoError(t, err)
			assert.Equal(t, tt.wantArgs, readArgs(t, ws))
			assert.Equal(t, tt.wantStdin, readStdin(t, ws), "the prompt goes on stdin")
			assert.Equal(t, fixtureLines(t, tt.fixture), rec.stdoutLines())
			tt.check(t, res)
		})
	}
}

func TestExecuteDeliversPromptAndFeedback(t *testing.T) {
	req := phases.AgentRequest{TaskPrompt: "add a test", Feedback: "L1 tests: TestFoo failed", Iteration: 2, SessionID: "s-9"}
	want := "add a test\n\n## Feedback from the previous iteration\n\nL1 tests: TestFoo failed"
	tests := []struct {
		name string
		cfg  func(agent string) Config
		// script writes what it received to received.txt.
		script string
		want   string
	}{
		{
			name:   "appended argument",
			cfg:    func(agent string) Config { return Config{Argv: []string{agent}} },
			script: `printf '%s' "$1" > received.txt`,
			want:   want,
		},
		{
			name: "placeholders",
			cfg: func(agent string) Config {
				return Config{Argv: []string{agent, "--task={task}", "--feedback", "{feedback}", "--it={iteration}", "--session={session}", "--ws={workspace}"}}
			},
			script: `printf '%s|' "$@" > received.txt`,
			want:   "--task=add a test|--feedback|L1 tests: TestFoo failed|--it=2|--session=s-9|--ws={ws}|",
		},
		{
			name:   "stdin",
			cfg:    func(agent string) Config { return Config{Argv: []string{agent, "--"}, PromptVia: PromptStdin} },
			script: `[ "$#" = 1 ] || exit 9; cat > received.txt`,
			want:   want,
		},
		{
			name: "custom composition",
			cfg: func(agent string) Config {
				return Config{Argv: []string{agent}, Prompt: func(r phases.AgentRequest) string { return "FIX: " + r.Feedback }}
			},
			script: `printf '%s' "$1" > received.txt`,
			want:   "FIX: L1 tests: TestFoo failed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			agent := writeScript(t, t.TempDir(), "agent", tt.script+"\n")
			req := req
			req.WorkspacePath = ws
			res, err := New(tt.cfg(agent)).Execute(context.Background(), req, nil)
			require.NoError(t, err)
			require.True(t, res.Success, "stderr: %s", res.Stderr)
			got, err := os.ReadFile(filepath.Join(ws, "received.txt"))
			require.NoError(t, err)
			assert.Equal(t, strings.ReplaceAll(tt.want, "{ws}", ws), string(got))
		})
	}
}

func TestExecuteEnvironmentAndWorkingDirectory(t *testing.T) {
	ws := t.TempDir()
	agent := writeScript(t, t.TempDir(), "agent", `
echo "cwd=$(pwd -P)"
echo "extra=$EXTRA"
echo "session=$FOREMAN_SESSION_ID iteration=$FOREMAN_ITERATION"
`)
	rec := &recorder{}
	cfg := Config{Argv: []string{agent}, Env: []string{"EXTRA=yes", "FOREMAN_ITERATION=overridden"}}
	_, err := New(cfg).Execute(context.Background(), phases.AgentRequest{WorkspacePath: ws, SessionID: "abc", Iteration: 4}, rec.callback)
	require.NoError(t, err)
	real, err := filepath.EvalSymlinks(ws)
	require.NoError(t, err)
	assert.Equal(t, []string{"cwd=" + real, "extra=yes", "session=abc iteration=overridden"}, rec.stdoutLines())
}

// A request's Env reaches the agent's process after the driver's FOREMAN_*
// entries and Config.Env: a key it gives wins over both.
func TestExecuteRequestEnvironment(t *testing.T) {
	agent := writeScript(t, t.TempDir(), "agent", `
echo "item=$FOREMAN_ITEM extra=$EXTRA iteration=$FOREMAN_ITERATION session=$FOREMAN_SESSION_ID"
`)
	tests := []struct {
		name   string
		cfgEnv []string
		reqEnv []string
		want   string
	}{
		{"no request entries", []string{"EXTRA=config"}, nil, "item= extra=config iteration=2 session=s1"},
		{"a new key", nil, []string{"FOREMAN_ITEM=US-001"}, "item=US-001 extra= iteration=2 session=s1"},
		{"the request wins over Config.Env", []string{"EXTRA=config"}, []string{"EXTRA=request"}, "item= extra=request iteration=2 session=s1"},
		{"the request wins over the driver's own", []string{"FOREMAN_ITERATION=config"}, []string{"FOREMAN_ITERATION=7", "FOREMAN_SESSION_ID=s9"}, "item= extra= iteration=7 session=s9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("EXTRA", "")
			t.Setenv("FOREMAN_ITEM", "")
			rec := &recorder{}
			cfg := Config{Argv: []string{agent}, Env: tt.cfgEnv}
			_, err := New(cfg).Execute(context.Background(), phases.AgentRequest{
				WorkspacePath: t.TempDir(), SessionID: "s1", Iteration: 2, Env: tt.reqEnv,
			}, rec.callback)
			require.NoError(t, err)
			assert.Equal(t, []string{tt.want}, rec.stdoutLines())
		})
	}
}

func TestExecuteResumeArguments(t *testing.T) {
	const uuid1 = "0199a213-81c0-7800-8aa1-bbab2a035a53"
	agent := writeScript(t, t.TempDir(), "agent", `printf '%s|' "$@"`+"\n")
	tests := []struct {
		name    string
		cfg     Config
		session string
		want    string
	}{
		{"text format has no resume arguments", Config{}, "s1", "p|"},
		{"configured resume arguments", Config{ResumeArgs: []string{"--continue-from", "{session}"}}, "s1", "--continue-from|s1|p|"},
		{"no session, no resume arguments", Config{ResumeArgs: []string{"--continue-from", "{session}"}}, "", "p|"},
		{"claude resume disabled", Config{Format: FormatClaude, ResumeArgs: []string{}, PromptVia: PromptArg}, uuid1, "p|"},
		{"claude", Config{Format: FormatClaude, PromptVia: PromptArg}, uuid1, "--resume|" + uuid1 + "|p|"},
		{"codex", Config{Format: FormatCodex, PromptVia: PromptArg}, uuid1, "resume|" + uuid1 + "|--|p|"},
		{"codex, prompt on stdin", Config{Format: FormatCodex}, uuid1, "resume|" + uuid1 + "|-|"},
		{"prompt placed by the resume arguments", Config{ResumeArgs: []string{"--resume={session}", "--message={prompt}"}}, "s1", "--resume=s1|--message=p|"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Argv = []string{agent}
			rec := &recorder{}
			res, err := New(tt.cfg).Execute(context.Background(),
				phases.AgentRequest{WorkspacePath: t.TempDir(), TaskPrompt: "p", SessionID: tt.session}, rec.callback)
			require.NoError(t, err)
			assert.Equal(t, tt.want, res.Output[:len(res.Output)-1])
			assert.Equal(t, tt.session, res.SessionID, "a text agent keeps the session it resumed")
		})
	}
}

func TestExecuteStartErrors(t *testing.T) {
	ws := t.TempDir()
	tests := []struct {
		name  string
		cfg   Config
		ws    string
		check func(t *testing.T, err error)
	}{
		{"binary not on PATH", Config{Argv: []string{"foreman-no-such-agent"}}, ws, func(t *testing.T, err error) {
			var se *StartError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, "foreman-no-such-agent", se.Argv0)
			assert.ErrorIs(t, err, exec.ErrNotFound)
		}},
		{"binary path missing", Config{Argv: []string{filepath.Join(ws, "missing")}}, ws, func(t *testing.T, err error) {
			var se *StartError
			require.ErrorAs(t, err, &se)
			assert.ErrorIs(t, err, fs.ErrNotExist)
		}},
		{"relative path missing in the workspace", Config{Argv: []string{"./agent.sh"}}, ws, func(t *testing.T, err error) {
			var se *StartError
			require.ErrorAs(t, err, &se)
			assert.ErrorIs(t, err, fs.ErrNotExist)
			assert.Equal(t, ws, se.Dir)
			assert.Contains(t, err.Error(), "a relative path, looked up in the workspace "+ws)
		}},
		{"workspace missing", Config{Argv: []string{"true"}}, filepath.Join(ws, "nope"), func(t *testing.T, err error) {
			var se *StartError
			require.ErrorAs(t, err, &se)
		}},
		{"no command", Config{}, ws, func(t *testing.T, err error) { assert.ErrorIs(t, err, ErrNoCommand) }},
		{"unknown format", Config{Argv: []string{"true"}, Format: "yaml"}, ws, func(t *testing.T, err error) {
			assert.ErrorIs(t, err, ErrUnknownFormat)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg).Execute(context.Background(), phases.AgentRequest{WorkspacePath: tt.ws}, nil)
			require.Error(t, err)
			tt.check(t, err)
		})
	}
}

func TestExecuteBoundsOutputAndLines(t *testing.T) {
	dir := t.TempDir()
	agent := writeScript(t, dir, "agent", `
i=0
while [ $i -lt 500 ]; do echo "line $i"; echo "err $i" >&2; i=$((i+1)); done
head -c 5000 /dev/zero | tr '\0' x
echo
`)
	rec := &recorder{}
	res, err := New(Config{Argv: []string{agent}, OutputLimit: 100, StderrLimit: 50, MaxLineBytes: 2048}).Execute(
		context.Background(), phases.AgentRequest{WorkspacePath: dir}, rec.callback)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(res.Output, "[… "), res.Output)
	assert.True(t, strings.HasSuffix(res.Output, strings.Repeat("x", 50)+"\n"))
	assert.LessOrEqual(t, len(res.Output), 100+len("[… 999999 earlier bytes omitted …]\n"))
	assert.True(t, strings.HasSuffix(res.Stderr, "err 499\n"), res.Stderr)
	assert.LessOrEqual(t, len(res.Stderr), 50+len("[… 999999 earlier bytes omitted …]\n"))

	var long []string
	for _, l := range rec.stdoutLines() {
		if strings.HasPrefix(l, "xx") {
			long = append(long, l)
		}
	}
	require.Len(t, long, 3, "a 5000-byte line comes in pieces of at most 2048")
	assert.Len(t, long[0], 2048)
	assert.Equal(t, strings.Repeat("x", 5000), strings.Join(long, ""))
	assert.Len(t, rec.lines(phases.StreamStderr), 500)
}

func TestExecuteLargeUnreadStdinDoesNotHang(t *testing.T) {
	dir := t.TempDir()
	agent := writeScript(t, dir, "agent", "echo ignoring stdin\n")
	prompt := strings.Repeat("p", 1<<20)
	res, err := New(Config{Argv: []string{agent}, PromptVia: PromptStdin}).Execute(context.Background(),
		phases.AgentRequest{WorkspacePath: dir, TaskPrompt: prompt}, nil)
	require.NoError(t, err)
	assert.True(t, res.Success)
}

func TestExecuteIsSafeConcurrently(t *testing.T) {
	dir := t.TempDir()
	agent := writeScript(t, dir, "agent", `echo "$1"`+"\n")
	d := New(Config{Argv: []string{agent}})
	errs := make(chan error, 4)
	for i := range 4 {
		go func() {
			want := strings.Repeat("a", i+1)
			res, err := d.Execute(context.Background(), phases.AgentRequest{WorkspacePath: dir, TaskPrompt: want}, nil)
			if err == nil && res.Output != want+"\n" {
				err = errors.New("got " + res.Output)
			}
			errs <- err
		}()
	}
	for range 4 {
		assert.NoError(t, <-errs)
	}
}
