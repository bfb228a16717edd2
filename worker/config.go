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
	// Mode is pooled long-lived workers or a fresh worker per assignment.
	// Default: ModePooled.
	Mode Mode
	// MaxWorkers is the pool size (pooled) or the most fresh workers at
	// once. Pooled workers are named WorkerPrefix+"1", "2", ... Default: 4
	// (DefaultMaxWorkers).
	MaxWorkers int

	// HeartbeatInterval is how often the Runtime heartbeats. Default: 10 s.
	HeartbeatInterval time.Duration
	// LivenessTimeout: no message for this long makes the worker suspicious
	// and it is probed; negative disables it. Default: 45 s.
	LivenessTimeout time.Duration
	// ProgressTimeout: no meaningful event for this long, heartbeats or
	// not, means the worker is stuck; negative disables it. Default: 15 min.
	ProgressTimeout time.Duration
	// AttemptTimeout bounds one assignment. Default: none (zero or
	// negative: no attempt deadline).
	AttemptTimeout time.Duration
	// ProbeTimeout is how long a suspicious worker has to answer its probe
	// before the crash is confirmed. Default: 2 min (health's default).
	ProbeTimeout time.Duration

	// MaxReviewRejections is how many review rejections are retried before
	// REVIEW_LIMIT (with 2, the third rejection escalates); negative means
	// 0. Default: 2.
	MaxReviewRejections int
	// CrashBudget is how many crashes (agent failures, workers that went
	// silent and did not answer their probe) of one item are retried
	// before CRASH_LIMIT; negative means 0. Default: 1.
	CrashBudget int
	// StallBudget is how many STUCK_WORKER kills of one item still requeue
	// it; beyond it the item is parked. Negative means 0. Default: 1.
	StallBudget int
	// StuckQGIdentical: an item is STUCK_QG when StuckQGIdentical of its
	// last StuckQGWindow failing quality-gate outputs are identical
	// (health.StuckQG's rule; StuckQGIdentical in a row always counts).
	// Default: 3.
	StuckQGIdentical int
	// StuckQGWindow is how many of an item's last failing quality-gate
	// outputs are compared, never fewer than StuckQGIdentical. Default: 10.
	StuckQGWindow int

	// RateLimitBackoff is the wait before an item whose agent was
	// rate-limited is queued again, doubled for every rate-limited attempt
	// in a row up to RateLimitMaxBackoff, never ending before the reset
	// the provider named, plus a random jitter of up to RateLimitJitter so
	// that items limited together do not retry together. Rate limits are
	// not crashes and have no budget: an item is retried until it
	// completes or is parked for another reason. Default: 1 min.
	RateLimitBackoff time.Duration
	// RateLimitMaxBackoff caps the doubled rate-limit wait, never below
	// RateLimitBackoff. Default: 30 min.
	RateLimitMaxBackoff time.Duration
	// RateLimitJitter is the most random extra added to a rate-limit wait;
	// negative adds none. Default: 30 s.
	RateLimitJitter time.Duration

	// SlowWorkerExtensions is how many times a worker whose progress
	// deadline passed, but which shows evidence of work since its last
	// progress (output, files changing in its worktree, CPU time of its
	// agent's processes), gets SlowWorkerExtension more time instead of
	// being killed as stuck; negative: none, every stall kills. Default: 1.
	SlowWorkerExtensions int
	// SlowWorkerExtension is the time one extension gives. Default:
	// ProgressTimeout.
	SlowWorkerExtension time.Duration
	// SlowWorkerMinCPU is the CPU time that counts as evidence on its own
	// (an idle agent process uses a little). Default: 1 s.
	SlowWorkerMinCPU time.Duration
	// Evidence gathers a slow worker's evidence of work. Default: the
	// default Runtime, or a Transport that implements WorkEvidence; with
	// neither, stalls kill as without extensions.
	Evidence WorkEvidence

	// ItemBudget bounds tokens and cost per item; zero fields are
	// unlimited. See the package doc for the overshoot. Default: none
	// (unlimited).
	ItemBudget Budget
	// TotalBudget bounds tokens and cost for the whole dispatcher; zero
	// fields are unlimited. Default: none (unlimited).
	TotalBudget Budget

	// ShutdownTimeout is how long Shutdown waits for running assignments to
	// finish before killing them. Default: 30 s.
	ShutdownTimeout time.Duration
	// KillTimeout is how long Shutdown then waits for workers to stop.
	// Default: 15 s (three times agentcmd's kill grace).
	KillTimeout time.Duration

	// RememberFinished is how many finished assignments are remembered to
	// tell a duplicate completion from a stale message. Default: 10000.
	RememberFinished int
	// AssignmentPrefix starts every AssignmentID. Default: "a-" plus six
	// random hex digits and "-", so that ids differ across restarts.
	AssignmentPrefix string
	// WorkerPrefix starts generated worker ids. Default: "w".
	WorkerPrefix string

	// Transport carries commands to workers; with neither Transport nor
	// Agent, New fails (ErrNoTransport). Default: an in-process Runtime
	// running Agent.
	Transport Transport
	// Agent runs one assignment in the default Runtime (for example an
	// agentcmd.Driver). Default: none (Transport does the work; with
	// neither, New fails with ErrNoTransport).
	Agent phases.AgentDriver
	// Commits reads the worktree's HEAD for the default Runtime's
	// heartbeats. Default: what git rev-parse HEAD prints, read from git's
	// files when they are plain.
	Commits CommitReader
	// AgentTimeout bounds one execution in the default Runtime. Default:
	// none.
	AgentTimeout time.Duration
	// Gate is the default Runtime's quality gate, run after each successful
	// agent execution and reported as MsgQGResult (see Gate). With a custom
	// Transport the transport reports gate runs. Default: none (a zero Gate
	// runs none).
	Gate Gate

	// ItemChecker, when set, is asked whether an item is still open after
	// its worker's crash was confirmed and before the item is requeued: an
	// item closed meanwhile (for example on the host's board) is dropped,
	// not reassigned. It is called without the Dispatcher's lock, by the
	// goroutine carrying out effects, so it should be quick. Default: none
	// (nil: the Dispatcher's own record decides; an item it holds is
	// open).
	ItemChecker health.ItemChecker

	// Escalator receives escalations. Default: none (nil: they reach only
	// OnEvent).
	Escalator Escalator
	// OnEvent receives every lifecycle change (see SlogEvents). Default:
	// none (nil: not called).
	OnEvent EventHook
	// Clock drives every deadline. Default: the wall clock.
	Clock foreman.Clock
	// Logger receives the Dispatcher's logs. Default: none (nil discards
	// them).
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
