package worker

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
	"github.com/agentforeman/foreman/phases"
)

// Defaults of Config. Timeouts, the crash budget and the stuck quality-gate
// rule come from package health; every limit is configuration with a
// documented default (see docs/architecture.md).
const (
	DefaultMaxWorkers           = 4
	DefaultMaxReviewRejections  = 2
	DefaultCrashBudget          = health.DefaultCrashBudget
	DefaultProbeTimeout         = health.DefaultProbeTimeout
	DefaultStallBudget          = 1
	DefaultShutdownTimeout      = 30 * time.Second
	DefaultKillTimeout          = 15 * time.Second
	DefaultRememberFinished     = 10000
	DefaultRateLimitBackoff     = time.Minute
	DefaultRateLimitMaxBackoff  = 30 * time.Minute
	DefaultRateLimitJitter      = 30 * time.Second
	DefaultSlowWorkerExtensions = 1
	DefaultSlowWorkerMinCPU     = time.Second
)

// Config configures a Dispatcher. The zero value of every field means its
// documented default; only Agent (or Transport) must be set.
type Config struct {
	// Mode: pooled long-lived workers (default) or a fresh worker per
	// assignment.
	Mode Mode
	// MaxWorkers is the pool size (pooled) or the most fresh workers at
	// once; default 4. Pooled workers are named WorkerPrefix+"1", "2", ...
	MaxWorkers int

	// HeartbeatInterval is how often the Runtime heartbeats (default 10 s).
	HeartbeatInterval time.Duration
	// LivenessTimeout: no message for this long makes the worker suspicious
	// and it is probed (default 45 s). ProgressTimeout: no meaningful event for this long,
	// heartbeats or not, means it is stuck (default 15 min). AttemptTimeout
	// bounds one assignment (default none). Negative disables each.
	LivenessTimeout time.Duration
	ProgressTimeout time.Duration
	AttemptTimeout  time.Duration
	// ProbeTimeout is how long a suspicious worker has to answer its probe
	// before the crash is confirmed (default 2 min, health's default).
	ProbeTimeout time.Duration

	// MaxReviewRejections: rejections retried before REVIEW_LIMIT (default
	// 2; the third rejection escalates). Negative means 0.
	MaxReviewRejections int
	// CrashBudget: crashes (agent failures, workers that went silent and
	// did not answer their probe) of one item that are retried before
	// CRASH_LIMIT (default 1). Negative means 0.
	CrashBudget int
	// StallBudget: STUCK_WORKER kills of one item after which it is still
	// requeued (default 1); beyond it the item is parked. Negative means 0.
	StallBudget int
	// StuckQGIdentical and StuckQGWindow: an item is STUCK_QG when
	// StuckQGIdentical of its last StuckQGWindow failing quality-gate
	// outputs are identical (defaults 3 and 10, health.StuckQG's rule; 3 in
	// a row always counts).
	StuckQGIdentical int
	StuckQGWindow    int

	// RateLimitBackoff is the wait before an item whose agent was
	// rate-limited is queued again (default 1 min), doubled for every
	// rate-limited attempt in a row up to RateLimitMaxBackoff (default 30
	// min), never ending before the reset the provider named, plus a
	// random jitter of up to RateLimitJitter (default 30 s; negative: none)
	// so that items limited together do not retry together. Rate limits
	// are not crashes and have no budget: an item is retried until it
	// completes or is parked for another reason.
	RateLimitBackoff    time.Duration
	RateLimitMaxBackoff time.Duration
	RateLimitJitter     time.Duration

	// SlowWorkerExtensions is how many times a worker whose progress
	// deadline passed, but which shows evidence of work since its last
	// progress (output, files changing in its worktree, CPU time of its
	// agent's processes), gets SlowWorkerExtension more time instead of
	// being killed as stuck (default 1; negative: none, every stall
	// kills). SlowWorkerExtension defaults to ProgressTimeout.
	// SlowWorkerMinCPU is the CPU time that counts as evidence on its own
	// (default 1 s: an idle agent process uses a little). Evidence
	// gathers it (nil: the default Runtime, or a Transport that
	// implements WorkEvidence; with neither, stalls kill as without
	// extensions).
	SlowWorkerExtensions int
	SlowWorkerExtension  time.Duration
	SlowWorkerMinCPU     time.Duration
	Evidence             WorkEvidence

	// ItemBudget and TotalBudget bound tokens and cost per item and for the
	// whole dispatcher; zero fields are unlimited. See the package doc for
	// the overshoot.
	ItemBudget  Budget
	TotalBudget Budget

	// ShutdownTimeout is how long Shutdown waits for running assignments to
	// finish before killing them (default 30 s). KillTimeout is how long it
	// then waits for workers to stop (default 15 s, three times agentcmd's
	// kill grace).
	ShutdownTimeout time.Duration
	KillTimeout     time.Duration

	// RememberFinished is how many finished assignments are remembered to
	// tell a duplicate completion from a stale message (default 10000).
	RememberFinished int
	// AssignmentPrefix starts every AssignmentID (default "a-" plus six
	// random hex digits and "-", so that ids differ across restarts).
	// WorkerPrefix starts generated worker ids (default "w").
	AssignmentPrefix string
	WorkerPrefix     string

	// Transport carries commands to workers. Nil means an in-process
	// Runtime running Agent.
	Transport Transport
	// Agent runs one assignment in the default Runtime (for example an
	// agentcmd.Driver). Commits reads the worktree's HEAD for heartbeats
	// (default: what git rev-parse HEAD prints, read from git's files when
	// they are plain). AgentTimeout bounds one execution (default none).
	Agent        phases.AgentDriver
	Commits      CommitReader
	AgentTimeout time.Duration
	// Gate is the default Runtime's quality gate, run after each successful
	// agent execution and reported as MsgQGResult (see Gate). A zero Gate
	// runs none. With a custom Transport the transport reports gate runs.
	Gate Gate

	// ItemChecker, when set, is asked whether an item is still open after
	// its worker's crash was confirmed and before the item is requeued: an
	// item closed meanwhile (for example on the host's board) is dropped,
	// not reassigned. Nil means the Dispatcher's own record decides (an
	// item it holds is open). It is called without the Dispatcher's lock,
	// by the goroutine carrying out effects, so it should be quick.
	ItemChecker health.ItemChecker

	// Escalator receives escalations; nil means they reach only OnEvent.
	Escalator Escalator
	// OnEvent receives every lifecycle change (see SlogEvents).
	OnEvent EventHook
	// Clock drives every deadline; nil means the wall clock.
	Clock foreman.Clock
	// Logger; nil discards.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.MaxWorkers <= 0 {
		c.MaxWorkers = DefaultMaxWorkers
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = health.DefaultHeartbeatInterval
	}
	if c.LivenessTimeout == 0 {
		c.LivenessTimeout = health.DefaultLivenessTimeout
	}
	if c.ProgressTimeout == 0 {
		c.ProgressTimeout = health.DefaultProgressTimeout
	}
	if c.ProbeTimeout <= 0 {
		c.ProbeTimeout = DefaultProbeTimeout
	}
	c.MaxReviewRejections = limit(c.MaxReviewRejections, DefaultMaxReviewRejections)
	c.CrashBudget = limit(c.CrashBudget, DefaultCrashBudget)
	c.StallBudget = limit(c.StallBudget, DefaultStallBudget)
	if c.StuckQGIdentical <= 0 {
		c.StuckQGIdentical = health.DefaultStuckIdentical
	}
	if c.StuckQGWindow <= 0 {
		c.StuckQGWindow = health.DefaultStuckWindow
	}
	c.StuckQGWindow = max(c.StuckQGWindow, c.StuckQGIdentical)
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.KillTimeout <= 0 {
		c.KillTimeout = DefaultKillTimeout
	}
	if c.RateLimitBackoff <= 0 {
		c.RateLimitBackoff = DefaultRateLimitBackoff
	}
	if c.RateLimitMaxBackoff <= 0 {
		c.RateLimitMaxBackoff = DefaultRateLimitMaxBackoff
	}
	c.RateLimitMaxBackoff = max(c.RateLimitMaxBackoff, c.RateLimitBackoff)
	if c.RateLimitJitter == 0 {
		c.RateLimitJitter = DefaultRateLimitJitter
	}
	c.SlowWorkerExtensions = limit(c.SlowWorkerExtensions, DefaultSlowWorkerExtensions)
	if c.SlowWorkerExtension <= 0 {
		c.SlowWorkerExtension = c.ProgressTimeout
	}
	if c.SlowWorkerMinCPU <= 0 {
		c.SlowWorkerMinCPU = DefaultSlowWorkerMinCPU
	}
	if c.RememberFinished <= 0 {
		c.RememberFinished = DefaultRememberFinished
	}
	if c.AssignmentPrefix == "" {
		var b [3]byte
		_, _ = rand.Read(b[:])
		c.AssignmentPrefix = "a-" + hex.EncodeToString(b[:]) + "-"
	}
	if c.WorkerPrefix == "" {
		c.WorkerPrefix = "w"
	}
	if c.Clock == nil {
		c.Clock = foreman.RealClock()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func limit(v, def int) int {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}
