// Package health decides whether a worker is alive, making progress, stuck
// or crashed, and what to do about it. It has four independent parts.
//
// Deadlines tracks, per subject (an assignment), three independent
// deadlines: liveness (heartbeat TTL, default 45 s), progress (meaningful
// events only, default 15 min) and attempt (maximum duration, none by
// default). Heartbeat moves only liveness; Progress moves progress and
// liveness: a worker that heartbeats is alive, not necessarily getting
// anywhere (see "Liveness is not progress" in docs/architecture.md). Each
// expiry is reported once, as a typed Expiry (subject, kind, deadline, how
// late, measured as the hook is called) through the OnExpiry hook. All deadlines share one clock timer armed for the earliest
// one in a min-heap; a heartbeat updates its deadline in place and costs
// O(1), heap work is at most once per timeout period, and nothing scans all
// subjects. The clock is injectable (foreman.NewFakeClock in tests) and
// optional jitter comes from an injectable source.
//
// The crash-detection protocol is a pure state machine, Step, driven by a
// transition table: a worker idle without a completion becomes
// Suspicious and is probed; a parseable status reply (ParseStatusReply)
// clears it; idle again, or the probe timeout, confirms a crash. Within the
// crash budget (default 1) the item is checked to be still open and then
// resumed, in the agent's own session when the checkpoint names one and
// otherwise in a fresh worker given the CHECKPOINT RESUME block
// (RenderResume); beyond it, or when the check or the resume fails, the item
// is Paused with an actionable Escalation. An item found closed is not
// resumed. Monitor is the runtime: it carries out Step's effects through
// small interfaces the host implements (Prober, ItemChecker, Escalator,
// Resumer, CheckpointLoader, and optionally DoneMarkers and Completer),
// reports every transition through OnTransition, and keeps an effect that
// could not be carried out pending until the next call or Retry.
// Lost completions (a done marker on an assignment that is still watched)
// are completed from the checkpoint, or probed for when no checkpoint
// confirms them or synthesis is disabled. Monitor does not watch the clock
// for silence itself: a host typically feeds a liveness Expiry from
// Deadlines to Monitor.Idle.
//
// CheckpointStore keeps one versioned JSON checkpoint per item, written
// atomically in an absolute directory that must lie outside every worktree:
// the store is given the worktree roots (CheckpointStoreConfig) and refuses a
// directory inside one when it is made and on every Save
// (WorktreePathError). A corrupt or newer-version file is
// a *CheckpointError on Load, is never modified, and Save refuses to replace
// it unless SaveOptions.ReplaceInvalid says so: bad input never corrupts
// state (see docs/architecture.md).
//
// StuckQG hashes each quality-gate output and reports a subject stuck when
// 3 of its last 10 outputs (both configurable) are identical to the latest,
// which includes 3 identical in a row; Window == Identical makes it strictly
// consecutive. Reset a subject when its work ends, to free its history.
//
// Package healthmock holds gomock mocks of the service interfaces.
package health
