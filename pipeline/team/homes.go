package team

import (
	"context"
	"strings"

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

// mergeCheckSandbox contains the post-merge check (Config.MergeCheck) in
// the sandbox of the team's first agentcmd driver, and counts what it
// refused as refusals of the story the check verifies (its FOREMAN_ITEM):
// the merge fails with them too (merge.CheckError.Refused).
type mergeCheckSandbox struct {
	driver *agentcmd.Driver
	t      *Team
}

func (s mergeCheckSandbox) Contain(ctx context.Context, cmd gates.CheckCommand) (gates.Contained, error) {
	c, err := s.driver.Contain(ctx, cmd)
	if err != nil || c.Done == nil {
		return c, err
	}
	var item foreman.ItemID
	for _, kv := range cmd.Env {
		if v, ok := strings.CutPrefix(kv, "FOREMAN_ITEM="); ok {
			item = foreman.ItemID(v)
		}
	}
	done := c.Done
	c.Done = func(ctx context.Context) []string {
		notes := done(ctx)
		for _, note := range notes {
			if item != "" {
				s.t.refuse(ctx, refusal{Item: item, Detail: "the post-merge check (sandboxed, running the squash's code): " + note, driver: true})
			}
		}
		return notes
	}
	return c, nil
}

// RemoveHome removes the home the driver kept for a check's temporary
// checkout (merge calls it after the check).
func (s mergeCheckSandbox) RemoveHome(ctx context.Context, workspace string) error {
	return s.driver.RemoveHome(ctx, workspace)
}
