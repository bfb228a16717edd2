package team

import (
	"context"
	"os"
	"path/filepath"

	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/gates"
	"github.com/agentforeman/foreman/phases/gitsnap"
)

// NewStageAgent returns the agent that performs a team's stages on a host
// other than the coordinator's (a worker process of a team spread over
// several machines). cfg is the team's Config as the coordinator has it
// (Agent, Gates, Flow, Stages, Limits, ...) except that Repo is this
// host's own clone and Store must be set: the stage records what it
// verified (the board the flow checks, the build's starting point, the
// quality gate's feedback) in the team's store, where the coordinator
// reads it. Each execution's request must name a worktree of Repo (see
// merge/gitremote's Checkout) and carry the assignment block the
// coordinator's prompt has; the result's Result is the stage's report
// line, which the coordinator's Config.Remote hands back to its worker
// pool. Reviewer is not supported here (a coordinator with Remote set runs
// no reviewer).
func NewStageAgent(ctx context.Context, cfg Config) (phases.AgentDriver, error) {
	if cfg.Store == nil {
		return nil, &ConfigError{Field: "Store", Reason: "a stage agent records its evidence in the team's store; set it"}
	}
	if cfg.Reviewer != nil {
		return nil, &ConfigError{Field: "Reviewer", Reason: "not supported by a stage agent"}
	}
	cfg, log, err := prepareConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	t := &Team{cfg: cfg, db: cfg.Store, clk: clock.OrReal(cfg.Clock), log: log}
	mgr, mc, err := openRepository(ctx, cfg, cfg.Merge)
	if err != nil {
		return nil, err
	}
	t.mgr = mgr
	for _, d := range []string{cfg.StateDir, filepath.Join(cfg.StateDir, "leases")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := makeResultsDir(cfg.StateDir); err != nil {
		return nil, err
	}
	// The coordinator's prompt names the assignment's result directory and
	// report key; this host derives the same from the team's secret.
	if t.secret, err = loadSecret(ctx, cfg.Store); err != nil {
		return nil, err
	}
	if err := t.mgr.Exclude(cfg.StateDir); err != nil {
		return nil, err
	}
	// Events of this host are its own (OnEvent sees them); the
	// coordinator keeps the team's log.
	if t.events, err = newEventLog(ctx, nil, cfg.OnEvent, log); err != nil {
		return nil, err
	}
	t.snap, t.verifier, t.feedback = cfg.Snapshotter, cfg.Verifier, cfg.Feedback
	if t.snap == nil {
		t.snap = gitsnap.New(gitsnap.Config{Git: mc.Git, Env: mc.GitEnv, Clock: cfg.Clock})
	}
	if t.verifier == nil {
		t.verifier = t.defaultVerifier()
	}
	if t.feedback == nil {
		t.feedback = gates.NewFeedbackGenerator(gates.FeedbackConfig{})
	}
	return stageRunner{t}, nil
}
