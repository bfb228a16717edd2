package phases

import (
	"context"
	"log/slog"
)

// SnapshotPhaseInput is what the snapshot phase measures against.
type SnapshotPhaseInput struct {
	BeforeState BeforeState
}

// SnapshotPhaseResult is the outcome of the snapshot phase.
type SnapshotPhaseResult struct {
	PhaseResult
	// Snapshot is set whenever the snapshotter succeeded, even when it shows
	// no change.
	Snapshot *Snapshot `json:"snapshot,omitempty"`
	// NoChanges reports an empty snapshot (Snapshot.Empty). Unless the
	// handler allows empty snapshots, such a result is not a success and its
	// Error has kind ErrorNoChanges.
	NoChanges bool `json:"no_changes,omitempty"`
}

// SnapshotOptions configure a SnapshotPhaseHandler; the zero value is the
// safe default.
type SnapshotOptions struct {
	// AllowEmpty accepts a snapshot with no change as a success, for tasks
	// where "nothing to change" is a legitimate answer. Default: false (an
	// empty snapshot is never evidence of work).
	AllowEmpty bool
}

// SnapshotPhaseHandler records what the agent changed.
type SnapshotPhaseHandler struct{ opts SnapshotOptions }

// NewSnapshotPhaseHandler returns a snapshot handler.
func NewSnapshotPhaseHandler(opts SnapshotOptions) *SnapshotPhaseHandler {
	return &SnapshotPhaseHandler{opts}
}

// Name returns "snapshot".
func (*SnapshotPhaseHandler) Name() string { return string(PhaseSnapshot) }

// Phase returns PhaseSnapshot.
func (*SnapshotPhaseHandler) Phase() Phase { return PhaseSnapshot }

// Validate requires a workspace and a snapshotter.
func (*SnapshotPhaseHandler) Validate(pc *PhaseContext, _ SnapshotPhaseInput) error {
	v := validation{phase: PhaseSnapshot}
	v.check(pc.WorkspacePath != "", "workspace path is required")
	v.check(pc.Services.Snapshotter != nil, "snapshotter is required")
	return v.err()
}

// Execute captures the workspace against the before state. A snapshotter
// error yields ErrorSnapshotFailed; an empty snapshot yields NoChanges.
func (h *SnapshotPhaseHandler) Execute(ctx context.Context, pc *PhaseContext, in SnapshotPhaseInput) SnapshotPhaseResult {
	clk := pc.Services.clock()
	start := clk.Now()
	log := pc.Services.logger()
	log.LogAttrs(ctx, slog.LevelInfo, "snapshot phase started",
		slog.String("run_id", string(pc.RunID)), slog.Int("iteration", pc.Iteration))

	if err := h.Validate(pc, in); err != nil {
		return SnapshotPhaseResult{PhaseResult: PhaseResult{Error: validationFailure(err), Duration: clk.Since(start)}}
	}

	meta := SnapshotMeta{RunID: pc.RunID, Iteration: pc.Iteration, TaskPrompt: pc.Task.Prompt}
	snap, err := pc.Services.Snapshotter.Capture(ctx, pc.WorkspacePath, in.BeforeState, meta)
	if err != nil {
		log.LogAttrs(ctx, slog.LevelError, "snapshot phase failed",
			slog.String("run_id", string(pc.RunID)), slog.Int("iteration", pc.Iteration), slog.Any("error", err))
		return SnapshotPhaseResult{PhaseResult: PhaseResult{
			Error: &PhaseError{
				Kind: ErrorSnapshotFailed, Message: err.Error(), Err: err,
				Details: map[string]any{"run_id": pc.RunID, "iteration": pc.Iteration, "phase": PhaseSnapshot},
			},
			Duration: clk.Since(start),
		}}
	}

	res := SnapshotPhaseResult{PhaseResult: PhaseResult{Success: true}, Snapshot: &snap, NoChanges: snap.Empty()}
	if res.NoChanges && !h.opts.AllowEmpty {
		res.Success = false
		res.Error = &PhaseError{Kind: ErrorNoChanges, Message: "no changes detected: no new commits and nothing uncommitted"}
	}
	res.Duration = clk.Since(start)
	log.LogAttrs(ctx, slog.LevelInfo, "snapshot captured", slog.String("run_id", string(pc.RunID)),
		slog.Int("iteration", pc.Iteration), slog.String("snapshot_id", snap.ID),
		slog.Int("files_changed", len(snap.Files)), slog.Bool("no_changes", res.NoChanges))
	return res
}
