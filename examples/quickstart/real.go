package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/modeltest"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team"
)

// -real CLI: the stories' agents are a real agent CLI (Claude Code or
// Codex, the versions .ci/install-agents pins), talking to a scripted model
// server (modeltest) started in this process instead of a provider: no
// account, no key, no network. The model's answers are scripted; the CLI,
// its tools, its sessions and its permission rules are the real ones.

// errNoCLI is a -real CLI that is not installed.
var errNoCLI = errors.New("agent CLI not installed")

// realCLI returns the format of a CLI -real takes and the arguments
// agentcmd gives it by default (here after the installed binary's path).
func realCLI(name string) (agentcmd.Format, []string, bool) {
	switch name {
	case "claude":
		return agentcmd.FormatClaude, []string{"-p", "--output-format", "stream-json", "--verbose"}, true
	case "codex":
		return agentcmd.FormatCodex, []string{"exec", "--json"}, true
	}
	return "", nil, false
}

// findCLI finds the pinned CLI's binary: in $FOREMAN_AGENT_BIN, else in
// .ci/agents/node_modules/.bin of the checkout the working directory is in.
func findCLI(name string) (string, error) {
	dir := os.Getenv("FOREMAN_AGENT_BIN")
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		for d := wd; ; d = filepath.Dir(d) {
			if st, err := os.Stat(filepath.Join(d, ".ci", "agents")); err == nil && st.IsDir() {
				dir = filepath.Join(d, ".ci", "agents", "node_modules", ".bin")
				break
			}
			if filepath.Dir(d) == d {
				return "", fmt.Errorf("%w: no .ci/agents above %s: run the quickstart from Foreman's checkout after .ci/install-agents "+
					"(or set FOREMAN_AGENT_BIN to the directory holding %s)", errNoCLI, wd, name)
			}
		}
	}
	p := filepath.Join(dir, name)
	if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%w: %s is not at %s: run .ci/install-agents (it installs the pinned Claude Code, Codex and "+
			"Gemini CLI with npm; Node 20 and npm needed)", errNoCLI, name, p)
	}
	return p, nil
}

// realAgent is a -real run's agent: the driver's Config, the scripted
// model server, and the team event hook that lets US-002's model answer
// once the story it waits for has landed.
type realAgent struct {
	cfg     agentcmd.Config
	srv     *modeltest.Server
	onEvent func(team.Event)
	close   func()
}

// startReal starts the scripted model server for the stories and
// configures the real CLI against it; dir is the run's directory (the
// CLI's home when it runs unsandboxed).
func startReal(name, dir string, stories []story) (*realAgent, error) {
	format, args, ok := realCLI(name)
	if !ok {
		return nil, fmt.Errorf("-real %q: claude or codex", name)
	}
	bin, err := findCLI(name)
	if err != nil {
		return nil, err
	}
	landed := map[foreman.ItemID]chan struct{}{}
	for _, s := range stories {
		if s.WaitFor != "" {
			landed[s.WaitFor] = make(chan struct{})
		}
	}
	srv, err := modeltest.New(modeltest.Config{Scripts: modelScripts(stories, landed)})
	if err != nil {
		return nil, err
	}
	var once sync.Map
	r := &realAgent{srv: srv, close: srv.Close, onEvent: func(e team.Event) {
		if ch := landed[e.Story]; ch != nil && e.Kind == team.EventStoryMerged {
			if _, done := once.LoadOrStore(e.Story, true); !done {
				close(ch)
			}
		}
	}}
	// The CLI's files, wherever the checkout is, readable in the sandbox.
	modules, err := filepath.EvalSymlinks(filepath.Join(filepath.Dir(bin), ".."))
	if err != nil {
		srv.Close()
		return nil, err
	}
	r.cfg = agentcmd.Config{Argv: append([]string{bin}, args...), Format: format, Permissions: agentcmd.PermissionsProfile,
		Env: gitEnv(), Sandbox: agentcmd.Sandbox{Binds: []agentcmd.Bind{{Source: modules}}}}
	sandboxed := agentcmd.New(r.cfg).Sandboxed()
	switch name {
	case "claude":
		r.cfg.Env = append(r.cfg.Env, "ANTHROPIC_BASE_URL="+srv.URL(), "ANTHROPIC_API_KEY=sk-modeltest",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1")
		if !sandboxed {
			// Not your ~/.claude: a home of the run's own.
			home := filepath.Join(dir, "home")
			if err := os.MkdirAll(home, 0o700); err != nil {
				srv.Close()
				return nil, err
			}
			r.cfg.Env = append(r.cfg.Env, "HOME="+home)
		}
	case "codex":
		// Codex finds its provider in $CODEX_HOME/config.toml; not under
		// /tmp, where Codex's own sandbox (when Foreman's is off) cannot
		// find its helper: in the user's cache directory.
		cache, err := os.UserCacheDir()
		if err == nil {
			err = os.MkdirAll(cache, 0o700)
		}
		var home string
		if err == nil {
			home, err = os.MkdirTemp(cache, "foreman-quickstart-codex-")
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(home, "config.toml"), []byte(fmt.Sprintf("model_provider = \"modeltest\"\n"+
				"[model_providers.modeltest]\nname = \"modeltest\"\nbase_url = %q\nenv_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n",
				srv.URL()+"/v1")), 0o600)
		}
		if err != nil {
			srv.Close()
			return nil, fmt.Errorf("codex's configuration: %w", err)
		}
		r.close = func() { srv.Close(); _ = os.RemoveAll(home) }
		r.cfg.Env = append(r.cfg.Env, "OPENAI_API_KEY=sk-modeltest")
		if sandboxed {
			// The sandbox hides the host's home: the configuration is bound
			// in as the agent's own ~/.codex.
			r.cfg.Sandbox.Binds = append(r.cfg.Sandbox.Binds, agentcmd.Bind{Source: home, Target: "~/.codex", Writable: true})
		} else {
			r.cfg.Env = append(r.cfg.Env, "CODEX_HOME="+home)
		}
	}
	return r, nil
}

// What a team's prompt says, read back the way a model reads it.
var promptWorkspace = regexp.MustCompile(`## Your workspace\n\n(\S+), a git worktree`)

// modelScripts is what the scripted model answers each story's agents:
// the planner and the validator report through the team's MCP tool (Claude
// Code loads it with ToolSearch first); the builder writes the story's
// files with the CLI's own file tool, commits them with git through its
// shell tool and reports, and when the gates' feedback names FixWhen, fixes
// it in its resumed session. A story that waits for another is answered
// once that one has landed (landed).
func modelScripts(stories []story, landed map[foreman.ItemID]chan struct{}) []modeltest.Script {
	var scripts []modeltest.Script
	for _, s := range stories {
		id := string(s.ID)
		scripts = append(scripts,
			modeltest.Script{Name: id + " plan", Match: "You are the planner for story " + id + ":", Turns: []modeltest.Turn{
				reportTurn(map[string]any{"outcome": "complete", "tasks": len(s.Tasks), "score": 4, "summary": strings.Join(s.Tasks, "; ")}),
				modeltest.Say("Planned: " + strings.Join(s.Tasks, "; ") + ".")}},
			modeltest.Script{Name: id + " validate", Match: "You are the validator for story " + id + ":", Turns: []modeltest.Turn{
				reportTurn(map[string]any{"outcome": "go", "score": 8}), modeltest.Say("Clear and feasible.")}})
		write := modeltest.Turn{Reply: func(in modeltest.Input) modeltest.Turn {
			ws := ""
			if m := promptWorkspace.FindStringSubmatch(in.Prompt); m != nil {
				ws = m[1]
			}
			sh := s.Implement
			if s.OnConflict != "" && strings.Contains(in.Prompt, "## The merge conflict to resolve") {
				sh = s.OnConflict
			}
			return modeltest.Do(writeCalls(ws, sh)...)
		}}
		if ch := landed[s.WaitFor]; ch != nil {
			write.Wait = ch
		}
		build := []modeltest.Turn{write,
			modeltest.Do(modeltest.Shell("git add -A && git commit -qm '" + id + ": " + strings.ReplaceAll(s.Title, "'", "") + "'")),
			reportTurn(map[string]any{"outcome": "complete", "summary": "implemented " + id + " with a test"}),
			modeltest.Say("Implemented " + id + ".")}
		if s.FixWhen != "" {
			build = append(build, modeltest.Turn{When: s.FixWhen, Reply: func(in modeltest.Input) modeltest.Turn {
				ws := ""
				if m := promptWorkspace.FindStringSubmatch(in.Prompt); m != nil {
					ws = m[1]
				}
				return modeltest.Turn{Text: "The gates say " + s.FixWhen + "; fixing it.", Calls: writeCalls(ws, s.Fix)}
			}},
				modeltest.Do(modeltest.Shell("git commit -qam '"+id+": fix after the gates feedback'")),
				reportTurn(map[string]any{"outcome": "complete", "summary": "fixed " + id + " from the gates' feedback"}),
				modeltest.Say("Fixed."))
		}
		scripts = append(scripts, modeltest.Script{Name: id + " build", Match: "You are the builder for story " + id + ":", Turns: build})
	}
	return scripts
}

// reportTurn calls the team's MCP report tool with fields for the prompt's
// assignment.
func reportTurn(fields map[string]any) modeltest.Turn {
	return modeltest.Turn{Reply: func(in modeltest.Input) modeltest.Turn {
		a, _ := pipeline.ParseAssignment(in.Prompt)
		args := map[string]any{"assignment": string(a.Assignment)}
		for k, v := range fields {
			args[k] = v
		}
		return modeltest.Do(modeltest.Tool("mcp__foreman__report", args))
	}}
}

// goFileRE reads back the files goFile's shell writes.
var goFileRE = regexp.MustCompile(`(?s)cat > (\S+) <<'GO'\n(.*?)GO\n`)

// writeCalls turns a story's shell (goFile heredocs) into file-writing tool
// calls in the workspace ws: the CLI's own Write tool for Claude Code.
func writeCalls(ws, sh string) []modeltest.Call {
	var calls []modeltest.Call
	for _, m := range goFileRE.FindAllStringSubmatch(sh, -1) {
		calls = append(calls, modeltest.WriteFile(filepath.Join(ws, m[1]), m[2]))
	}
	return calls
}
