package pgtransport

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/worker"
)

// HostConfig configures a Host, the workers' side of the transport: a
// process (on any machine) that claims assignments from a queue and runs
// them. Zero values mean the documented defaults.
type HostConfig struct {
	// Pool reaches the database. The host uses one connection for its
	// work and one of its own for LISTEN. Required.
	Pool *pgxpool.Pool
	// Schema is the PostgreSQL schema of the coordinators' store; a plain
	// identifier (pgstore.ValidateSchema). Default: "foreman", pgstore's
	// default.
	Schema string
	// Queue names the queue to claim from. Default: "default".
	Queue string
	// Name identifies this host in the database (who claimed what).
	// Default: host name, process id and a random suffix
	// ("host/pid/8 hex digits").
	Name string
	// Capacity is how many assignments run here at once (the
	// Dispatcher's worker.Config.MaxWorkers bounds how many are out across
	// all hosts: give it at least their total). A host's round carries up
	// to Capacity runs' messages and claims in one statement and commit,
	// so one host of 64 costs less CPU per hand-off than four of 16
	// (about 45 against 70 µs of client and PostgreSQL with no-op runs on
	// a quiet machine, docs/performance.md): on one machine, one host with
	// the machine's capacity is the cheaper choice. Default: 1.
	Capacity int
	// Runtime runs each assignment, as worker.NewRuntime does in a single
	// process: Runtime.Agent is required; its heartbeats, probe answers,
	// gate results and outcome are written back to the coordinator. Its
	// Clock and Logger, when nil, are the host's Clock and Logger; its
	// NoEvidence is set (the transport carries no evidence of work).
	// Required.
	Runtime worker.RuntimeConfig
	// PollInterval is how often the host looks for work, commands, and
	// writes heartbeats without being notified, and how long it waits
	// before it retries a lost LISTEN connection. Heartbeats of all its
	// runs are written together, at most this late. Default: 1 s.
	PollInterval time.Duration
	// NoListen turns LISTEN/NOTIFY off: the host then only polls.
	// Default: false (notifications wake it, polling is the fallback; a
	// host whose runs' messages start its rounds within four Cooldowns,
	// at least 20 ms, of each other stops listening until it goes that
	// long without a round: it takes new work and commands in those
	// rounds).
	NoListen bool
	// Linger is how long a host waits, once one of its runs has sent a
	// message, for others to send theirs before it writes them all in one
	// round trip. Raise it when many short runs share a host and the
	// database is the bottleneck. Default: 0 (at once).
	Linger time.Duration
	// Cooldown is the least time between the starts of two of the host's
	// rounds while one of its runs may still send something. A message
	// (or new work, or a command) that comes within Cooldown of the last
	// round waits for the rest of it, or until none of the host's runs
	// has anything left to send, and goes in one round trip, one commit,
	// with everything else that came meanwhile; one that comes later, or
	// to a host with nothing running, goes at once. So a busy host's round
	// carries many runs' messages and claims, and an idle host answers
	// without delay. River's FetchCooldown is the same idea (river's own
	// benchmark sets it to 2 ms; its default is 100 ms);
	// docs/performance.md measures 2 and 5 ms and none.
	// Default: 5 ms; a negative value turns it off.
	Cooldown time.Duration
	// Prepare runs before an assignment starts and may change it (a host
	// on another machine makes the worktree it names, for example by
	// fetching a shared remote). An error ends the assignment FAILED with
	// the error as the reason. Default: none (nil: the assignment runs as
	// sent).
	Prepare func(ctx context.Context, a *worker.Assignment) error
	// Report sees every final message (DONE, FAILED, ...) before it is
	// written and may change it (a host on another machine pushes the
	// item's branch before it reports DONE, and reports FAILED if it
	// cannot). Default: none (nil: the message is written as sent).
	Report func(ctx context.Context, a worker.Assignment, m *worker.Message)
	// Clock paces the polls, heartbeats and Linger. Default: the wall
	// clock.
	Clock foreman.Clock
	// Logger receives the host's logs. Default: none (nil discards them).
	Logger *slog.Logger
}

func (c *HostConfig) resolve() error {
	switch {
	case c.Pool == nil:
		return fmt.Errorf("%w: HostConfig.Pool is nil", ErrInvalidConfig)
	case c.Runtime.Agent == nil:
		return fmt.Errorf("%w: HostConfig.Runtime.Agent is nil", ErrInvalidConfig)
	case c.Capacity < 0:
		return fmt.Errorf("%w: HostConfig.Capacity is negative (%d)", ErrInvalidConfig, c.Capacity)
	case c.PollInterval < 0:
		return fmt.Errorf("%w: HostConfig.PollInterval is negative (%s)", ErrInvalidConfig, c.PollInterval)
	case c.Linger < 0:
		return fmt.Errorf("%w: HostConfig.Linger is negative (%s)", ErrInvalidConfig, c.Linger)
	}
	if c.Schema != "" {
		if err := pgstore.ValidateSchema(c.Schema); err != nil {
			return fmt.Errorf("%w: HostConfig.Schema: %w", ErrInvalidConfig, err)
		}
	}
	if c.Queue == "" {
		c.Queue = defaultQueue
	}
	if c.Name == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.Name = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if c.Capacity == 0 {
		c.Capacity = 1
	}
	if c.PollInterval == 0 {
		c.PollInterval = defaultPollInterval
	}
	switch {
	case c.Cooldown == 0:
		c.Cooldown = DefaultHostCooldown
	case c.Cooldown < 0:
		c.Cooldown = 0
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Runtime.Clock == nil {
		c.Runtime.Clock = c.Clock
	}
	if c.Runtime.Logger == nil {
		c.Runtime.Logger = c.Logger
	}
	return nil
}

// DefaultHostCooldown is HostConfig.Cooldown's default: a busy host
// starts a round at most every 5 ms.
const DefaultHostCooldown = 5 * time.Millisecond

// Host claims assignments from its queue (FOR UPDATE SKIP LOCKED, so hosts
// never wait for each other or take the same one), runs them in a
// worker.Runtime, and writes back their messages and heartbeats, obeying
// the coordinator's PROBE, KILL, RESET and SHUTDOWN. One round trip per
// round carries everything: the messages written since the last round (in
// order), the heartbeats of every run (one statement however many), the
// commands waiting, and new claims up to Capacity. Every write is joined
// to the assignment row this host claimed, so nothing of an assignment the
// coordinator withdrew, or that another host holds, is ever written.
type Host struct {
	cfg     HostConfig
	sql     statements
	clock   clock.Clock
	log     *slog.Logger
	runtime *worker.Runtime
	listen  *listener
	schema  string

	mu       sync.Mutex
	runs     map[foreman.AssignmentID]*hostRun
	live     int
	out      []outMessage
	spareOut []outMessage // a round's out, emptied, for the next one's
	beats    map[foreman.AssignmentID]beat
	stopping bool
	stats    HostStats
	kick     chan struct{}
	scratch  roundScratch // round's alone
}

type hostRun struct {
	a      worker.Assignment // as the coordinator sent it
	live   bool              // its Runtime execution has not ended
	killed bool              // stopped by a command: no final message follows
	done   bool              // its final message is queued
}

// over says whether nothing more is expected of the run.
func (r *hostRun) over() bool { return !r.live && (r.killed || r.done) }

type outMessage struct {
	assignment foreman.AssignmentID
	body       string
	final      bool
}

type beat struct {
	commit string
	output time.Time
}

// HostStats counts what a host did.
type HostStats struct {
	Claimed  int64 // assignments claimed
	Messages int64 // messages written
	Dropped  int64 // messages not written: their assignment was no longer this host's
	Beats    int64 // heartbeats written
	// BeatWrites counts the statements that wrote them (one per round
	// that had any).
	BeatWrites int64
	Rounds     int64 // round trips
	Commands   int64 // commands received
	// Notifies counts the notifications the host's rounds sent its
	// coordinators: a round that finishes only assignments whose
	// coordinator promised to poll for them sends none.
	Notifies int64
	// Unlistens counts the times the host stopped listening while busy
	// (its rounds came close together): it listens again once it has
	// gone without a round for a while.
	Unlistens int64
}

// NewHost creates or migrates the tables (the store's schema too) and
// returns a host; Run starts it.
func NewHost(ctx context.Context, cfg HostConfig) (*Host, error) {
	if err := cfg.resolve(); err != nil {
		return nil, err
	}
	st, err := pgstore.OpenPool(ctx, cfg.Pool, pgstore.Options{Schema: cfg.Schema})
	if err != nil {
		return nil, err
	}
	defer func() { _ = st.Close() }()
	if err := migrate(ctx, cfg.Pool, st); err != nil {
		return nil, err
	}
	h := &Host{
		cfg: cfg, sql: newStatements(st.Schema()), clock: clock.OrReal(cfg.Clock), log: cfg.Logger, schema: st.Schema(),
		runs: map[foreman.AssignmentID]*hostRun{}, beats: map[foreman.AssignmentID]beat{}, kick: make(chan struct{}, 1),
	}
	rc := cfg.Runtime
	// The transport carries no evidence of work to the Dispatcher (the
	// Coordinator is no worker.WorkEvidence), so the Runtime need not walk
	// each run's worktree to keep it.
	rc.NoEvidence = true
	user := rc.OnEvent
	rc.OnEvent = func(ev worker.Event) {
		if ev.Kind == worker.EventAgentExited {
			h.exited(ev.Assignment)
		}
		if user != nil {
			user(ev)
		}
	}
	h.runtime = worker.NewRuntime(rc, (*hostInbox)(h))
	if !cfg.NoListen {
		h.listen = newListener(cfg.Pool, []string{channel("q", h.schema, cfg.Queue), channel("h", h.schema, cfg.Name)},
			h.clock, cfg.PollInterval, h.log)
	}
	return h, nil
}

// Name is the host's identity in the database.
func (h *Host) Name() string { return h.cfg.Name }

// Stats returns the counters.
func (h *Host) Stats() HostStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stats
}

// Running reports how many assignments run here now.
func (h *Host) Running() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.live
}

func (h *Host) wake() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

func (h *Host) exited(id foreman.AssignmentID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.runs[id]
	if r == nil || !r.live {
		return
	}
	r.live = false
	h.live--
	if r.over() {
		delete(h.runs, id)
	}
	h.wake()
}

// hostInbox receives the Runtime's messages: the Runtime knows each run by
// its assignment id as worker id, and the coordinator's worker id is put
// back before the message is written.
type hostInbox Host

func (hi *hostInbox) Deliver(ctx context.Context, m worker.Message) (worker.Disposition, error) {
	h := (*Host)(hi)
	h.mu.Lock()
	r := h.runs[m.Assignment]
	if r == nil || r.killed {
		h.mu.Unlock()
		return worker.Stale, nil
	}
	m.Worker = r.a.Worker
	if m.Kind == worker.MsgHeartbeat {
		h.beats[m.Assignment] = beat{commit: m.Commit, output: m.LastOutput}
		h.mu.Unlock()
		return worker.Applied, nil
	}
	fin := final(m.Kind)
	a := r.a
	h.mu.Unlock()
	if fin && h.cfg.Report != nil {
		m = h.report(ctx, a, m)
	}
	h.queue(m, fin)
	return worker.Applied, nil
}

// report calls HostConfig.Report on a copy of m and returns it: the
// copy escapes to the heap, so Deliver's m, when no Report is set, does
// not (never inlined: inlined, its copy would be Deliver's).
//
//go:noinline
func (h *Host) report(ctx context.Context, a worker.Assignment, m worker.Message) worker.Message {
	h.cfg.Report(ctx, a, &m)
	return m
}

func (h *Host) queue(m worker.Message, fin bool) {
	var buf [160]byte // most messages' JSON fits: one allocation, the string
	body := string(appendMessage(buf[:0], m))
	h.mu.Lock()
	h.out = append(h.out, outMessage{assignment: m.Assignment, body: body, final: fin})
	if r := h.runs[m.Assignment]; fin && r != nil {
		delete(h.beats, m.Assignment)
		r.done = true
		if r.over() {
			delete(h.runs, m.Assignment)
		}
	}
	h.mu.Unlock()
	h.wake()
}
