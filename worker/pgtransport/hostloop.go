package pgtransport

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/worker"
)

// stopTimeout bounds how long a stopping host waits for its runs to end
// and for its last write.
const stopTimeout = 30 * time.Second

// Run claims and runs assignments until ctx ends. Then it stops claiming,
// kills its runs (process groups terminated), reports each assignment it
// had not finished as FAILED ("worker host stopped") so that the
// coordinator requeues it at once, and returns.
func (h *Host) Run(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	lctx, cancelListen := context.WithCancel(context.Background())
	defer cancelListen()
	var newWork, commands <-chan struct{}
	if h.listen != nil {
		newWork, commands = h.listen.wake[0], h.listen.wake[1]
		go h.listen.run(lctx)
	}
	ticker := h.clock.NewTicker(h.cfg.PollInterval)
	defer ticker.Stop()
	quiet := h.quiet()
	var prev time.Time // when the last round started
	var quietT clock.Timer
	polled := false // the last round was a busy host's look for new work
	driven := false // the runs' messages (or such a look) started this round
	defer func() {
		if quietT != nil {
			quietT.Stop()
		}
	}()
	for {
		last := h.clock.Now()
		select { // this round takes what the wake-up was for
		case <-h.kick:
		default:
		}
		if err := h.round(ctx); err != nil && ctx.Err() == nil {
			h.log.Warn("pgtransport: host round failed, will retry", "host", h.cfg.Name, "err", err)
		}
		// A busy host (its runs' messages start its rounds, within quiet
		// of each other, and its runs have more to send) rounds again soon whatever is
		// notified, and takes new work and commands then: it stops
		// listening until it goes quiet, so that PostgreSQL does not
		// signal its LISTEN connection at each of the database's
		// notifying commits (every host's round, every coordinator's
		// write). A busy host whose runs have all reported and that
		// found no new work looks once more after Cooldown (new work
		// comes at about that pace while it is busy) before it listens
		// again: listening again costs a round of its own, since
		// notifications were missed meanwhile.
		var quietC <-chan time.Time
		if quiet > 0 && h.listen != nil {
			rapid := driven && !prev.IsZero() && last.Sub(prev) < quiet
			wait := time.Duration(0)
			switch {
			case rapid && !h.settled():
				wait = quiet
			case rapid && h.listen.isPaused() && !polled:
				wait, polled = max(h.cfg.Cooldown, time.Millisecond), true
			}
			h.pause(wait > 0)
			if wait > 0 {
				if quietT == nil {
					quietT = h.clock.NewTimer(wait)
				} else {
					quietT.Reset(wait)
				}
				quietC = quietT.C()
			}
			if !h.settled() {
				polled = false
			}
		}
		prev, driven = last, false
	wait:
		select {
		case <-ctx.Done():
			return h.stop()
		case <-h.kick:
			driven = true
			if h.cfg.Linger > 0 && clock.Sleep(ctx, h.clock, h.cfg.Linger) != nil {
				return h.stop()
			}
		case <-commands:
		case <-ticker.C():
		case <-newWork:
			// Every host of the queue hears of new work; a full one has
			// nothing to claim it with, and its own writes kick it.
			if h.Running() >= h.cfg.Capacity {
				goto wait
			}
		case <-quietC:
			if polled {
				driven = true
				break // look for new work
			}
			// No round for quiet: listen again (the listener then wakes
			// this loop, since notifications were missed meanwhile).
			quietC = nil
			h.pause(false)
			goto wait
		}
		if quietC != nil {
			quietT.Stop()
		}
		if h.coolDown(ctx, last) != nil {
			return h.stop()
		}
	}
}

// minQuiet is the least time without a round after which a busy host
// listens again.
const minQuiet = 20 * time.Millisecond

// quiet is how long a busy host goes without a round before it listens
// again: four cooldowns, at least minQuiet; 0 (always listen) when the
// poll interval is no longer.
func (h *Host) quiet() time.Duration {
	q := max(4*h.cfg.Cooldown, minQuiet)
	if q >= h.cfg.PollInterval {
		return 0
	}
	return q
}

// pause stops or resumes listening and counts the pauses.
func (h *Host) pause(p bool) {
	if p && !h.listen.isPaused() {
		h.mu.Lock()
		h.stats.Unlistens++
		h.mu.Unlock()
	}
	h.listen.setPaused(p)
}

// coolDown waits until Cooldown has passed since the round that started at
// last, so that what comes meanwhile goes in one round with the rest, but
// no longer than until none of the host's runs has anything left to send
// (every run claimed has sent its final message, or none is running):
// then nothing more could join the round, and it goes at once.
func (h *Host) coolDown(ctx context.Context, last time.Time) error {
	rest := h.cfg.Cooldown - h.clock.Since(last)
	if rest <= 0 {
		return nil
	}
	t := h.clock.NewTimer(rest)
	defer t.Stop()
	for !h.settled() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C():
			return nil
		case <-h.kick:
		}
	}
	return nil
}

// settled says whether no run of the host has anything left to send.
func (h *Host) settled() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.runs) == 0
}

func (h *Host) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	h.mu.Lock()
	h.stopping = true
	var unfinished []worker.Assignment
	for _, r := range h.runs {
		if r.live && !r.killed {
			r.killed = true // the Runtime reports nothing of a run it stops
			unfinished = append(unfinished, r.a)
		}
	}
	h.mu.Unlock()
	closeErr := h.runtime.Close(ctx)
	for _, a := range unfinished {
		body := string(encodeMessage(worker.Message{Kind: worker.MsgFailed, Worker: a.Worker, Assignment: a.ID,
			Reason: "worker host " + h.cfg.Name + " stopped"}))
		h.mu.Lock()
		h.out = append(h.out, outMessage{assignment: a.ID, body: body, final: true})
		h.mu.Unlock()
	}
	if err := h.round(ctx); err != nil {
		return fmt.Errorf("pgtransport: host %s: last write: %w", h.cfg.Name, err)
	}
	return closeErr
}

// round is one round trip: write messages and heartbeats, take commands,
// claim work; then act on what came back.
func (h *Host) round(ctx context.Context) error {
	h.mu.Lock()
	out := h.out
	h.out, h.spareOut = h.spareOut, nil
	beats := h.beats
	h.beats = map[foreman.AssignmentID]beat{}
	free := h.cfg.Capacity - h.live
	if h.stopping {
		free = 0
	}
	h.mu.Unlock()

	// A run's first final message is its outcome: a later one (a stopping
	// host's FAILED after a DONE of the same round) is not sent, and
	// counts as dropped, as the database would drop it.
	sc := &h.scratch
	defer sc.reset()
	ids, bodies, finals := sc.ids, sc.bodies, sc.finals
	for _, m := range out {
		if m.final {
			if sc.ended[m.assignment] {
				continue
			}
			if sc.ended == nil {
				sc.ended = map[foreman.AssignmentID]bool{}
			}
			sc.ended[m.assignment] = true
		}
		ids, bodies, finals = append(ids, string(m.assignment)), append(bodies, m.body), append(finals, m.final)
	}
	sc.ids, sc.bodies, sc.finals = ids, bodies, finals
	if ids == nil { // '{}', not NULL, as before the scratch was kept
		ids, bodies, finals = []string{}, []string{}, []bool{}
	}
	beatIDs, commits, outs := make([]string, 0, len(beats)), make([]string, 0, len(beats)), make([]int64, 0, len(beats))
	for id, bt := range beats {
		var us int64
		if !bt.output.IsZero() {
			us = bt.output.UnixMicro()
		}
		beatIDs, commits, outs = append(beatIDs, string(id)), append(commits, bt.commit), append(outs, us)
	}
	type command struct {
		assignment foreman.AssignmentID
		kind       worker.CommandKind
		reason     string
	}
	var (
		cmds     []command
		claims   = sc.claims
		written  int64
		notified int64
		kept     = map[string]bool{}
	)
	// One call does the round (wt_host_round): the messages in order, the
	// heartbeats, the commands waiting, new claims up to free. The rows
	// are scanned into values that allocate nothing (the driver's bytes,
	// valid until the next row): a claim's assignment is decoded from
	// one string, whose substrings its strings are.
	rows, err := h.cfg.Pool.Query(ctx, h.sql.hostRound, h.cfg.Name, h.cfg.Queue, textArray(ids), textArray(bodies), finals,
		textArray(beatIDs), textArray(commits), int8Array(outs), free)
	if err == nil {
		// Declared once: as Scan's arguments they live on the heap. Scan
		// sets every one of them at each row (NULL too).
		var what, id, text pgtype.DriverBytes
		var seq pgtype.Int8
		var kind pgtype.Int2
		for rows.Next() {
			if err = rows.Scan(&what, &seq, &id, &kind, &text); err != nil {
				break
			}
			switch string(what) {
			case "w":
				written = seq.Int64
				if kind.Valid {
					notified = int64(kind.Int16)
				}
			case "b":
				kept[string(id)] = true
			case "c":
				cmds = append(cmds, command{assignment: foreman.AssignmentID(id), kind: worker.CommandKind(kind.Int16), reason: string(text)})
			case "a":
				a, err := decodeAssignmentText(string(text))
				claims = append(claims, roundClaim{seq: seq.Int64, a: a, err: err})
			}
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	sc.claims = claims
	if err != nil {
		// Nothing of the round happened (one statement): keep what was
		// to be written, ahead of what came since.
		h.mu.Lock()
		h.out = append(out, h.out...)
		for id, bt := range beats {
			if _, ok := h.beats[id]; !ok {
				h.beats[id] = bt
			}
		}
		h.mu.Unlock()
		return err
	}
	h.mu.Lock()
	h.stats.Rounds++
	h.stats.Messages += written
	h.stats.Notifies += notified
	h.stats.Dropped += int64(len(out)) - written
	h.stats.Beats += int64(len(kept))
	if len(beats) > 0 {
		h.stats.BeatWrites++
	}
	h.stats.Commands += int64(len(cmds))
	if h.spareOut == nil {
		clear(out)
		h.spareOut = out[:0]
	}
	h.mu.Unlock()
	for id := range beats {
		if !kept[string(id)] {
			h.obey(id, worker.CommandKill, "assignment withdrawn")
		}
	}
	for _, c := range cmds {
		h.obey(c.assignment, c.kind, c.reason)
	}
	slices.SortFunc(claims, func(a, b roundClaim) int { return int(a.seq - b.seq) })
	for i := range claims {
		c := &claims[i]
		if c.err != nil {
			h.log.Error("pgtransport: unreadable assignment", "seq", c.seq, "err", c.err)
			continue
		}
		h.start(ctx, c.a)
	}
	return nil
}

// obey carries out a command for one of this host's runs.
func (h *Host) obey(id foreman.AssignmentID, kind worker.CommandKind, reason string) {
	h.mu.Lock()
	r := h.runs[id]
	if r == nil {
		h.mu.Unlock()
		return
	}
	if kind != worker.CommandProbe {
		r.killed = true
		if r.over() {
			delete(h.runs, id)
		}
	}
	h.mu.Unlock()
	local := foreman.WorkerID(id)
	if err := h.runtime.Send(context.Background(), worker.Command{Kind: kind, Worker: local, Assignment: id, Reason: reason}); err != nil {
		h.log.Warn("pgtransport: command not carried out", "assignment", id, "command", kind.String(), "err", err)
	}
}

// start runs a claimed assignment in the Runtime, under its assignment id
// as the worker id (assignments of different coordinators or terms never
// collide on one host).
func (h *Host) start(ctx context.Context, a worker.Assignment) {
	h.mu.Lock()
	h.runs[a.ID] = &hostRun{a: a, live: true}
	h.live++
	h.stats.Claimed++
	h.mu.Unlock()
	run := a
	if h.cfg.Prepare != nil {
		var err error
		if run, err = h.prepare(ctx, a); err != nil {
			h.mu.Lock()
			h.runs[a.ID].live = false
			h.live--
			h.mu.Unlock()
			h.queue(worker.Message{Kind: worker.MsgFailed, Worker: a.Worker, Assignment: a.ID,
				Reason: "preparing the assignment on host " + h.cfg.Name + ": " + err.Error()}, true)
			return
		}
	}
	run.Worker = foreman.WorkerID(a.ID)
	if err := h.runtime.Send(ctx, worker.Command{Kind: worker.CommandAssign, Worker: run.Worker, Assignment: a.ID, Assign: &run}); err != nil {
		h.mu.Lock()
		h.runs[a.ID].live = false
		h.live--
		h.mu.Unlock()
		h.queue(worker.Message{Kind: worker.MsgFailed, Worker: a.Worker, Assignment: a.ID, Reason: err.Error()}, true)
	}
}

// prepare calls HostConfig.Prepare on a copy of a and returns it: the copy
// escapes to the heap, so start's, when no Prepare is set, does not
// (never inlined: inlined, its copy would be start's).
//
//go:noinline
func (h *Host) prepare(ctx context.Context, a worker.Assignment) (worker.Assignment, error) {
	err := h.cfg.Prepare(ctx, &a)
	return a, err
}

// roundScratch is what a round builds and throws away, kept for the next
// (rounds run one at a time, on Run's goroutine): slices and a map
// rebuilt at every round cost allocations that grow with its size.
type roundScratch struct {
	ids, bodies []string
	finals      []bool
	ended       map[foreman.AssignmentID]bool
	claims      []roundClaim
}

// roundClaim is an assignment a round claimed: decoded, or not (err).
type roundClaim struct {
	seq int64
	a   worker.Assignment
	err error
}

// reset empties the scratch, keeping its room and nothing it referred to.
func (sc *roundScratch) reset() {
	clear(sc.ids)
	clear(sc.bodies)
	clear(sc.claims)
	clear(sc.ended)
	sc.ids, sc.bodies, sc.finals, sc.claims = sc.ids[:0], sc.bodies[:0], sc.finals[:0], sc.claims[:0]
}
