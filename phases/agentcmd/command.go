package agentcmd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/agentforeman/foreman/phases"
)

// ErrNoCommand means the driver has no command to run: Config.Argv is empty
// and the Format has no default command.
var ErrNoCommand = errors.New("agentcmd: no agent command configured")

// ErrUnknownFormat means Config.Format names no known format.
var ErrUnknownFormat = errors.New("agentcmd: unknown output format")

// StartError reports that the agent could not be started: its binary was
// not found (errors.Is(err, exec.ErrNotFound)), the workspace does not
// exist, or the operating system refused to run it.
type StartError struct {
	// Argv0 is the command as configured, before the PATH lookup.
	Argv0 string
	// Dir is the workspace the agent was to run in: a relative Argv0 with
	// a slash (./agent.sh) is found from there, not from the host's
	// working directory.
	Dir string
	Err error
}

func (e *StartError) Error() string {
	if e.Dir != "" && !filepath.IsAbs(e.Argv0) && strings.ContainsRune(e.Argv0, filepath.Separator) {
		return fmt.Sprintf("agentcmd: start %q (a relative path, looked up in the workspace %s; give an absolute path for a command outside it): %v",
			e.Argv0, e.Dir, e.Err)
	}
	return fmt.Sprintf("agentcmd: start %q: %v", e.Argv0, e.Err)
}

func (e *StartError) Unwrap() error { return e.Err }

// invocation is one execution's command line, environment and stdin.
type invocation struct {
	argv  []string
	env   []string
	stdin string // written to the agent's stdin when useStdin
	// useStdin is true when the prompt goes to stdin; otherwise stdin is
	// /dev/null.
	useStdin bool
	// readOnly are files the invocation wrote for the agent to read (an
	// MCP configuration), bound into a sandbox.
	readOnly []string
	// cleanup removes what the invocation wrote (an MCP configuration
	// file); nil when it wrote nothing. Execute calls it once the agent is
	// gone.
	cleanup func()
}

// stdinFormat reports whether format f's CLI reads its prompt from stdin
// when none is given as an argument (Claude Code's -p; Codex's exec, told
// so by a "-" prompt; Gemini CLI whenever stdin is not a terminal).
func stdinFormat(f Format) bool { return f == FormatClaude || f == FormatCodex || f == FormatGemini }

// invocation builds the command line for req; home is the sandbox's HOME
// ("" unsandboxed).
func (d *Driver) invocation(req phases.AgentRequest, home string) (invocation, error) {
	ad, ok := adapterFor(d.cfg.Format)
	if !ok {
		return invocation{}, fmt.Errorf("%w: %q", ErrUnknownFormat, d.cfg.Format)
	}
	base := d.cfg.Argv
	if len(base) == 0 {
		base = ad.defaultArgv
	}
	if len(base) == 0 || base[0] == "" {
		return invocation{}, ErrNoCommand
	}
	resume := d.cfg.ResumeArgs
	if resume == nil {
		resume = ad.resumeArgs
	}
	if err := checkScriptPlaceholders(append(slices.Clip(base), resume...)); err != nil {
		return invocation{}, err
	}
	if req.SessionID != "" {
		if err := checkSessionID(d.cfg.Format, req.SessionID); err != nil {
			return invocation{}, err
		}
	}
	prompt := d.cfg.Prompt(req)
	// One pass of a Replacer: text substituted for a placeholder is never
	// expanded again, so a prompt may safely contain "{session}".
	expand := strings.NewReplacer(
		"{prompt}", prompt,
		"{task}", req.TaskPrompt,
		"{feedback}", req.Feedback,
		"{session}", req.SessionID,
		"{workspace}", req.WorkspacePath,
		"{iteration}", strconv.Itoa(req.Iteration),
	)

	var argv []string
	placed := false
	add := func(args []string) {
		for _, a := range args {
			if placesPrompt(a) {
				placed = true
			}
			argv = append(argv, expand.Replace(a))
		}
	}
	add(base)
	if err := checkMCPServers(req.MCPServers); err != nil {
		return invocation{}, err
	}
	constraints := req.Constraints
	profile := d.profileApplies()
	if d.cfg.Format == FormatClaude && profile && home == "" {
		// One --allowedTools: the profile's, the host's and the servers'.
		constraints.AllowedTools = append(slices.Clip(constraints.AllowedTools), claudeProfileTools(constraints)...)
	}
	if d.cfg.Format == FormatClaude && len(req.MCPServers) > 0 {
		constraints.AllowedTools = append(slices.Clip(constraints.AllowedTools), claudeMCPTools(req.MCPServers)...)
	}
	if profile {
		// Data, never templates, like the constraints.
		argv = append(argv, d.profileArgs(req, home != "")...)
	}
	if ad.constraints != nil {
		// Constraint values are data, never templates.
		argv = append(argv, ad.constraints(constraints)...)
	}
	var inv invocation
	var mcpEnv []string
	if len(req.MCPServers) > 0 {
		// Config values are data too: appended, never expanded.
		switch d.cfg.Format {
		case FormatClaude:
			dir, err := os.MkdirTemp("", ownerPattern("foreman-mcp-"))
			if err != nil {
				return invocation{}, err
			}
			inv.cleanup = func() { _ = os.RemoveAll(dir) }
			inv.readOnly = append(inv.readOnly, dir)
			args, err := claudeMCPConfig(req.MCPServers, dir)
			if err != nil {
				inv.cleanup()
				return invocation{}, err
			}
			argv = append(argv, args...)
		case FormatCodex:
			var args []string
			args, mcpEnv = codexMCPArgs(req.MCPServers)
			argv = append(argv, args...)
		case FormatGemini:
			dir, err := geminiSettingsDir()
			if err != nil {
				return invocation{}, err
			}
			inv.cleanup = func() { _ = os.RemoveAll(dir) }
			inv.readOnly = append(inv.readOnly, dir)
			if mcpEnv, err = geminiMCPSettings(req.MCPServers, dir); err != nil {
				inv.cleanup()
				return invocation{}, err
			}
		}
	}
	if d.cfg.Format == FormatGemini {
		// Gemini CLI's tools refuse paths outside its workspace directories.
		argv = append(argv, geminiIncludeArgs(req.Writable)...)
	}
	inv.env = d.environ(req, mcpEnv, home)
	if req.SessionID != "" {
		add(resume)
	}

	via := d.cfg.PromptVia
	if via == "" {
		via = PromptArg
		if !placed && stdinFormat(d.cfg.Format) {
			via = PromptStdin
		}
	}
	if via == PromptArg && !placed && stdinFormat(d.cfg.Format) &&
		checkArgSize(append(slices.Clip(argv), prompt), inv.env) != nil {
		// Too long for argv, and the CLI reads stdin: no E2BIG.
		d.cfg.Logger.Info("agent prompt too long for the command line: delivered on stdin", "bytes", len(prompt))
		via = PromptStdin
	}
	switch via {
	case PromptStdin:
		inv.useStdin, inv.stdin = true, prompt
		if d.cfg.Format == FormatCodex && !placed {
			argv = append(argv, "-") // codex exec reads the prompt from stdin
		}
	case PromptArg:
		if !placed {
			if ad.endOfOptions {
				argv = append(argv, "--")
			}
			argv = append(argv, prompt)
		}
	default:
		if inv.cleanup != nil {
			inv.cleanup()
		}
		return invocation{}, fmt.Errorf("agentcmd: unknown prompt delivery %q", d.cfg.PromptVia)
	}
	inv.argv = argv
	if err := checkArgSize(argv, inv.env); err != nil {
		if inv.cleanup != nil {
			inv.cleanup()
		}
		return invocation{}, err
	}
	return inv, nil
}

// placesPrompt reports whether arg puts the prompt, or part of it, in argv.
func placesPrompt(arg string) bool {
	return strings.Contains(arg, "{prompt}") || strings.Contains(arg, "{task}") || strings.Contains(arg, "{feedback}")
}
