package pipeline

import (
	"context"
	"errors"
	"log/slog"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/merge"
)

//go:generate go tool mockgen -destination pipelinemock/mocks.go -package pipelinemock github.com/agentforeman/foreman/pipeline Spawner,Messenger,Worktrees,Merger,Lander,Board,Escalator,Reporter,DiffStater,Inbox

// SpawnRequest asks for a fresh worker on one assignment.
type SpawnRequest struct {
	Item       foreman.ItemID
	Title      string
	Stage      int
	StageName  string
	Worker     foreman.WorkerID
	Assignment foreman.AssignmentID
	// Resume: the worker replaces a crashed one; resume the crashed agent's
	// session when its checkpoint names one, else add the CHECKPOINT RESUME
	// block (health.RenderResume) to the stage's prompt.
	Resume bool
	// Readiness is Stage 1's score (for Stage 3's fast-track decision);
	// Feedback is the previous round's NO-GO reason or quality issues.
	Readiness string
	Feedback  string
}

// Spawner starts workers. Spawn must be idempotent by Assignment: the
// runtime re-issues a spawn it cannot confirm after a restart.
type Spawner interface {
	Spawn(ctx context.Context, r SpawnRequest) error
}

// SpawnerFunc adapts a function to Spawner.
type SpawnerFunc func(ctx context.Context, r SpawnRequest) error

// Spawn calls f.
func (f SpawnerFunc) Spawn(ctx context.Context, r SpawnRequest) error { return f(ctx, r) }

// Outgoing is a message from the coordinator to a worker: an ACK, a
// shutdown request or a status probe.
type Outgoing struct {
	Kind       EffectKind // EffectAck, EffectShutdown or EffectProbe
	Item       foreman.ItemID
	Worker     foreman.WorkerID
	Assignment foreman.AssignmentID
	Stage      int
	// Text is the canonical line (empty for a shutdown request).
	Text string
	// Key is the effect's idempotency key; receivers may drop repeats.
	Key string
}

// Messenger delivers the coordinator's messages. A message to a worker that
// is gone should succeed: a second ACK or shutdown is harmless.
type Messenger interface {
	Send(ctx context.Context, m Outgoing) error
}

// MessengerFunc adapts a function to Messenger.
type MessengerFunc func(ctx context.Context, m Outgoing) error

// Send calls f.
func (f MessengerFunc) Send(ctx context.Context, m Outgoing) error { return f(ctx, m) }

// Worktrees makes and removes item worktrees; both are idempotent (removing
// a missing worktree succeeds). Git adapts a merge.Manager.
type Worktrees interface {
	CreateWorktree(ctx context.Context, item foreman.ItemID) error
	RemoveWorktree(ctx context.Context, item foreman.ItemID) error
}

// MergeRequest asks for an item's squash merge.
type MergeRequest struct {
	Item  foreman.ItemID
	Title string
}

// MergeOutcome is a merge's domain result: landed (Commit; Already when it
// had landed before), or refused with a reason a person must act on.
type MergeOutcome struct {
	Commit   string
	Already  bool
	Conflict []string // conflicting files; the merge changed nothing
	Refused  string   // why it was refused (nothing to merge, dirty worktree, failed check, protected path)
	// Landing: a Lander took the change and lands it later (a pull
	// request waiting for its checks); the item stays MERGING until the
	// Lander reports the end.
	Landing bool
}

// Merger squash-merges items. It must recognise an item it already merged
// (merge.Manager does, by the commit trailer). A returned error is a system
// fault: the effect stays pending and is retried.
type Merger interface {
	Merge(ctx context.Context, r MergeRequest) (MergeOutcome, error)
}

// Lander is a Merger whose landings take time: a pull request that waits
// for its checks and reviews. Merge hands the change over (pushes it,
// opens or updates the pull request) and answers at once, with
// MergeOutcome.Landing, so that no caller waits for a check; it stays
// idempotent by item (asked again after a restart, it finds what it
// handed over). Watch runs while the host runs: it follows every landing
// handed over, also those of a process before it, and reports each one's
// end through report as an Event for Runtime.Handle: EventMerged (with
// the Commit), EventMergeFailed (a cause a person must act on: the pull
// request was closed), or EventLandRejected (feedback for the build
// stage, within the flow's cycles). A report may be made twice (a crash
// between the report and the Lander's record of it): one the item no
// longer takes is a *TransitionError, which the Lander treats as taken.
type Lander interface {
	Merger
	Watch(ctx context.Context, report func(ctx context.Context, item foreman.ItemID, ev Event) error) error
}

// Escalator hands an escalation to a person.
type Escalator interface {
	Escalate(ctx context.Context, e Escalation) error
}

// EscalatorFunc adapts a function to Escalator.
type EscalatorFunc func(ctx context.Context, e Escalation) error

// Escalate calls f.
func (f EscalatorFunc) Escalate(ctx context.Context, e Escalation) error { return f(ctx, e) }

// ReportEntry is one item's report section.
type ReportEntry struct {
	// Key identifies the section; appending the same key twice must not
	// add a second section.
	Key   string
	Flow  *Flow
	State State
}

// Reporter writes an item's section of the run report when it is DONE or
// PAUSED. FileReporter is one; without a Reporter no report is written.
type Reporter interface {
	AppendReport(ctx context.Context, e ReportEntry) error
}

// Git adapts a merge.Manager to Worktrees and Merger (and, through
// DiffStat, to FileReporter's diff statistics).
type Git struct {
	Manager *merge.Manager
	// Request is the template of every merge (Sync, Check, Push, ...);
	// Title is filled from the item's title.
	Request merge.Request
	Logger  *slog.Logger
}

// CreateWorktree implements Worktrees.
func (g Git) CreateWorktree(ctx context.Context, item foreman.ItemID) error {
	_, err := g.Manager.Create(ctx, item)
	return err
}

// RemoveWorktree implements Worktrees.
func (g Git) RemoveWorktree(ctx context.Context, item foreman.ItemID) error {
	return g.Manager.Remove(ctx, item)
}

// DiffStat measures the item's branch.
func (g Git) DiffStat(ctx context.Context, item foreman.ItemID) (merge.DiffStat, error) {
	return g.Manager.DiffStat(ctx, item)
}

// Merge implements Merger. merge's typed refusals become a MergeOutcome;
// a *merge.PushError keeps the landed merge (the local result stands) and is
// logged; *merge.LockedError and system faults are errors, retried later.
func (g Git) Merge(ctx context.Context, r MergeRequest) (MergeOutcome, error) {
	req := g.Request
	if r.Title != "" {
		req.Title = r.Title
	}
	res, err := g.Manager.Merge(ctx, r.Item, req)
	var (
		conflict   *merge.ConflictError
		dirty      *merge.DirtyError
		check      *merge.CheckError
		verify     *merge.VerifyError
		inProgress *merge.InProgressError
		push       *merge.PushError
	)
	switch {
	case err == nil:
		return MergeOutcome{Commit: res.Commit, Already: res.Status == merge.AlreadyMerged}, nil
	case errors.As(err, &push):
		logger(g.Logger).Warn("pipeline: merged but not pushed", "item", r.Item, "err", err)
		return MergeOutcome{Commit: res.Commit, Already: res.Status == merge.AlreadyMerged}, nil
	case errors.As(err, &conflict):
		return MergeOutcome{Conflict: conflict.Files}, nil
	case errors.Is(err, merge.ErrNothingToMerge), errors.Is(err, merge.ErrNoBranch), errors.Is(err, merge.ErrProtectedPath), errors.Is(err, merge.ErrLinkOutside),
		errors.As(err, &dirty), errors.As(err, &check), errors.As(err, &verify), errors.As(err, &inProgress):
		return MergeOutcome{Refused: err.Error()}, nil
	}
	return MergeOutcome{}, err
}

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
