package team

import (
	"context"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/phases/gates"
	"github.com/agentforeman/foreman/pipeline"
)

// homeWorktrees removes the homes the agentcmd drivers of the stages and
// the reviewer keep for a story's worktree (sessions, transcripts, what
// the agents left there) just before the worktree itself goes: otherwise
// every story would leave its agents' homes under the state directory for
// good.
type homeWorktrees struct {
	pipeline.Git
	t *Team
}

func (w homeWorktrees) RemoveWorktree(ctx context.Context, item foreman.ItemID) error {
	if path, err := w.Manager.Path(item); err == nil {
		for _, d := range w.t.agentDrivers() {
			if err := d.RemoveHome(ctx, path); err != nil {
				w.t.log.Warn("team: removing a story's agent home", "story", item, "err", err)
			}
		}
	}
	return w.Git.RemoveWorktree(ctx, item)
}

// agentDrivers are the distinct agentcmd drivers of the stages and the
// reviewer.
func (t *Team) agentDrivers() []*agentcmd.Driver {
	var out []*agentcmd.Driver
	add := func(a any) {
		if d, ok := a.(*agentcmd.Driver); ok {
			for _, o := range out {
				if o == d {
					return
				}
			}
			out = append(out, d)
		}
	}
	for _, st := range t.cfg.Stages {
		add(st.Agent)
	}
	add(t.cfg.Reviewer)
	return out
}

// defaultVerifier is the Verifier of a team whose Config names none: the
// gates run the story's code, so they run in the sandbox of the team's
// first agentcmd driver (its hidden places, decoys and binds; see
// agentcmd.Driver.Contain), or on the host where the team has none.
func (t *Team) defaultVerifier() *gates.Verifier {
	cfg := gates.VerifierConfig{Clock: t.cfg.Clock, Logger: t.log}
	if ds := t.agentDrivers(); len(ds) > 0 {
		cfg.Sandbox = ds[0]
	}
	return gates.NewVerifier(cfg)
}
