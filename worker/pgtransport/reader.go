package pgtransport

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/worker"
)

// readLoop delivers the hosts' messages, in the order they were written,
// and their heartbeats, whenever notified and at least every PollInterval.
func (c *Coordinator) readLoop() {
	defer c.wg.Done()
	ticker := c.clock.NewTicker(c.cfg.PollInterval)
	defer ticker.Stop()
	var wake <-chan struct{}
	if c.listen != nil {
		wake = c.listen.wake[0]
	}
	var delivered deliveredSet
	var since *time.Time
	beatsDue := true
	for polls := 0; ; {
		last := c.clock.Now()
		if beatsDue {
			polls++
			if polls%fullBeatScanEvery == 0 {
				since = nil // a full look, which also forgets the assignments that ended
			}
		}
		more, err := c.readOnce(&delivered, &since, beatsDue)
		beatsDue = false
		if err != nil && c.ctx.Err() == nil {
			c.log.Warn("pgtransport: reading messages failed, will retry", "err", err)
			more = false
		}
		if more {
			continue
		}
		// While a promise to poll holds, hosts may not notify: read again
		// after ReadCooldown whatever comes.
		var fast clock.Timer
		var fastC <-chan time.Time
		if c.pollingOwed() {
			fast = c.clock.NewTimer(c.cfg.ReadCooldown)
			fastC = fast.C()
		}
		select {
		case <-c.ctx.Done():
		case <-wake:
		case <-c.pollKick:
		case <-fastC:
		case <-ticker.C():
			beatsDue = true
		}
		if fast != nil {
			fast.Stop()
		}
		if c.ctx.Err() != nil {
			return
		}
		if rest := c.cfg.ReadCooldown - c.clock.Since(last); rest > 0 && clock.Sleep(c.ctx, c.clock, rest) != nil {
			return
		}
	}
}

// fullBeatScanEvery: every so many heartbeat polls read every claimed
// assignment's heartbeat count, not only the recent ones, and forget the
// counts of assignments no longer claimed (withdrawn by a KILL, say).
const fullBeatScanEvery = 60

type wireBeat struct {
	id     foreman.AssignmentID
	slot   foreman.WorkerID
	n      int64
	commit string
	output *time.Time
}

// deliveredSet is what the last read delivered of wt_messages, deleted by
// the next read. Finished assignment rows (a final message in its
// assignment's row) delivered wait in Coordinator.unacked for the next
// write, or the next read of every finished row, to delete them: so a
// read that deletes nothing is a read-only transaction, which costs no
// commit.
type deliveredSet struct {
	seqs []int64
}

// readOnce deletes the messages delivered last time, reads the next page
// and (when due) the heartbeats since the last look, and delivers them:
// heartbeats first, since a final message deletes its assignment's row.
// more says whether to read again at once.
func (c *Coordinator) readOnce(delivered *deliveredSet, since **time.Time, beats bool) (more bool, err error) {
	ctx := c.ctx
	b := &pgx.Batch{}
	ids, all := c.takeFinished()
	all = all || beats
	var acks []string
	var dones []int64
	if all {
		// Before reading every finished row, delete those delivered, so
		// that they do not fill the page.
		acks, dones = c.takeAcks(true), c.takeDone()
	}
	if len(delivered.seqs)+len(acks)+len(dones) > 0 {
		// A deletion is a write: fenced, as every write is, so that a
		// coordinator whose term ended deletes nothing its successor has
		// yet to be given (the batch is one transaction).
		b.Queue(c.sql.fence, c.cfg.Lease, c.cfg.Term)
		b.Queue(c.sql.deleteMessages, int8Array(delivered.seqs), textArray(acks), c.cfg.Queue, int8Array(dones))
	}
	c.mu.Lock()
	epoch := c.ackEpoch // deletions done before this read began
	c.mu.Unlock()
	got := c.readBuf[:0] // the readLoop's alone
	defer func() {
		clear(got) // nothing read stays referenced
		c.readBuf = got[:0]
	}()
	scan := func(inRow bool, n *int) func(rows pgx.Rows) error {
		return func(rows pgx.Rows) error {
			// Declared once: as Scan's arguments they live on the heap.
			var seq int64
			var id pgtype.DriverBytes
			var body string
			for rows.Next() {
				var err error
				if inRow {
					err = rows.Scan(&seq, &id, &body, nil) // the host column is not read
				} else {
					err = rows.Scan(&seq, &id, &body)
				}
				if err != nil {
					return err
				}
				got = append(got, readMessage(seq, id, body, inRow))
				*n++
			}
			return rows.Err()
		}
	}
	var nMessages, nFinished, nAll, nDone int
	b.Queue(c.sql.readMessages, c.cfg.Queue, messagePage).Query(scan(false, &nMessages))
	c.polling()
	if len(ids) > 0 && !all {
		b.Queue(c.sql.readFinished, textArray(ids), c.cfg.Queue).Query(scan(true, &nFinished))
	}
	if all {
		b.Queue(c.sql.readAllFinished, c.cfg.Queue, messagePage).Query(scan(true, &nAll))
	}
	// What rounds within a promise to poll finished (doneLog): read at
	// every read, an index range scan that finds nothing when none did
	// (the wt_done rows read before and not yet deleted are passed over).
	var doneRead []int64
	b.Queue(c.sql.readDone, c.cfg.Queue, messagePage, int8Array(c.doneKnown())).Query(func(rows pgx.Rows) error {
		var seq, doneSeq pgtype.Int8
		var id pgtype.DriverBytes
		var body pgtype.Text
		for rows.Next() {
			if err := rows.Scan(&seq, &doneSeq, &id, &body, nil); err != nil { // the host column is not read
				return err
			}
			if seq.Valid {
				doneRead = append(doneRead, seq.Int64)
				nDone++
			}
			if doneSeq.Valid && id != nil {
				got = append(got, readMessage(doneSeq.Int64, id, body.String, true))
			}
		}
		return rows.Err()
	})
	var hb []wireBeat
	var now *time.Time
	if beats {
		b.Queue(c.sql.readBeats, c.cfg.Queue, c.cfg.Lease, c.cfg.Term, *since).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var w wireBeat
				var at time.Time
				if err := rows.Scan(&w.id, &w.slot, &w.n, &w.commit, &w.output, &at); err != nil {
					return err
				}
				hb = append(hb, w)
				now = &at
			}
			return rows.Err()
		})
		b.Queue(`SELECT clock_timestamp()`).QueryRow(func(row pgx.Row) error {
			var at time.Time
			if err := row.Scan(&at); err != nil {
				return err
			}
			now = &at
			return nil
		})
	}
	if err := c.cfg.Pool.SendBatch(ctx, b).Close(); err != nil {
		c.putBackFinished(ids, all)
		c.ackedFinished(nil, acks)
		c.ackedDone(nil, dones)
		if fe := fencedError(err, c.cfg.Lease, c.cfg.Term); fe != nil {
			return false, fe
		}
		return false, err
	}
	c.ackedFinished(acks, nil)
	c.ackedDone(dones, nil)
	c.readDone(doneRead)
	// In the order written: messages and final messages share a sequence.
	slices.SortFunc(got, func(a, b wireMessage) int { return cmp.Compare(a.seq, b.seq) })
	got = slices.CompactFunc(got, func(a, b wireMessage) bool { return a.seq == b.seq && a.inRow == b.inRow })
	delivered.seqs = delivered.seqs[:0]
	c.mu.Lock()
	// Finished rows delivered before, whose deletion is under way or
	// committed while this read ran (or that a notification named twice),
	// are not delivered again. Rows deleted before it began it cannot
	// have seen: forget them.
	got = slices.DeleteFunc(got, func(w wireMessage) bool {
		_, old := c.unacked[string(w.assignment)]
		return w.inRow && old
	})
	for id, st := range c.unacked {
		if st.goneAt != 0 && st.goneAt <= epoch {
			delete(c.unacked, id)
		}
	}
	c.stats.Reads++
	c.stats.Delivered += int64(len(got) + len(hb))
	c.mu.Unlock()
	if beats && *since == nil {
		live := make(map[foreman.AssignmentID]int64, len(hb))
		for _, w := range hb {
			live[w.id] = c.seen[w.id]
		}
		c.seen = live
	}
	if beats && now != nil {
		t := now.Add(-beatMargin)
		*since = &t
	}
	for _, w := range hb {
		if c.seen[w.id] >= w.n {
			continue
		}
		c.seen[w.id] = w.n
		m := worker.Message{Kind: worker.MsgHeartbeat, Worker: w.slot, Assignment: w.id, Commit: w.commit}
		if w.output != nil {
			m.LastOutput = *w.output
		}
		c.deliver(ctx, m)
	}
	for i := range got {
		w := &got[i]
		if m, err := w.msg, w.err; err != nil {
			c.log.Error("pgtransport: unreadable message dropped", "seq", w.seq, "err", err)
		} else if m.Assignment != w.assignment {
			// Written for one claim, naming another assignment: a host
			// speaks only for what it claimed (the host functions refuse
			// this; a role with table access could still write it).
			c.log.Error("pgtransport: message naming another assignment than the one it was written for dropped",
				"seq", w.seq, "written for", w.assignment, "names", m.Assignment)
		} else {
			if final(m.Kind) {
				delete(c.seen, m.Assignment)
			}
			c.deliver(ctx, m)
		}
		if w.inRow {
			c.mu.Lock()
			c.unacked[string(w.assignment)] = ackState{}
			c.mu.Unlock()
		} else {
			delivered.seqs = append(delivered.seqs, w.seq)
		}
	}
	// A full page means more are waiting; otherwise the next wake-up or
	// poll deletes the messages delivered, along with its own read, and
	// the next write (or read of every finished row) the finished rows
	// and wt_done rows.
	if nAll == messagePage || nDone == messagePage {
		c.putBackFinished(nil, true)
	}
	return nMessages == messagePage || nAll == messagePage || nDone == messagePage, nil
}

// wireMessage is a message read: from wt_messages, or a final message
// from its finished assignment's row (inRow), with the assignment it was
// written for, decoded (msg) or not (err).
type wireMessage struct {
	seq        int64
	assignment foreman.AssignmentID
	inRow      bool
	msg        worker.Message
	err        error
}

// readMessage decodes a message read, whose row names the assignment id
// (the driver's bytes, valid only until the next row). The message's
// strings are substrings of body, and so is the assignment id when the
// message names the same one (as it does unless a host wrote for another
// assignment than its own): a message read costs one allocation.
func readMessage(seq int64, id []byte, body string, inRow bool) wireMessage {
	w := wireMessage{seq: seq, inRow: inRow}
	w.msg, w.err = decodeMessageText(body)
	if w.err == nil && string(w.msg.Assignment) == string(id) {
		w.assignment = w.msg.Assignment
	} else {
		w.assignment = foreman.AssignmentID(id)
	}
	return w
}

// noticeFinished records what a notification on the coordinator's
// channel says: the ids of the assignments a host's write finished (a
// JSON array; "[]" when it wrote only messages), or, when the payload is
// not such an array (empty: the list was too long, or a notification may
// have been missed; or a version 3 host's), that every finished row is to
// be read.
func (c *Coordinator) noticeFinished(_, payload string) {
	ids, err := decodeIDs(payload)
	c.finMu.Lock()
	defer c.finMu.Unlock()
	if err != nil {
		c.finAll = true
		return
	}
	c.finIDs = append(c.finIDs, ids...)
}

// takeFinished returns and forgets what noticeFinished recorded.
func (c *Coordinator) takeFinished() (ids []string, all bool) {
	c.finMu.Lock()
	defer c.finMu.Unlock()
	ids, all = c.finIDs, c.finAll
	c.finIDs, c.finAll = nil, false
	return ids, all
}

// putBackFinished records again what a failed read did not read.
func (c *Coordinator) putBackFinished(ids []string, all bool) {
	c.finMu.Lock()
	defer c.finMu.Unlock()
	c.finIDs = append(c.finIDs, ids...)
	c.finAll = c.finAll || all
}

func (c *Coordinator) deliver(ctx context.Context, m worker.Message) {
	if c.inbox == nil {
		return
	}
	if _, err := c.inbox.Deliver(ctx, m); err != nil && !errors.Is(err, context.Canceled) {
		c.log.Debug("pgtransport: message not applied", "worker", m.Worker, "assignment", m.Assignment,
			"message", m.Kind.String(), "err", err)
	}
}

// final says whether a message ends its assignment's run.
func final(k worker.MessageKind) bool {
	switch k {
	case worker.MsgDone, worker.MsgReadyForReview, worker.MsgFailed, worker.MsgRateLimited, worker.MsgNeedsPerson:
		return true
	}
	return false
}
