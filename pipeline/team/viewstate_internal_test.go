package team

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"

	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
)

// The view keeps what a story's status takes from its pipeline record
// (viewState), not the record: the status derived from it is the one the
// whole record gives (the full read's way, as in OldStatuses), for
// records at every stage, past their stages, paused and merged.
func TestTheViewKeepsWhatTheStatusTakesFromTheRecord(t *testing.T) {
	at := time.Date(2026, 11, 27, 18, 0, 0, 0, time.UTC)
	stages := []pipeline.StageRecord{
		{Start: at, End: at.Add(time.Second), Result: "1 tasks, 4/4"},
		{Start: at.Add(2 * time.Second), End: at.Add(3 * time.Second), Result: "GO, 9"},
		{Start: at.Add(4 * time.Second)},
	}
	pause := &pipeline.Escalation{Key: "k", Item: "S1", Stage: 2, Reason: "stuck", Message: "Story S1 is stuck", At: at}
	states := map[string]pipeline.State{
		"new":                    {Item: "S1", Status: pipeline.StatusNew},
		"zero":                   {},
		"active at stage 2":      {Item: "S1", Status: pipeline.StatusActive, Stage: 2, Worker: "w", Assignment: "S1-a3", Assignments: 3, Stages: stages, Feedback: "fix it", Started: at, Updated: at.Add(5 * time.Second)},
		"active past its stages": {Item: "S1", Status: pipeline.StatusActive, Stage: 5, Worker: "w", Assignment: "a", Stages: stages},
		"active, no results yet": {Item: "S1", Status: pipeline.StatusActive, Stage: 0, Stages: []pipeline.StageRecord{{Start: at}}},
		"paused":                 {Item: "S1", Status: pipeline.StatusPaused, Stage: 2, Stages: stages, Pause: pause, Worker: "w"},
		"done":                   {Item: "S1", Status: pipeline.StatusDone, Stage: 2, Stages: stages, Commit: "abc", Assignments: 4},
	}
	tm := &Team{}
	for name, st := range states {
		for _, task := range []taskgraph.Status{taskgraph.Pending, taskgraph.InProgress, taskgraph.Completed} {
			t.Run(name+"/"+string(task), func(t *testing.T) {
				in := storyInputs{Story: Story{ID: "S1", Title: "t"}, Task: task, State: viewStateOf(st), Cause: "died"}
				got := tm.derive(in)

				// The full read's way, from the whole record.
				want := StoryStatus{ID: "S1", Title: "t", State: storyState(taskgraph.Task{Status: task}, st, nil), Stage: st.Stage,
					Attempts: st.Assignments, Last: lastResult(st), Feedback: st.Feedback, Commit: st.Commit,
					Started: st.Started, Updated: st.Updated}
				if want.State == StoryRunning {
					want.Worker, want.Assignment = st.Worker, st.Assignment
					if st.Stage < len(st.Stages) {
						want.Since = st.Stages[st.Stage].Start
					}
				}
				if want.State == StoryPaused {
					want.Pause, want.WorkerCause = teamAdvice(st.Pause), "died"
				}
				assert.Equal(t, want, got)
			})
		}
	}
	assert.LessOrEqual(t, unsafe.Sizeof(viewEntry{}), uintptr(768), "a view entry fits the 768-byte size class")
}
