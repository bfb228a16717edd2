package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/modeltest"
	"github.com/agentforeman/foreman/pipeline"
)

// The reference binary with the real agent CLIs (the pinned ones
// .ci/install-agents puts in .ci/agents/node_modules/.bin, or
// $FOREMAN_AGENT_BIN), -format alone, against a modeltest server. These
// tests skip when a CLI is not installed, and fail under CI=true.

// agentBin finds the pinned CLI's binary (an example's test cannot import
// Foreman's internal/realagent, which does the same).
func agentBin(t *testing.T, cli string) string {
	t.Helper()
	dir := os.Getenv("FOREMAN_AGENT_BIN")
	if dir == "" {
		wd, err := os.Getwd()
		require.NoError(t, err)
		for d := wd; ; d = filepath.Dir(d) {
			if st, err := os.Stat(filepath.Join(d, ".ci", "agents")); err == nil && st.IsDir() {
				dir = filepath.Join(d, ".ci", "agents", "node_modules", ".bin")
				break
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	p := filepath.Join(dir, cli)
	if st, err := os.Stat(p); err != nil || st.Mode()&0o111 == 0 {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatalf("%s not installed at %s: run .ci/install-agents (CI=true requires the real CLIs)", cli, p)
		}
		t.Skipf("%s not installed at %s: run .ci/install-agents", cli, p)
	}
	return p
}

// What a team's prompt says, read back the way a model reads it.
var (
	promptResult    = regexp.MustCompile(`Write your report as JSON to the file (\S+) `)
	promptKey       = regexp.MustCompile(`Your report key: (\S+) `)
	promptWorkspace = regexp.MustCompile(`## Your workspace\n\n(\S+), a git worktree`)
)

type promptFacts struct {
	pipeline.AgentAssignment
	result, key, workspace string
}

func readPrompt(prompt string) promptFacts {
	a, _ := pipeline.ParseAssignment(prompt)
	f := promptFacts{AgentAssignment: a}
	if m := promptResult.FindStringSubmatch(prompt); m != nil {
		f.result = m[1]
	}
	if m := promptKey.FindStringSubmatch(prompt); m != nil {
		f.key = m[1]
	}
	if m := promptWorkspace.FindStringSubmatch(prompt); m != nil {
		f.workspace = m[1]
	}
	return f
}

// report is a stage's report as JSON for the prompt's assignment.
func report(f promptFacts, fields map[string]any) map[string]any {
	m := map[string]any{"assignment": string(f.Assignment)}
	for k, v := range fields {
		m[k] = v
	}
	return m
}

// How a scripted stage reports.
func viaMCP(fields map[string]any) modeltest.Turn {
	return modeltest.Turn{Reply: func(in modeltest.Input) modeltest.Turn {
		return modeltest.Do(modeltest.Tool("mcp__foreman__report", report(readPrompt(in.Prompt), fields)))
	}}
}

func viaFile(fields map[string]any) modeltest.Turn {
	return modeltest.Turn{Reply: func(in modeltest.Input) modeltest.Turn {
		f := readPrompt(in.Prompt)
		b, _ := json.Marshal(report(f, fields))
		return modeltest.Do(modeltest.WriteFile(f.result, string(b)))
	}}
}

// viaLine ends the stage with its canonical line (%s: the story).
func viaLine(line string) modeltest.Turn {
	return modeltest.Turn{Reply: func(in modeltest.Input) modeltest.Turn {
		f := readPrompt(in.Prompt)
		return modeltest.Say(fmt.Sprintf("Done.\n"+line+" [assignment %s key %s]", f.Item, f.Assignment, f.key))
	}}
}

// build writes <story>.txt in the worktree and commits it through the shell.
func build(story string) []modeltest.Turn {
	return []modeltest.Turn{
		{Reply: func(in modeltest.Input) modeltest.Turn {
			return modeltest.Do(modeltest.WriteFile(filepath.Join(readPrompt(in.Prompt).workspace, story+".txt"), story+" was built\n"))
		}},
		modeltest.Do(modeltest.Shell("git add " + story + ".txt && git commit -qm '" + story + ": build'")),
	}
}

var (
	planned   = map[string]any{"outcome": "complete", "tasks": 1, "score": 4, "summary": "one task"}
	validated = map[string]any{"outcome": "go", "score": 9}
	built     = map[string]any{"outcome": "complete", "summary": "wrote the file"}
)

// stage is a script for one stage of one story: its turns, then a last word.
func stage(role, story string, turns ...modeltest.Turn) modeltest.Script {
	return modeltest.Script{Name: story + " " + role, Match: "You are the " + role + " for story " + story + ":",
		Turns: append(turns, modeltest.Say("done"))}
}

// cliEnv is the foreman process's environment for the real cli against
// srv: the CLI's directory first on PATH and its API variables (which
// agentcmd passes on to the agent), and the sandbox binds it needs.
func cliEnv(t *testing.T, cli string, srv *modeltest.Server) (env, binds []string) {
	bin := agentBin(t, cli)
	modules, err := filepath.EvalSymlinks(filepath.Join(filepath.Dir(bin), ".."))
	require.NoError(t, err)
	env = append(os.Environ(), gitEnv()...)
	env = append(env, "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	binds = []string{"-bind", modules + ":ro"}
	switch cli {
	case "claude":
		env = append(env, "ANTHROPIC_BASE_URL="+srv.URL(), "ANTHROPIC_API_KEY=sk-modeltest",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "HOME="+t.TempDir())
	case "codex":
		// Codex finds its provider in $CODEX_HOME/config.toml, which must not
		// be under /tmp (its own sandbox, when Foreman's is off, gives
		// commands a private /tmp): in the user's cache directory, bound
		// into Foreman's sandbox (which hides the host's home).
		cache, err := os.UserCacheDir()
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(cache, 0o700))
		home, err := os.MkdirTemp(cache, "foreman-codex-")
		require.NoError(t, err)
		t.Cleanup(func() { _ = os.RemoveAll(home) })
		toml := fmt.Sprintf("model_provider = \"modeltest\"\n[model_providers.modeltest]\nname = \"modeltest\"\n"+
			"base_url = %q\nenv_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n", srv.URL()+"/v1")
		require.NoError(t, os.WriteFile(filepath.Join(home, "config.toml"), []byte(toml), 0o600))
		env = append(env, "CODEX_HOME="+home, "OPENAI_API_KEY=sk-modeltest")
		binds = append(binds, "-bind", home)
	}
	return env, binds
}

// TestBinaryLandsAPlanWithARealCLI runs the reference binary with -format
// claude and -format codex alone on a plan of three stories (two after the
// first) against a scripted model: every stage reports through the team's
// MCP tool (Claude Code loads it with ToolSearch first) but two, one
// through the result file and one with the printed line; then a fourth
// story, after the third, runs with -mcp=false: its stages report through
// the result file, and through the printed line where the agent writes no
// file either. Every story merges once, in dependency order.
func TestBinaryLandsAPlanWithARealCLI(t *testing.T) {
	for _, cli := range []string{"claude", "codex"} {
		t.Run(cli, func(t *testing.T) {
			t.Parallel()
			srv := modeltest.Start(t,
				stage("planner", "US-001", viaMCP(planned)),
				stage("validator", "US-001", viaMCP(validated)),
				stage("builder", "US-001", append(build("US-001"), viaMCP(built))...),
				stage("planner", "US-002", viaLine("Stage 0 COMPLETE for %s. 1 tasks created. Plan score: 4/4.")),
				stage("validator", "US-002", viaMCP(validated)),
				stage("builder", "US-002", append(build("US-002"), viaMCP(built))...),
				stage("planner", "US-003", viaMCP(planned)),
				stage("validator", "US-003", viaFile(validated)),
				stage("builder", "US-003", append(build("US-003"), viaMCP(built))...),
				// -mcp=false: the file, and the line when there is no file.
				stage("planner", "US-004", viaFile(planned)),
				stage("validator", "US-004", viaLine("Stage 1 COMPLETE for %s. Verdict: GO. Readiness: 9.")),
				stage("builder", "US-004", append(build("US-004"), viaFile(built))...),
			)
			env, binds := cliEnv(t, cli, srv)
			f := newFixture(t)
			require.NoError(t, os.WriteFile(f.plan, []byte(`workers: 2
stories:
  - id: US-001
    title: First
  - id: US-002
    title: Second, after the first
    after: [US-001]
  - id: US-003
    title: Third, after the first
    after: [US-001]
`), 0o644))
			args := append([]string{"-repo", f.repo, "-plan", f.plan, "-format", cli, "-http", "", "-gate", `sh -c '! grep -qs BAD *.txt'`}, binds...)
			runBin := func(args ...string) {
				cmd, stdout, stderr := f.command(t, args...)
				cmd.Env = env
				err := cmd.Run()
				require.Equal(t, exitMerged, exitCode(t, err), "stdout:\n%s\nstderr:\n%s\nunmatched: %v", stdout, stderr, srv.Unmatched())
			}
			runBin(args...)
			got := f.merged(t)
			require.ElementsMatch(t, []string{"US-001", "US-002", "US-003"}, got)
			assert.Equal(t, "US-001", got[0], "the first story lands first")

			require.NoError(t, os.WriteFile(f.plan, []byte(`stories:
  - id: US-001
    title: First
  - id: US-002
    title: Second, after the first
    after: [US-001]
  - id: US-003
    title: Third, after the first
    after: [US-001]
  - id: US-004
    title: Fourth, after the third
    after: [US-003]
`), 0o644))
			runBin(append(args, "-mcp=false")...)
			assert.Equal(t, append(got, "US-004"), f.merged(t), "each story merged once")

			assert.Empty(t, srv.Unmatched(), "every request was one the scripts expected")
			var reports, searches int
			for _, r := range srv.Requests() {
				for _, c := range r.Served.Calls {
					switch {
					case c.Name == "ToolSearch":
						searches++
					case strings.Contains(c.Name+string(c.Input), "foreman__report"):
						// Codex calls it through its exec tool, by name.
						reports++
					}
				}
			}
			assert.Equal(t, 7, reports, "seven stages reported through the MCP tool")
			if cli == "claude" {
				assert.Equal(t, 7, searches, "Claude Code loads the deferred MCP tool with ToolSearch first, in each session")
			}
			t.Logf("%s: %d requests to the model", cli, len(srv.Requests()))
		})
	}
}
