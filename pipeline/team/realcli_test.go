package team_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/internal/realagent"
	"github.com/agentforeman/foreman/internal/stress"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/modeltest"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/team"
)

// realCLI is a pinned real agent CLI driven by -format alone (agentcmd's
// default command and permission profile), pointed at a modeltest server.
type realCLI struct {
	name   realagent.CLI
	format agentcmd.Format
	// driver makes the team's agent for the server at url.
	driver func(t *testing.T, url string, cfg agentcmd.Config) *agentcmd.Driver
}

func realCLIs() []realCLI {
	return []realCLI{
		{realagent.Claude, agentcmd.FormatClaude, func(t *testing.T, url string, cfg agentcmd.Config) *agentcmd.Driver {
			home := filepath.Join(t.TempDir(), "home")
			require.NoError(t, os.MkdirAll(home, 0o700))
			env := realagent.ClaudeEnv(url, home)
			if agentcmd.New(cfg).Sandboxed() {
				// The sandbox gives the agent a home of its own, kept per
				// worktree, where the CLI finds its session again.
				env = withoutVars(env, "HOME")
			}
			cfg.Env = append(env, demo.GitEnv()...)
			return agentcmd.New(cfg)
		}},
		{realagent.Codex, agentcmd.FormatCodex, func(t *testing.T, url string, cfg agentcmd.Config) *agentcmd.Driver {
			home := realagent.CodexHome(t)
			env, err := realagent.CodexEnv(url, home)
			require.NoError(t, err)
			// In the OS sandbox the host's home is hidden: the provider's
			// configuration is bound in as the agent's own ~/.codex.
			cfg.Sandbox.Binds = append(cfg.Sandbox.Binds, agentcmd.Bind{Source: home, Target: "~/.codex", Writable: true})
			cfg.Env = append(withoutVars(env, "CODEX_HOME", "HOME"), demo.GitEnv()...)
			if !agentcmd.New(cfg).Sandboxed() {
				cfg.Env = append(cfg.Env, "CODEX_HOME="+home)
			}
			return agentcmd.New(cfg)
		}},
	}
}

// geminiCLI is Gemini CLI as realCLIs has the others.
func geminiCLI() realCLI {
	return realCLI{realagent.Gemini, agentcmd.FormatGemini, func(t *testing.T, url string, cfg agentcmd.Config) *agentcmd.Driver {
		home := filepath.Join(t.TempDir(), "home")
		env, err := realagent.GeminiEnv(url, home, nil)
		require.NoError(t, err)
		// In the OS sandbox the host's home is hidden: the settings that
		// select API-key authentication are bound in as its ~/.gemini.
		cfg.Sandbox.Binds = append(cfg.Sandbox.Binds, agentcmd.Bind{Source: filepath.Join(home, ".gemini"), Target: "~/.gemini", Writable: true})
		if agentcmd.New(cfg).Sandboxed() {
			env = withoutVars(env, "HOME")
		}
		cfg.Env = append(env, demo.GitEnv()...)
		return agentcmd.New(cfg)
	}}
}

// realTeam is a team on a throwaway repository whose agents are the real
// cli, with -format alone.
func realTeam(t *testing.T, cli realCLI, srv *modeltest.Server, mutate func(*team.Config)) (*team.Team, string) {
	t.Helper()
	bin := realagent.Require(t, cli.name)
	t.Setenv("PATH", filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	dir, err := realagent.Dir()
	require.NoError(t, err)
	// The CLIs' own files, wherever the checkout is, readable in the sandbox.
	modules, err := filepath.EvalSymlinks(filepath.Join(dir, ".."))
	require.NoError(t, err)
	ctx := context.Background()
	repo := filepath.Join(t.TempDir(), "repo")
	require.NoError(t, demo.NewGoModuleRepo(ctx, repo))
	cfg := team.Config{
		Repo: repo,
		Agent: cli.driver(t, srv.URL(), agentcmd.Config{Format: cli.format,
			Sandbox: agentcmd.Sandbox{Binds: []agentcmd.Bind{{Source: modules}}}}),
		Gates: phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: []phases.GateCheck{
			{Name: "no-bad", Argv: []string{"sh", "-c", `if grep -l BAD *.txt 2>/dev/null; then echo "found BAD in the files above" >&2; exit 1; fi`}},
		}}}},
		Merge: merge.Config{GitEnv: demo.IsolatedGitConfig()},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	tm, err := team.New(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tm.Close() })
	return tm, repo
}

// writeAndCommit is a build turn: the file in the story's worktree, then
// git add and commit through the shell.
func writeAndCommit(name, content string) []modeltest.Turn {
	return []modeltest.Turn{
		{Reply: func(in modeltest.Input) modeltest.Turn {
			a, _ := realagent.ReadAssignment(in.Prompt)
			return modeltest.Do(modeltest.WriteFile(filepath.Join(a.Workspace, name), content))
		}},
		modeltest.Do(modeltest.Shell("git add " + name + " && git commit -qm 'write " + name + "'")),
	}
}

func runReal(t *testing.T, tm *team.Team) team.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := tm.Run(ctx)
	require.NoError(t, err)
	return res
}

// Two stories, the second after the first, through every stage with the
// real CLI: reports through MCP (Claude Code loading the tool with
// ToolSearch), the result file and the printed line; a build that fails the
// gates gets their output and fixes it in its next iteration, in the CLI's
// own resumed session; tokens reported equal the tokens served.
func TestRealCLIsLandAPlan(t *testing.T) {
	for _, cli := range append(realCLIs(), geminiCLI()) {
		t.Run(string(cli.name), func(t *testing.T) {
			if cli.name == realagent.Gemini {
				stress.Long(t) // a minute: Gemini CLI takes 5-8 s a run (its model router's request first); CI runs it
			}
			build := append(writeAndCommit("a.txt", "BAD\n"), modeltest.Say("written"))
			build = append(build, modeltest.Turn{When: "found BAD", Reply: func(in modeltest.Input) modeltest.Turn {
				a, _ := realagent.ReadAssignment(in.Prompt)
				return modeltest.Do(modeltest.WriteFile(filepath.Join(a.Workspace, "a.txt"), "good\n"))
			}})
			build = append(build, writeAndCommit("a.txt", "good\n")[1],
				realagent.ReportTool(realagent.Report{Outcome: "complete", Summary: "a.txt is good"}), modeltest.Say("fixed"))
			srv := modeltest.Start(t,
				modeltest.Script{Name: "A plan", Match: "You are the planner for story A:", Turns: []modeltest.Turn{
					realagent.ReportTool(realagent.Report{Outcome: "complete", Tasks: 1, Score: realagent.Score(4), Summary: "one task"}),
					modeltest.Say("planned")}},
				modeltest.Script{Name: "A validate", Match: "You are the validator for story A:", Turns: []modeltest.Turn{
					realagent.ReportFile(realagent.Report{Outcome: "go", Score: realagent.Score(9)}), modeltest.Say("valid")}},
				modeltest.Script{Name: "A build", Match: "You are the builder for story A:", Turns: build},
				modeltest.Script{Name: "B plan", Match: "You are the planner for story B:", Turns: []modeltest.Turn{
					realagent.SayLine("Stage 0 COMPLETE for %s. 1 tasks created. Plan score: 4/4.")}},
				modeltest.Script{Name: "B validate", Match: "You are the validator for story B:", Turns: []modeltest.Turn{
					realagent.ReportTool(realagent.Report{Outcome: "go", Score: realagent.Score(8)}), modeltest.Say("valid")}},
				modeltest.Script{Name: "B build", Match: "You are the builder for story B:", Turns: append(writeAndCommit("b.txt", "b\n"),
					realagent.SayLine("Stage 2 COMPLETE for %s. Implementation done."))},
			)
			tm, repo := realTeam(t, cli, srv, nil)
			require.NoError(t, tm.Add(context.Background(), team.Story{ID: "A", Title: "write a.txt"},
				team.Story{ID: "B", Title: "write b.txt", After: []foreman.ItemID{"A"}}))

			res := runReal(t, tm)

			st, err := tm.Status(context.Background())
			require.NoError(t, err)
			require.Equal(t, 2, res.Merged, "%s\n%s", res.String(), st.Text())
			assert.Equal(t, []string{"B", "A"}, trailers(t, repo))
			assert.Empty(t, srv.Unmatched(), "every request was one the scripts expected")
			var gates []string
			for _, e := range tm.Events(0) {
				if e.Kind == team.EventGates && e.Story == "A" {
					gates = append(gates, string(e.Outcome))
				}
			}
			assert.Equal(t, []string{"FAIL", "PASS"}, gates, "the build failed its gates once, then fixed them")
			var fed []int
			for _, r := range srv.Requests() {
				if r.Script == "A build" && strings.Contains(r.Latest, "found BAD in the files above") {
					fed = append(fed, r.Seq)
				}
			}
			assert.Len(t, fed, 1, "the gates' output reached the model once, as the resumed session's new input")
			served := srv.Usage("")
			assert.Equal(t, served.InputTokens+served.OutputTokens+served.CacheReadInputTokens+served.CacheCreationInputTokens, st.Tokens,
				"the tokens the CLIs reported are those served")
			t.Logf("%s: %d requests, containment %q", cli.name, len(srv.Requests()), st.Containment)
		})
	}
}

// withoutVars is env without the named variables.
func withoutVars(env []string, names ...string) []string {
	var keep []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, k) {
			keep = append(keep, kv)
		}
	}
	return keep
}

// Without its permission profile the real Claude Code refuses the build's
// edits in -p mode and still ends "success": the story pauses after that one
// iteration, naming the refused tools and what to grant.
func TestARealCLIRefusedItsToolsPausesAtOnce(t *testing.T) {
	cli := realCLIs()[0]
	srv := modeltest.Start(t,
		modeltest.Script{Match: "You are the planner", Turns: []modeltest.Turn{
			realagent.SayLine("Stage 0 COMPLETE for %s. 1 tasks created. Plan score: 4/4.")}},
		modeltest.Script{Match: "You are the validator", Turns: []modeltest.Turn{
			realagent.SayLine("Stage 1 COMPLETE for %s. Verdict: GO. Readiness: 9.")}},
		modeltest.Script{Match: "You are the builder", Turns: append(writeAndCommit("r.txt", "r\n"), modeltest.Say("done"))},
	)
	tm, _ := realTeam(t, realCLI{cli.name, cli.format, func(t *testing.T, url string, cfg agentcmd.Config) *agentcmd.Driver {
		cfg.Permissions = agentcmd.PermissionsNone
		cfg.Sandbox.Mode = agentcmd.SandboxOff
		return cli.driver(t, url, cfg)
	}}, srv, nil)
	require.NoError(t, tm.Add(context.Background(), team.Story{ID: "R", Title: "refused"}))

	res := runReal(t, tm)

	r := stateOf(res, "R")
	require.Equal(t, team.StoryPaused, r.State, res.String())
	require.NotNil(t, r.Pause)
	assert.Contains(t, r.Pause.Message, "build failed after 1 iteration(s) (permission_denied): the agent was refused Write (")
	assert.Contains(t, r.Pause.Message, "--allowedTools")
}

// A refused key (401) fails the stage at once with that cause: both CLIs
// would retry it by themselves (Claude Code for minutes).
func TestARealCLIWithARefusedKeyFailsAtOnce(t *testing.T) {
	for _, cli := range realCLIs() {
		t.Run(string(cli.name), func(t *testing.T) {
			srv := modeltest.Start(t, modeltest.Script{Turns: modeltest.Times(20, modeltest.Unauthorized())})
			tm, _ := realTeam(t, cli, srv, nil)
			require.NoError(t, tm.Add(context.Background(), team.Story{ID: "K", Title: "bad key"}))

			res := runReal(t, tm)

			k := stateOf(res, "K")
			require.Equal(t, team.StoryPaused, k.State, res.String())
			require.NotNil(t, k.Pause)
			assert.Contains(t, k.Pause.Message, "401")
			assert.Contains(t, k.Pause.Message, "retrying cannot help")
			assert.LessOrEqual(t, len(srv.Requests()), 3, "stopped at its first retry, not after ten")
		})
	}
}
