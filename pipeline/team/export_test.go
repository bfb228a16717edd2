package team

import (
	"context"
	"errors"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/store"
)

// ApplyDecision carries story's recorded decision to the task graph, as
// Resolve and Run's recovery do.
func ApplyDecision(t *Team, ctx context.Context, story foreman.ItemID) error {
	return t.applyDecision(ctx, story)
}

// OnViewCommit makes check run after every write that changes the status
// view, while no other such write can happen (the view's write lock is
// held): the store then holds exactly what the view was derived from.
func OnViewCommit(t *Team, check func()) { t.db.(*viewStore).afterCommit = check }

// ViewStatuses is every story's status as the view has it (without
// Retrying, which is this process's and not a record's).
func ViewStatuses(t *Team) []StoryStatus { return t.view.statuses(nil) }

// ViewCounts are the view's counts by state and its totals.
func ViewCounts(t *Team) (map[StoryState]int, int, int64, float64) {
	s := t.view.summary()
	return s.ByState, s.Stories, s.Tokens, s.CostUSD
}

// ViewRefused is the view's count of refused attempts.
func ViewRefused(t *Team) int64 { return t.view.summary().Refused }

// PersistedView is every story's status as the view records in the store
// have it (what ReadStatus reads).
func PersistedView(t *Team, ctx context.Context) ([]StoryStatus, error) {
	s, _, err := readView(ctx, t.view.inner)
	return s, err
}

// OldStatuses is the full read the status view replaced, kept as the
// oracle: every story's records read from the store one query each, the
// plan from the graph's session. Retrying is left out.
func OldStatuses(t *Team, ctx context.Context) ([]StoryStatus, error) {
	sess, _, err := t.graph.Load(ctx, graphSession)
	if err != nil {
		return nil, err
	}
	usage, err := usageByStory(ctx, t.db)
	if err != nil {
		return nil, err
	}
	refused, err := refusedByStory(ctx, t.db)
	if err != nil {
		return nil, err
	}
	var out []StoryStatus
	states := map[foreman.ItemID]StoryState{}
	for _, task := range sess.Graph.Tasks() {
		s := storyOfTask(task)
		st, err := t.pipe.Get(ctx, s.ID)
		if err != nil {
			return nil, err
		}
		dp, err := t.decisionOf(ctx, s.ID)
		if err != nil {
			return nil, err
		}
		ss := StoryStatus{ID: s.ID, Title: s.Title, After: s.After, State: storyState(task, st, dp), Stage: st.Stage,
			Attempts: st.Assignments, Last: lastResult(st), Feedback: st.Feedback, Commit: st.Commit,
			Started: st.Started, Updated: st.Updated, Tokens: usage[s.ID].Tokens, CostUSD: usage[s.ID].CostUSD,
			Refused: refused[s.ID].Count, RefusedLast: refused[s.ID].Last, RefusedKinds: refused[s.ID].kinds()}
		if st.Status != pipeline.StatusNew {
			ss.Role = t.role(st.Stage)
		}
		if dp != nil {
			ss.Decision = dp.Action
		}
		if ss.State == StoryRunning {
			ss.Worker, ss.Assignment = st.Worker, st.Assignment
			if st.Stage < len(st.Stages) {
				ss.Since = st.Stages[st.Stage].Start
			}
		}
		if ss.State == StoryPaused {
			ss.Pause = teamAdvice(st.Pause)
			var m memory
			if _, _, err := getJSON(ctx, t.db, kindMemory, string(s.ID), &m); err != nil {
				return nil, err
			}
			ss.WorkerCause = m.WorkerCause
		}
		if ss.State == StoryPaused || ss.State == StoryRunning {
			if ss.Triage, err = t.conflictTriage(ctx, s.ID); err != nil {
				return nil, err
			}
		}
		states[s.ID] = ss.State
		out = append(out, ss)
	}
	for i := range out {
		if out[i].State != StoryPending {
			continue
		}
		for _, a := range out[i].After {
			switch states[a] {
			case StoryPaused, StoryAbandoned, StoryBlocked:
				out[i].BlockedBy = append(out[i].BlockedBy, a)
			}
		}
		if len(out[i].BlockedBy) > 0 {
			out[i].State = StoryBlocked
		}
	}
	for i := range out {
		if out[i].State == StoryPending {
			for _, a := range out[i].After {
				if states[a] == StoryBlocked || oldStateOf(out, a) == StoryBlocked {
					out[i].BlockedBy = append(out[i].BlockedBy, a)
				}
			}
			if len(out[i].BlockedBy) > 0 {
				out[i].State = StoryBlocked
			}
		}
	}
	return out, nil
}

func oldStateOf(out []StoryStatus, id foreman.ItemID) StoryState {
	for _, s := range out {
		if s.ID == id {
			return s.State
		}
	}
	return ""
}

// ClearAbandonedLocks is what a Run does first about the git locks of
// worktrees no process works in.
func ClearAbandonedLocks(t *Team) { t.clearAbandonedLocks() }

// DecisionRecord is story's decision record as the store keeps it (nil
// when there is none); PutDecisionRecord writes one back, as a crash
// between the flow acting on a decision and its clearing leaves it.
func DecisionRecord(t *Team, ctx context.Context, story foreman.ItemID) ([]byte, error) {
	rec, err := t.db.Get(ctx, kindDecision, string(story))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return rec.Data, err
}

func PutDecisionRecord(t *Team, ctx context.Context, story foreman.ItemID, data []byte) error {
	_, err := t.db.Apply(ctx, store.Op{Kind: kindDecision, ID: string(story), Data: data})
	return err
}
