package teamsim

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/worker"
)

// The invariants, each a named check (Violation.Invariant).
const (
	// InvMergeOnce: a story has at most one merge commit with its
	// trailer; a DONE story has exactly one; a commit exists only for a
	// story that is merging or DONE (never merged before its decision to
	// merge was persisted).
	InvMergeOnce = "merge-once"
	// InvEndState: when the team stops, every story is DONE, PAUSED with
	// an escalation, waiting behind one that is, or (only when a limit
	// stopped the simulation or the budget is spent) still running.
	InvEndState = "end-state"
	// InvSpawnOnce: no assignment has two agents running at once, and no
	// agent starts on an assignment whose report the flow already took.
	InvSpawnOnce = "spawn-once"
	// InvBusyHasItem: no worker of the pool is Busy without an item and
	// an assignment.
	InvBusyHasItem = "busy-has-item"
	// InvStaleNoChange: a stale or duplicate message never changes a
	// story's state (only its counters), and the pool never applies a
	// message of an assignment it finished.
	InvStaleNoChange = "stale-no-change"
	// InvDuplicateReAcked: a duplicate report from the worker whose report
	// the flow took last is ACKed again.
	InvDuplicateReAcked = "duplicate-reacked"
	// InvBudget: the tokens spent under one worker pool never exceed its
	// budget by more than the documented overshoot (what the agents
	// already running spend before they report: Workers x the most one
	// execution spends).
	InvBudget = "budget"
	// InvPausedDependents: a story starts only once every story it waits
	// for is DONE (or a person skipped it), so a paused story's
	// dependents never start.
	InvPausedDependents = "paused-dependents"
	// InvDecisionTaken: a person's retry or resume of a paused story is
	// carried out: when the team stops, no story is still in the pause a
	// person decided to send back to work.
	InvDecisionTaken = "decision-taken"
	// InvStallStopped: liveness is not progress: an agent that sends
	// heartbeats but makes no progress is stopped within twice the
	// progress timeout.
	InvStallStopped = "stall-stopped"
	// InvFault: the team never stops on a system fault of its own (an
	// invalid transition, a corrupt record).
	InvFault = "fault"
)

// Violation is one broken invariant.
type Violation struct {
	Invariant string
	// Step is the event after which it was found; At the simulated time.
	Step   int
	At     time.Duration
	Event  string
	Detail string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s at step %d (%s, after %q): %s", v.Invariant, v.Step, v.At, v.Event, v.Detail)
}

// checkState is what the checks remember between steps.
type checkState struct {
	// poolDone: pool assignments the pool has finished with.
	poolDone map[foreman.AssignmentID]bool
	// doneApplied: pool assignments whose DONE the pool applied.
	doneApplied map[foreman.AssignmentID]bool
	// acks counts the ACKs sent per assignment and stage.
	acks map[ackKey]int
	// accepted: assignments whose report the flow took.
	accepted map[foreman.AssignmentID]bool
	// states caches the stories' decoded states by record version.
	states map[foreman.ItemID]cachedState
	writes int64
	// spent is what the current pool's agents reported spending.
	spent    int64
	commits  int
	seenOnce map[string]bool
}

type ackKey struct {
	a     foreman.AssignmentID
	stage int
}

type cachedState struct {
	version int64
	st      pipeline.State
}

func (k *checkState) init() {
	k.poolDone = map[foreman.AssignmentID]bool{}
	k.doneApplied = map[foreman.AssignmentID]bool{}
	k.acks = map[ackKey]int{}
	k.accepted = map[foreman.AssignmentID]bool{}
	k.states = map[foreman.ItemID]cachedState{}
	k.seenOnce = map[string]bool{}
	k.writes = -1
}

func (k *checkState) poolEnded(a foreman.AssignmentID) { k.poolDone[a] = true }

// acked records an ACK the flow sent.
func (k *checkState) acked(a foreman.AssignmentID, stage int) {
	k.acks[ackKey{a, stage}]++
}

func (k *checkState) agentStarted(w *world, ag *agent) {
	a := ag.req.Assignment
	if w.agents.live[a] > 1 {
		w.violate(InvSpawnOnce, "assignment %s of %s has %d agents running", a, ag.req.Item, w.agents.live[a])
	}
	if k.accepted[a] {
		w.violate(InvSpawnOnce, "assignment %s of %s started again after the flow took its report", a, ag.req.Item)
	}
}

func (w *world) violate(inv, format string, args ...any) {
	detail := fmt.Sprintf(format, args...)
	w.tracef("VIOLATION %s: %s", inv, detail)
	if w.checks.seenOnce[inv] {
		return
	}
	w.checks.seenOnce[inv] = true
	w.violations = append(w.violations, Violation{Invariant: inv, Step: w.steps, At: w.now().Sub(epoch), Event: w.label, Detail: detail})
}

// deliverChecked delivers a report to the flow and checks what a stale
// or duplicate one did.
func (c *coord) deliverChecked(item foreman.ItemID, env message.Envelope) {
	w := c.w
	before, err := c.pipe.Get(w.ctx, item)
	if err != nil {
		c.fault("reading "+string(item), err)
		return
	}
	from := senderOf(before, item, env)
	key := ackKey{env.Assignment, -1}
	if env.Body != nil {
		key.stage = env.Body.StageNum()
	}
	acks := w.checks.acks[key]
	c.deliver(item, env)
	if c.finished {
		return
	}
	after, err := c.pipe.Get(w.ctx, item)
	if err != nil {
		c.fault("reading "+string(item), err)
		return
	}
	if from != "current" && !sameState(before, after) {
		w.violate(InvStaleNoChange, "a %s report of %s from %s/%s changed the story (%s stage %d -> %s stage %d)",
			from, item, env.Sender, env.Assignment, before.Status, before.Stage, after.Status, after.Stage)
	}
	if from == "last" && env.Body != nil && env.Body.Kind().IsReport() && w.checks.acks[key] == acks {
		w.violate(InvDuplicateReAcked, "a duplicate report of %s from %s/%s was not ACKed again", item, env.Sender, env.Assignment)
	}
	if after.Last.Assignment == env.Assignment && env.Assignment != "" {
		w.checks.accepted[env.Assignment] = true
	}
}

// senderOf classifies a report's sender for the checks, from the story's
// state before it arrives: its current worker, the worker whose report
// the flow took last, or anyone else (stale).
func senderOf(s pipeline.State, item foreman.ItemID, env message.Envelope) string {
	switch {
	case env.Body != nil && env.Body.ItemID() != item:
		return "stale"
	case s.Worker != "" && env.Sender == s.Worker && env.Assignment == s.Assignment:
		return "current"
	case s.Last.Worker != "" && env.Sender == s.Last.Worker && env.Assignment == s.Last.Assignment:
		return "last"
	}
	return "stale"
}

// sameState compares two states without their counters of stale and
// duplicate messages (and the bookkeeping those move).
func sameState(a, b pipeline.State) bool {
	a.Stale, b.Stale, a.Duplicates, b.Duplicates = 0, 0, 0, 0
	a.Steps, b.Steps, a.Updated, b.Updated = 0, 0, time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

// check runs the invariants that hold after every step.
func (w *world) check() {
	c := w.c
	if c == nil {
		return
	}
	if c.pool != nil {
		for _, wi := range c.pool.Workers() {
			if wi.State == worker.Busy && (wi.Item == "" || wi.Assignment == "") {
				w.violate(InvBusyHasItem, "worker %s is Busy with item %q, assignment %q", wi.ID, wi.Item, wi.Assignment)
			}
		}
		if b := w.cfg.budget(); b.Tokens > 0 {
			over := int64(w.cfg.Workers) * 10 * tokensPerRun
			if u := max(c.pool.Stats().Usage.Tokens, w.checks.spent); u > b.Tokens+over {
				w.violate(InvBudget, "%d tokens spent under a budget of %d (overshoot bound %d)", u, b.Tokens, over)
			}
		}
	}
	if len(w.agents.silent) > 0 {
		live := w.agents.silent[:0]
		for _, ag := range w.agents.silent {
			if ag.dead {
				continue
			}
			live = append(live, ag)
			if d := w.now().Sub(ag.started); d > 2*progressTimeout {
				w.violate(InvStallStopped, "agent %s of %s has made no progress for %s and still runs", ag.pool, ag.req.Assignment, d)
			}
		}
		w.agents.silent = live
	}
	if w.store.writes == w.checks.writes && len(w.repo.main) == w.checks.commits {
		return
	}
	w.checks.writes, w.checks.commits = w.store.writes, len(w.repo.main)
	states := w.states()
	for _, id := range w.order {
		st := states[id]
		n := len(w.repo.merged(id))
		switch {
		case n > 1:
			w.violate(InvMergeOnce, "%s has %d merge commits", id, n)
		case st.Status == pipeline.StatusDone && n != 1:
			w.violate(InvMergeOnce, "%s is DONE with %d merge commits", id, n)
		case n == 1 && st.Status != pipeline.StatusDone && st.Status != pipeline.StatusMerging:
			w.violate(InvMergeOnce, "%s has a merge commit but its flow is %s at stage %d", id, st.Status, st.Stage)
		}
		if st.Status != pipeline.StatusNew {
			for _, b := range w.stories[id].after {
				if states[b].Status != pipeline.StatusDone && !w.person.skipped[b] {
					w.violate(InvPausedDependents, "%s started while %s, which it waits for, is %s", id, b, states[b].Status)
				}
			}
		}
	}
}

// states reads every story's flow state from the store (decoding only
// the records written since the last read).
func (w *world) states() map[foreman.ItemID]pipeline.State {
	out := make(map[foreman.ItemID]pipeline.State, len(w.order))
	for id, r := range w.store.recs[pipeline.RecordKind] {
		item := foreman.ItemID(id)
		if cs, ok := w.checks.states[item]; ok && cs.version == r.version {
			out[item] = cs.st
			continue
		}
		var rec struct {
			State pipeline.State `json:"state"`
		}
		if r.deleted || json.Unmarshal(r.data, &rec) != nil {
			continue
		}
		w.checks.states[item] = cachedState{r.version, rec.State}
		out[item] = rec.State
	}
	return out
}

// checkEnd checks how the stories ended.
func (w *world) checkEnd() {
	states := w.states()
	halted := w.c != nil && w.c.pool != nil && w.c.pool.Stats().Halted
	limited := w.end == "step limit" || w.end == "time limit" || halted
	// waiting: blocked by a story that is not DONE.
	waiting := func(id foreman.ItemID) bool {
		for _, b := range w.stories[id].after {
			if states[b].Status != pipeline.StatusDone && !w.person.skipped[b] {
				return true
			}
		}
		return false
	}
	for _, id := range w.order {
		st := states[id]
		switch st.Status {
		case pipeline.StatusDone:
		case pipeline.StatusPaused:
			if st.Pause == nil {
				w.violate(InvEndState, "%s is PAUSED without an escalation", id)
			} else if w.person.restarts[st.Pause.Key] && !limited {
				w.violate(InvDecisionTaken, "%s is still in the pause a person sent back to work (%s), though the team ended %s", id, st.Pause.Reason, w.end)
			}
		case pipeline.StatusNew:
			if !waiting(id) && !limited {
				w.violate(InvEndState, "%s never started, though nothing blocks it (the team ended %s)", id, w.end)
			}
		default:
			if !limited {
				w.violate(InvEndState, "%s is still %s at stage %d, though the team ended %s", id, st.Status, st.Stage, w.end)
			}
		}
	}
}
