package modeltest_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/realagent"
	"github.com/agentforeman/foreman/modeltest"
)

var (
	record        = flag.Bool("record", false, "TestRecord: re-record phases/agentcmd/testdata/recorded from the real CLIs")
	checkRecorded = flag.Bool("check-recorded", false, "TestRecord: record again and fail if the output's shape differs from the recordings")
)

// recordCase is one recording: a script, and the CLI runs it drives (a
// resume case has two).
type recordCase struct {
	name  string // file name without .jsonl
	cli   realagent.CLI
	turns func(dir string) []modeltest.Turn
	runs  [][]string // CLI arguments; "{session}" is the first run's session id
	env   []string   // extra environment (Claude Code)
	// stderr keeps what the CLI printed on stderr too, in <name>.stderr
	// (Gemini CLI's retries show only there).
	stderr bool
}

func recordCases() []recordCase {
	say := func(text string) func(string) []modeltest.Turn {
		return func(string) []modeltest.Turn { return []modeltest.Turn{modeltest.Say(text)} }
	}
	toolUse := func(dir string) []modeltest.Turn {
		return []modeltest.Turn{
			{Text: "Creating the files.", Calls: []modeltest.Call{modeltest.Shell("echo made > made.txt")}},
			modeltest.Do(modeltest.WriteFile(filepath.Join(dir, "written.txt"), "written\n")),
			modeltest.Say("Both files are written."),
		}
	}
	refused := func(dir string) []modeltest.Turn {
		return []modeltest.Turn{
			modeltest.Do(modeltest.WriteFile(filepath.Join(dir, "refused.txt"), "x\n")),
			modeltest.Say("I could not write the file."),
		}
	}
	then := func(first modeltest.Turn, n int) func(string) []modeltest.Turn {
		return func(string) []modeltest.Turn {
			return append(modeltest.Times(n, first), modeltest.Say("Answered after the error."))
		}
	}
	resume := func(string) []modeltest.Turn {
		return []modeltest.Turn{modeltest.Say("First answer."), {When: "Go on", Text: "Second answer, same session."}}
	}
	claude := func(prompt string, more ...string) []string {
		return append([]string{"-p", prompt, "--output-format", "stream-json", "--verbose"}, more...)
	}
	codex := func(prompt string, more ...string) []string {
		return append(append([]string{"exec", "--json", "--skip-git-repo-check"}, more...), prompt)
	}
	gemini := func(prompt string, more ...string) []string {
		return append([]string{"-p", prompt, "--output-format", "stream-json"}, more...)
	}
	codexFail := []string{"-c", "model_providers.modeltest.stream_max_retries=2", "-c", "model_providers.modeltest.request_max_retries=0"}
	return []recordCase{
		{name: "claude_success", cli: realagent.Claude, turns: say("Hello from the scripted model."), runs: [][]string{claude("Say hello.")}},
		{name: "claude_tool_use", cli: realagent.Claude, turns: toolUse, runs: [][]string{claude("Make two files.", "--allowedTools", "Bash,Write")}},
		{name: "claude_permission_denials", cli: realagent.Claude, turns: refused, runs: [][]string{claude("Write a file.")}},
		{name: "claude_toolsearch", cli: realagent.Claude, runs: [][]string{claude("List the scheduled jobs.")},
			turns: func(string) []modeltest.Turn {
				return []modeltest.Turn{modeltest.Do(modeltest.Tool("CronList", map[string]any{})), modeltest.Say("No jobs.")}
			}},
		{name: "claude_api_retry_429", cli: realagent.Claude, turns: then(modeltest.RateLimited(0), 2), runs: [][]string{claude("Say hello.")}},
		{name: "claude_401", cli: realagent.Claude, turns: then(modeltest.Unauthorized(), 5), runs: [][]string{claude("Say hello.")},
			env: []string{"CLAUDE_CODE_MAX_RETRIES=2"}},
		{name: "claude_429_exhausted", cli: realagent.Claude, turns: then(modeltest.RateLimited(0), 5), runs: [][]string{claude("Say hello.")},
			env: []string{"CLAUDE_CODE_MAX_RETRIES=2"}},
		{name: "claude_529", cli: realagent.Claude, turns: then(modeltest.Overloaded(), 5), runs: [][]string{claude("Say hello.")},
			env: []string{"CLAUDE_CODE_MAX_RETRIES=2"}},
		{name: "claude_resume", cli: realagent.Claude, turns: resume,
			runs: [][]string{claude("Start."), claude("Go on.", "--resume", "{session}")}},

		{name: "codex_success", cli: realagent.Codex, turns: say("Hello from the scripted model."), runs: [][]string{codex("Say hello.")}},
		{name: "codex_tool_use", cli: realagent.Codex, turns: toolUse, runs: [][]string{codex("Make two files.", "--sandbox", "workspace-write")}},
		{name: "codex_read_only_refusal", cli: realagent.Codex, turns: refused, runs: [][]string{codex("Write a file.")}},
		{name: "codex_retry_429", cli: realagent.Codex, turns: then(modeltest.RateLimited(0), 2), runs: [][]string{codex("Say hello.")}},
		{name: "codex_401", cli: realagent.Codex, turns: then(modeltest.Unauthorized(), 5), runs: [][]string{codex("Say hello.", codexFail...)}},
		{name: "codex_429_exhausted", cli: realagent.Codex, turns: then(modeltest.RateLimited(0), 5), runs: [][]string{codex("Say hello.", codexFail...)}},
		{name: "codex_529", cli: realagent.Codex, turns: then(modeltest.Overloaded(), 5), runs: [][]string{codex("Say hello.", codexFail...)}},
		{name: "codex_resume", cli: realagent.Codex, turns: resume,
			runs: [][]string{codex("Start."), {"exec", "resume", "--json", "--skip-git-repo-check", "{session}", "Go on."}}},

		{name: "gemini_success", cli: realagent.Gemini, turns: say("Hello from the scripted model."), runs: [][]string{gemini("Say hello.")}},
		{name: "gemini_tool_use", cli: realagent.Gemini, turns: toolUse, runs: [][]string{gemini("Make two files.", "--approval-mode", "yolo")}},
		{name: "gemini_refused", cli: realagent.Gemini, turns: refused, runs: [][]string{gemini("Write a file.")}},
		{name: "gemini_retry_429", cli: realagent.Gemini, turns: then(modeltest.RateLimited(0), 1), runs: [][]string{gemini("Say hello.")},
			stderr: true},
		{name: "gemini_retry_500", cli: realagent.Gemini, turns: then(modeltest.ServerError(), 1), runs: [][]string{gemini("Say hello.")},
			stderr: true},
		{name: "gemini_401", cli: realagent.Gemini, turns: then(modeltest.Unauthorized(), 5), runs: [][]string{gemini("Say hello.")}},
		{name: "gemini_429_terminal", cli: realagent.Gemini, turns: then(modeltest.RateLimited(time.Hour), 5), runs: [][]string{gemini("Say hello.")}},
		{name: "gemini_resume", cli: realagent.Gemini, turns: resume,
			runs: [][]string{gemini("Start."), gemini("Go on.", "--resume", "{session}")}},
	}
}

// TestRecord re-records the fixtures of phases/agentcmd/testdata/recorded
// from the real CLIs: go test ./modeltest -run TestRecord -args -record.
// Paths that change from run to run (the workspace, HOME, CODEX_HOME, the
// server's port) are replaced by fixed ones; ids, timestamps and durations
// are kept as printed. recorded/README.md says what each case is.
//
// With -args -check-recorded it records into a temporary directory instead
// and fails when a recording's shape (shape: the line types, their keys, the
// kinds of content and items) differs from the committed one: what a CI step
// runs to see that the pinned CLIs still print what the fixtures show.
func TestRecord(t *testing.T) {
	if !*record && !*checkRecorded {
		t.Skip("re-records the fixtures only with -args -record (or -check-recorded)")
	}
	committed, err := filepath.Abs(filepath.Join("..", "phases", "agentcmd", "testdata", "recorded"))
	require.NoError(t, err)
	out := committed
	if !*record {
		out = t.TempDir()
		t.Cleanup(func() {
			entries, err := os.ReadDir(out)
			require.NoError(t, err)
			for _, e := range entries {
				want, err := os.ReadFile(filepath.Join(committed, e.Name()))
				if !assert.NoError(t, err, "%s: no committed recording", e.Name()) {
					continue
				}
				got, err := os.ReadFile(filepath.Join(out, e.Name()))
				require.NoError(t, err)
				if strings.HasSuffix(e.Name(), ".stderr") {
					assert.Equal(t, retryLines(want), retryLines(got), "%s: the CLI's retry lines changed; re-record with -args -record and check the parsers", e.Name())
					continue
				}
				assert.Equal(t, shape(t, want), shape(t, got), "%s: the output's shape changed; re-record with -args -record and check the parsers", e.Name())
			}
		})
	}
	require.NoError(t, os.MkdirAll(out, 0o755))
	for _, c := range recordCases() {
		t.Run(c.name, func(t *testing.T) {
			bin := realagent.Require(t, c.cli)
			dir := t.TempDir()
			srv := modeltest.Start(t, modeltest.Script{Turns: c.turns(dir)})
			var env []string
			home := t.TempDir()
			switch c.cli {
			case realagent.Claude:
				env = append(realagent.ClaudeEnv(srv.URL(), home), c.env...)
			case realagent.Gemini:
				env, err = realagent.GeminiEnv(srv.URL(), home, nil)
				require.NoError(t, err)
			default:
				home = realagent.CodexHome(t)
				env, err = realagent.CodexEnv(srv.URL(), home)
				require.NoError(t, err)
			}
			session := ""
			for i, args := range c.runs {
				args = append([]string(nil), args...)
				for j := range args {
					args[j] = strings.ReplaceAll(args[j], "{session}", session)
				}
				r := runCLI(t, srv, dir, env, append([]string{bin}, args...)...)
				t.Logf("%s run %d: exit %v, wall %v, first request after %v", c.name, i+1, r.err, r.wall, r.firstRequest)
				for _, l := range r.lines {
					if id, ok := l["session_id"].(string); ok && session == "" {
						session = id
					}
					if id, ok := l["thread_id"].(string); ok && session == "" {
						session = id
					}
				}
				name := c.name
				if len(c.runs) > 1 {
					name = c.name + "_run" + string(rune('1'+i))
				}
				repl := map[string]string{dir: "/workspace", home: "/home/agent",
					srv.URL(): "http://127.0.0.1:PORT", strings.TrimPrefix(srv.URL(), "http://"): "127.0.0.1:PORT"}
				require.NoError(t, os.WriteFile(filepath.Join(out, name+".jsonl"), normalize(r.stdout, repl), 0o644))
				if c.stderr {
					if root, err := realagent.ModuleRoot(); err == nil {
						repl[root] = "/foreman"
					}
					require.NoError(t, os.WriteFile(filepath.Join(out, name+".stderr"), normalize(r.stderr, repl), 0o644))
				}
			}
		})
	}
}

// shape is what a recording's lines are made of, without their values: per
// line its type (and subtype), its sorted keys, and the types of its message
// content blocks or its item.
func shape(t *testing.T, jsonl []byte) []string {
	var out []string
	for _, line := range bytes.Split(bytes.TrimSpace(jsonl), []byte("\n")) {
		var m map[string]any
		require.NoError(t, json.Unmarshal(line, &m), "%s", line)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		s := fmt.Sprintf("%v/%v %v", m["type"], m["subtype"], keys)
		if msg, ok := m["message"].(map[string]any); ok {
			if content, ok := msg["content"].([]any); ok {
				for _, c := range content {
					if c, ok := c.(map[string]any); ok {
						s += fmt.Sprintf(" %v", c["type"])
					}
				}
			}
		}
		if item, ok := m["item"].(map[string]any); ok {
			s += fmt.Sprintf(" item:%v", item["type"])
		}
		out = append(out, s)
	}
	return out
}

// retryLines are the lines of a CLI's stderr announcing a retry (Gemini
// CLI's "Attempt N failed with status S. Retrying with backoff..."), up to
// the "...": what agentcmd's Gemini parser reads there.
func retryLines(stderr []byte) []string {
	var out []string
	for _, l := range strings.Split(string(stderr), "\n") {
		if i := strings.Index(l, "Retrying with backoff..."); i >= 0 {
			out = append(out, l[:i+len("Retrying with backoff...")])
		}
	}
	return out
}

// normalize replaces each key of repl by its value, longest keys first (so a
// path is replaced before a prefix of it).
func normalize(b []byte, repl map[string]string) []byte {
	keys := make([]string, 0, len(repl))
	for k := range repl {
		keys = append(keys, k)
	}
	for i := range keys {
		for j := i + 1; j < len(keys); j++ {
			if len(keys[j]) > len(keys[i]) {
				keys[i], keys[j] = keys[j], keys[i]
			}
		}
	}
	for _, k := range keys {
		b = bytes.ReplaceAll(b, []byte(k), []byte(repl[k]))
		// Claude Code names a project directory after its path, each
		// character but letters and digits replaced by '-'.
		b = bytes.ReplaceAll(b, []byte(projectName(k)), []byte(projectName(repl[k])))
	}
	return b
}

func projectName(path string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, path)
}
