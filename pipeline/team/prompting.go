package team

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/pipeline"
)

// prompt renders a spawn's prompt for the worker pool (which appends the
// assignment block).
func (t *Team) prompt(r pipeline.SpawnRequest) string {
	s, _ := t.story(r.Item)
	st := t.cfg.Stages[r.Stage]
	d := PromptData{
		Story: s, Stage: r.Stage, StageName: r.StageName, Role: st.Role, Kind: st.Kind,
		Instructions: st.Instructions, Worker: r.Worker, Assignment: r.Assignment,
		Feedback: r.Feedback, Readiness: r.Readiness, Resume: r.Resume,
		MCP: t.reports != nil && st.Kind != StageGate, Form: formOf(t.cfg.Flow, r.Stage),
	}
	if st.Kind != StageGate {
		cred := t.credential(r.Assignment)
		d.ResultPath, d.ReportKey = cred.ResultPath(), cred.Key
	}
	if d.Instructions == "" {
		d.Instructions = DefaultInstructions(r.StageName, st.Kind)
	}
	d.Workspace, _ = t.mgr.Path(r.Item)
	d.Branch, _ = t.mgr.Branch(r.Item)
	var m memory
	if _, _, err := getJSON(context.Background(), t.db, kindMemory, string(r.Item), &m); err == nil {
		if r.Feedback != "" {
			d.GateFeedback = m.GateFeedback
		}
		if st.Kind == StageBuild {
			d.Conflict = m.Conflict
		}
	}
	return t.cfg.Prompt(d)
}

// mainWorktree returns the main worktree of the repository holding path
// (a subdirectory or a linked worktree resolve to it), so that every host
// pointed anywhere into one repository shares one state directory.
func mainWorktree(ctx context.Context, path, gitBin string, env []string) (string, error) {
	// git run in a directory that does not exist fails as if git were
	// missing ("fork/exec git: no such file or directory").
	if info, err := os.Stat(path); err != nil {
		return "", &ConfigError{Field: "Repo", Reason: err.Error(), Err: err}
	} else if !info.IsDir() {
		return "", &ConfigError{Field: "Repo", Reason: path + " is not a directory"}
	}
	common, err := commonDir(ctx, path, gitBin, env)
	if err != nil {
		return "", &ConfigError{Field: "Repo", Reason: "not in a git repository: " + err.Error()}
	}
	if filepath.Base(common) != ".git" {
		return "", &ConfigError{Field: "Repo", Reason: common + " is a bare repository; the team needs a working tree"}
	}
	return filepath.Dir(common), nil
}

// commonDir returns the git directory shared by the worktrees of the
// repository holding dir, as git rev-parse --git-common-dir prints it
// (absolute): read from git's files when dir is the root of a plainly laid
// out worktree, else asked of git.
func commonDir(ctx context.Context, dir, gitBin string, env []string) (string, error) {
	if l, ok := gitexec.ReadLayout(dir, env); ok {
		return l.CommonDir, nil
	}
	g := gitexec.Runner{Git: gitBin, Env: env}
	common, err := g.Run(ctx, dir, "rev-parse", "--path-format=absolute", "--git-common-dir")
	return strings.TrimSpace(common), err
}

// resolveRepo makes cfg.Repo the main worktree and fills StateDir's default.
func resolveRepo(ctx context.Context, cfg *Config) error {
	repo, err := mainWorktree(ctx, cfg.Repo, cfg.Merge.Git, cfg.Merge.GitEnv)
	if err != nil {
		return err
	}
	cfg.Repo = repo
	if cfg.StateDir == "" {
		cfg.StateDir = filepath.Join(repo, StateDirName)
	}
	return nil
}
