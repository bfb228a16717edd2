package pgtransport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/worker"
)

// Config configures a Coordinator, the Dispatcher's side of the transport.
// Zero values mean the documented defaults.
type Config struct {
	// Pool reaches the database. The coordinator uses up to three of its
	// connections at once (writes, reads, and LISTEN on a connection of
	// its own). Required.
	Pool *pgxpool.Pool
	// Store is the pgstore.Store whose schema holds the transport's tables
	// and whose leases fence its writes. Required.
	Store *pgstore.Store
	// Leader is this coordinator's leadership: every write is conditional
	// on its term, and once it knows it lost the lease Send refuses at
	// once. When set, its Lease and Term replace Lease and Term below.
	// Default: none (nil: Lease and Term fence the writes and are then
	// required).
	Leader *pgstore.Leader
	// Lease names the lease whose term fences every write, for hosts with
	// their own election. Ignored when Leader is set. Default: none
	// (required without a Leader).
	Lease string
	// Term is the lease term the writes are conditional on, at least 1.
	// Ignored when Leader is set. Default: none (required without a
	// Leader).
	Term int64
	// Queue names the work queue that hosts claim from. One coordinator
	// leads a queue at a time. Default: "default".
	Queue string
	// PollInterval is how often the coordinator looks for messages and
	// heartbeats without being notified, and how long it waits before it
	// retries a failed write or a lost LISTEN connection. Default: 1 s.
	PollInterval time.Duration
	// NoListen turns LISTEN/NOTIFY off: the coordinator then only polls.
	// Default: false (notifications wake it, polling is the fallback).
	NoListen bool
	// ReadCooldown is the least time between the starts of two reads of
	// the hosts' messages: what hosts write within ReadCooldown of the
	// last read waits for the rest of it and is read, in one round trip,
	// with what other hosts wrote meanwhile; what comes later is read at
	// once. Busy hosts so cost the coordinator one read per ReadCooldown,
	// not one per host round (docs/performance.md measures 0, 5 and
	// 10 ms). Default: 5 ms; a negative value turns it off.
	ReadCooldown time.Duration
	// MaxBatch caps the commands one write carries. Default: 512.
	MaxBatch int
	// Clock paces the polls and retries. Default: the wall clock.
	Clock foreman.Clock
	// Logger receives the coordinator's logs. Default: none (nil discards
	// them).
	Logger *slog.Logger
}

// DefaultReadCooldown is Config.ReadCooldown's default: a coordinator
// reads its hosts' messages at most every 5 ms.
const DefaultReadCooldown = 5 * time.Millisecond

const (
	defaultQueue        = "default"
	defaultPollInterval = time.Second
	defaultMaxBatch     = 512
	messagePage         = 1000
	// beatMargin is how far back each heartbeat poll looks before the
	// previous one: a heartbeat written by a transaction that started
	// before that poll but committed after it is still found.
	beatMargin = 5 * time.Second
)

func (c *Config) resolve() error {
	switch {
	case c.Pool == nil:
		return fmt.Errorf("%w: Config.Pool is nil", ErrInvalidConfig)
	case c.Store == nil:
		return fmt.Errorf("%w: Config.Store is nil", ErrInvalidConfig)
	case c.PollInterval < 0:
		return fmt.Errorf("%w: Config.PollInterval is negative (%s)", ErrInvalidConfig, c.PollInterval)
	case c.MaxBatch < 0:
		return fmt.Errorf("%w: Config.MaxBatch is negative (%d)", ErrInvalidConfig, c.MaxBatch)
	}
	if c.Leader != nil {
		c.Lease, c.Term = c.Leader.Lease(), c.Leader.Term()
	}
	if c.Lease == "" || c.Term < 1 {
		return fmt.Errorf("%w: a Leader, or a Lease and a Term of at least 1, fence the coordinator's writes", ErrInvalidConfig)
	}
	if c.Queue == "" {
		c.Queue = defaultQueue
	}
	if c.PollInterval == 0 {
		c.PollInterval = defaultPollInterval
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = defaultMaxBatch
	}
	switch {
	case c.ReadCooldown == 0:
		c.ReadCooldown = DefaultReadCooldown
	case c.ReadCooldown < 0:
		c.ReadCooldown = 0
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Coordinator is a worker.Transport over PostgreSQL: Send writes
// assignments and commands to the database, where worker hosts (Host, in
// any process on any machine) claim and obey them, and the messages the
// hosts write back are delivered to the Inbox given to Start. It also
// implements worker.Closer. Send does not wait for the database: commands
// are written in order, many per transaction, by one writer; Flush waits
// for them. Once the lease term is no longer current every write fails
// with pgstore.ErrFenced and Send returns that error.
type Coordinator struct {
	cfg   Config
	sql   statements
	clock clock.Clock
	log   *slog.Logger

	mu       sync.Mutex
	queued   []worker.Command
	enqueued uint64 // commands ever queued
	written  uint64 // commands ever written (or dropped once fenced)
	err      error  // fenced: permanent
	closed   bool
	progress chan struct{} // closed and replaced whenever written grows
	again    bool          // the last write failed (writer goroutine only)

	writeKick chan struct{}
	inbox     worker.Inbox
	startOnce sync.Once
	listen    *listener
	readBuf   []wireMessage // readOnce's messages, kept for the next read (readLoop's alone)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	stats CoordinatorStats

	// finIDs are the finished assignments that notifications named and
	// no read has read yet; finAll asks the next read for every finished
	// row of the queue.
	finMu  sync.Mutex
	finIDs []string
	finAll bool
	// fastUntil is when the coordinator's last promise to poll
	// (pollPromise) ends by its own clock, margin included: until then it
	// reads every ReadCooldown (and what rounds within the promise
	// finished, from wt_done: doneLog).
	fastUntil time.Time
	owed      bool          // a read is owed to a promise
	pollKick  chan struct{} // a promise began

	// unacked are the finished rows delivered and not known to be
	// deleted before the last read began (under mu): reads skip them.
	// ackEpoch counts the deletions done.
	unacked  map[string]ackState
	ackEpoch uint64
	// dones are the wt_done rows read and not known to be deleted (under
	// mu): true while a deletion is under way.
	dones map[int64]bool

	// seen is the heartbeat count last delivered per assignment (reader
	// goroutine only).
	seen map[foreman.AssignmentID]int64
}

var (
	_ worker.Transport = (*Coordinator)(nil)
	_ worker.Closer    = (*Coordinator)(nil)
)

// NewCoordinator creates or migrates the transport's tables and withdraws
// every assignment that earlier terms of the lease left in the queue
// (their runs are killed): a new leader starts from its own state. It
// fails with pgstore.ErrFenced if the term is already superseded. Call
// Start with the Dispatcher before it sends anything that needs answers.
func NewCoordinator(ctx context.Context, cfg Config) (*Coordinator, error) {
	if err := cfg.resolve(); err != nil {
		return nil, err
	}
	if err := migrate(ctx, cfg.Pool, cfg.Store); err != nil {
		return nil, err
	}
	c := &Coordinator{
		cfg: cfg, sql: newStatements(cfg.Store.Schema()), clock: clock.OrReal(cfg.Clock), log: cfg.Logger,
		progress: make(chan struct{}), writeKick: make(chan struct{}, 1),
		seen: map[foreman.AssignmentID]int64{}, unacked: map[string]ackState{},
		dones: map[int64]bool{}, pollKick: make(chan struct{}, 1),
	}
	b := &pgx.Batch{}
	b.Queue(c.sql.fence, cfg.Lease, cfg.Term)
	b.Queue(c.sql.supersede, cfg.Queue, cfg.Lease, cfg.Term, int16(worker.CommandKill),
		fmt.Sprintf("superseded: lease %s is at term %d", cfg.Lease, cfg.Term))
	if err := c.sendWrite(ctx, b); err != nil {
		return nil, err
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.wg.Add(1)
	go c.writeLoop()
	return c, nil
}

// CoordinatorStats counts a coordinator's round trips and what they carried.
type CoordinatorStats struct {
	Writes    int64 // write transactions
	Commands  int64 // commands written
	Reads     int64 // read round trips
	Delivered int64 // messages and heartbeats delivered
}

// Stats returns the counters.
func (c *Coordinator) Stats() CoordinatorStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Start delivers the hosts' messages to inbox (the Dispatcher) until
// Close. Only the first call counts.
func (c *Coordinator) Start(inbox worker.Inbox) {
	c.startOnce.Do(func() {
		c.inbox = inbox
		if !c.cfg.NoListen {
			c.listen = newListener(c.cfg.Pool, []string{channel("m", c.cfg.Store.Schema(), c.cfg.Queue)}, c.clock, c.cfg.PollInterval, c.log)
			c.listen.onNotify = c.noticeFinished
			c.wg.Add(1)
			go func() { defer c.wg.Done(); c.listen.run(c.ctx) }()
		}
		c.wg.Add(1)
		go c.readLoop()
	})
}

// Err is nil until the coordinator is fenced; then it is the
// *pgstore.FencedError that stopped it.
func (c *Coordinator) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Send queues c for the writer and returns at once; see Coordinator.
func (c *Coordinator) Send(ctx context.Context, cmd worker.Command) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validCommand(cmd); err != nil {
		return err
	}
	if c.cfg.Leader != nil {
		if err := c.cfg.Leader.Err(); err != nil {
			return fmt.Errorf("%w (term %d of lease %q): %w", pgstore.ErrFenced, c.cfg.Term, c.cfg.Lease, err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.err != nil:
		return c.err
	case c.closed:
		return ErrClosed
	}
	c.queued = append(c.queued, cmd)
	c.enqueued++
	select {
	case c.writeKick <- struct{}{}:
	default:
	}
	return nil
}

func validCommand(cmd worker.Command) error {
	if err := cmd.Worker.Validate(); err != nil {
		return fmt.Errorf("%w: %w", worker.ErrInvalidMessage, err)
	}
	switch cmd.Kind {
	case worker.CommandAssign:
		if cmd.Assign == nil {
			return fmt.Errorf("%w: ASSIGN without an assignment", worker.ErrInvalidMessage)
		}
		return cmd.Assign.ID.Validate()
	case worker.CommandKill, worker.CommandReset, worker.CommandShutdown:
		return nil
	case worker.CommandProbe:
		return cmd.Assignment.Validate()
	}
	return fmt.Errorf("%w: command %d", worker.ErrInvalidMessage, cmd.Kind)
}

// Flush waits until every command sent before it has been written (or the
// coordinator was fenced, which it returns).
func (c *Coordinator) Flush(ctx context.Context) error {
	c.mu.Lock()
	target := c.enqueued
	for c.written < target && c.err == nil {
		ch := c.progress
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		c.mu.Lock()
	}
	err := c.err
	c.mu.Unlock()
	return err
}

// Close writes what is queued (until ctx ends), then stops delivering.
// Safe to call twice.
func (c *Coordinator) Close(ctx context.Context) error {
	c.mu.Lock()
	already := c.closed
	c.closed = true
	c.mu.Unlock()
	if already {
		return nil
	}
	err := c.Flush(ctx)
	if errors.Is(err, pgstore.ErrFenced) {
		err = nil // nothing of a fenced coordinator's can be written; not a stop failure
	}
	c.cancel()
	c.wg.Wait()
	if acks, dones := c.takeAcks(true), c.takeDone(); len(acks)+len(dones) > 0 {
		// What was delivered and not deleted yet; left behind, it would
		// reach the next term's coordinator again. Fenced: a coordinator
		// whose term ended leaves them to its successor.
		b := &pgx.Batch{}
		b.Queue(c.sql.fence, c.cfg.Lease, c.cfg.Term)
		b.Queue(c.sql.ackFinished, textArray(acks), c.cfg.Queue, int8Array(dones))
		if aerr := c.cfg.Pool.SendBatch(ctx, b).Close(); aerr == nil {
			c.ackedFinished(acks, nil)
			c.ackedDone(dones, nil)
		}
	}
	return err
}

func (c *Coordinator) writeLoop() {
	defer c.wg.Done()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.writeKick:
		}
		for c.writeOnce() {
		}
	}
}

// writeOnce writes up to MaxBatch queued commands in one transaction; it
// reports whether to go on at once.
func (c *Coordinator) writeOnce() bool {
	c.mu.Lock()
	n := min(len(c.queued), c.cfg.MaxBatch)
	cmds := c.queued[:n:n]
	c.mu.Unlock()
	if n == 0 {
		return false
	}
	acks, dones := c.takeAcks(false), c.takeDone()
	promise := c.watch(cmds)
	err := c.sendWrite(c.ctx, c.writeBatch(cmds, acks, dones, promise, c.again))
	c.again = err != nil
	if promise {
		c.promised()
	}
	if err == nil {
		c.ackedFinished(acks, nil)
		c.ackedDone(dones, nil)
	} else {
		c.ackedFinished(nil, acks)
		c.ackedDone(nil, dones)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		// The commands written are let go (what they point to is not kept
		// alive), and once every one is written the queue starts again at
		// the front of its array instead of growing a new one.
		clear(c.queued[:n])
		if len(c.queued) == n {
			c.queued = c.queued[:0]
		} else {
			c.queued = c.queued[n:]
		}
		c.written += uint64(n)
		c.stats.Writes++
		c.stats.Commands += int64(n)
	case errors.Is(err, pgstore.ErrFenced):
		c.err = err
		c.written += uint64(len(c.queued))
		c.queued = nil
		c.log.Error("pgtransport: coordinator fenced: nothing more is written", "lease", c.cfg.Lease, "term", c.cfg.Term, "err", err)
	default:
		if c.ctx.Err() != nil {
			return false
		}
		// Unknown outcome or a database hiccup: write the same commands
		// again after a pause; inserts skip rows that landed, and repeated
		// stops and probes are harmless.
		c.log.Warn("pgtransport: write failed, will retry", "commands", n, "err", err)
		c.mu.Unlock()
		_ = clock.Sleep(c.ctx, c.clock, c.cfg.PollInterval)
		c.mu.Lock()
		return c.ctx.Err() == nil
	}
	close(c.progress)
	c.progress = make(chan struct{})
	return len(c.queued) > 0
}

// sendWrite runs a fenced batch as one transaction (a pipeline with one
// Sync is an implicit transaction: a failed statement undoes the rest).
func (c *Coordinator) sendWrite(ctx context.Context, b *pgx.Batch) error {
	err := c.cfg.Pool.SendBatch(ctx, b).Close()
	if fe := fencedError(err, c.cfg.Lease, c.cfg.Term); fe != nil {
		return fe
	}
	if err != nil {
		return fmt.Errorf("pgtransport: write: %w", err)
	}
	return nil
}
