package team

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
		ResultPath: t.resultPath(r.Assignment), Feedback: r.Feedback, Readiness: r.Readiness, Resume: r.Resume,
	}
	if d.Instructions == "" {
		d.Instructions = DefaultInstructions(r.StageName, st.Kind)
	}
	d.Workspace, _ = t.mgr.Path(r.Item)
	d.Branch, _ = t.mgr.Branch(r.Item)
	var m memory
	if _, _, err := getJSON(context.Background(), t.db, kindMemory, string(r.Item), &m); err == nil && r.Feedback != "" {
		d.GateFeedback = m.GateFeedback
	}
	return t.cfg.Prompt(d)
}

// excludeFromGit keeps the state directory out of `git status` when it is
// inside the repository, through the repository's info/exclude.
func excludeFromGit(ctx context.Context, repo, dir, gitBin string, env []string) error {
	rel, err := filepath.Rel(repo, dir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") || filepath.IsAbs(rel) {
		return nil
	}
	g := gitexec.Runner{Git: gitBin, Env: env}
	common, err := g.Run(ctx, repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return err
	}
	path := filepath.Join(strings.TrimSpace(common), "info", "exclude")
	line := "/" + filepath.ToSlash(rel) + "/"
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	if slices.Contains(strings.Split(string(data), "\n"), line) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	prefix := ""
	if len(data) > 0 && !strings.HasSuffix(string(data), "\n") {
		prefix = "\n"
	}
	if _, err := fmt.Fprintf(f, "%s%s\n", prefix, line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
