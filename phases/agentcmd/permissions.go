package agentcmd

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentforeman/foreman/phases"
)

// Permissions says whether the driver grants the agent CLI, through the
// CLI's own permission flags, what a stage's work needs.
type Permissions string

// Permission settings.
const (
	// PermissionsAuto grants the format's profile when the driver runs the
	// format's default command (Config.Argv empty), and nothing with a
	// command of the host's, whose flags are the host's. The default.
	PermissionsAuto Permissions = "auto"
	// PermissionsProfile grants the format's profile whatever the command.
	PermissionsProfile Permissions = "profile"
	// PermissionsNone grants nothing: the CLI's own defaults (Claude Code
	// in -p mode refuses every edit and command; codex exec runs read-only).
	PermissionsNone Permissions = "none"
)

// The profiles. Inside the OS sandbox (Driver.Sandboxed) the sandbox is
// the boundary, so the CLI's own prompts are off: Claude Code runs with
// --permission-mode bypassPermissions (IS_SANDBOX=1 lets it as root),
// Codex with --dangerously-bypass-approvals-and-sandbox (its own
// bubblewrap cannot nest in ours). Unsandboxed, each CLI's own rules are
// all there is, and they grant the work and little else:
//   - Claude Code: --permission-mode acceptEdits (edits in the workspace),
//     --add-dir for each of the request's Writable paths (the result
//     file's directory), and --allowedTools for git's everyday commands
//     (ClaudeGitTools), the request's Constraints.Commands (a team's
//     gates) and its MCP servers' tools; every other shell command is
//     refused, and shows in the result's PermissionDenials.
//   - Codex: --sandbox workspace-write with --add-dir for the worktree's
//     own git directory, the object store and the story branches' ref
//     directories (Codex keeps a workspace's .git read-only, so git
//     commit failed without them) and the Writable paths; approval policy
//     never.

// ClaudeGitTools are the Bash rules Claude Code's unsandboxed profile
// allows for committing work: git's commands that read, stage and commit.
func ClaudeGitTools() []string {
	return []string{
		"Bash(git status:*)", "Bash(git diff:*)", "Bash(git log:*)", "Bash(git show:*)",
		"Bash(git add:*)", "Bash(git rm:*)", "Bash(git mv:*)", "Bash(git restore:*)", "Bash(git commit:*)",
	}
}

// profileApplies reports whether the format's profile is granted.
func (d *Driver) profileApplies() bool {
	switch d.cfg.Permissions {
	case PermissionsProfile:
		return true
	case PermissionsNone:
		return false
	}
	return len(d.cfg.Argv) == 0
}

// claudeProfileTools are the tools the unsandboxed Claude Code profile
// adds to the request's own.
func claudeProfileTools(c phases.AgentConstraints) []string {
	tools := ClaudeGitTools()
	for _, cmd := range c.Commands {
		words := strings.Fields(cmd)
		// A shell or an interpreter with arguments of the agent's choosing
		// is every command: not granted here (the sandbox grants it).
		if len(words) == 0 || interpreters[filepath.Base(words[0])] || strings.ContainsAny(cmd, "()") {
			continue
		}
		tools = append(tools, "Bash("+strings.Join(words, " ")+":*)")
	}
	return tools
}

// interpreters run any command given as an argument.
var interpreters = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "env": true, "xargs": true,
	"python": true, "python3": true, "node": true, "perl": true, "ruby": true, "eval": true, "exec": true}

// profileArgs are the flags of the format's profile for req.
func (d *Driver) profileArgs(req phases.AgentRequest, sandboxed bool) []string {
	switch d.cfg.Format {
	case FormatClaude:
		if sandboxed {
			return []string{"--permission-mode=bypassPermissions"}
		}
		args := []string{"--permission-mode=acceptEdits"}
		for _, w := range req.Writable {
			args = append(args, "--add-dir="+w)
		}
		return args
	case FormatCodex:
		if sandboxed {
			return []string{"--dangerously-bypass-approvals-and-sandbox"}
		}
		args := []string{"--sandbox", "workspace-write", "-c", `approval_policy="never"`}
		for _, dir := range append(codexGitDirs(req.WorkspacePath), req.Writable...) {
			args = append(args, "--add-dir", dir)
		}
		return args
	}
	return nil
}

// codexGitDirs are the directories of the workspace's repository that git
// writes to commit there on a branch of its own: the worktree's git
// directory, the object store, and the directories of its branch's ref and
// reflog. Those that do not exist are left out.
func codexGitDirs(ws string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := discoverGit(ctx, ws)
	if err != nil || g == nil {
		return nil
	}
	dirs := []string{g.gitDir, filepath.Join(g.commonDir, "objects")}
	if g.branch != "" {
		dirs = append(dirs, filepath.Join(g.commonDir, filepath.Dir(g.branch)),
			filepath.Join(g.commonDir, "logs", filepath.Dir(g.branch)))
	}
	var out []string
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}
