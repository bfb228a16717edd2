package pipeline

import "github.com/agentforeman/foreman/health"

// TaskFlow is the flow of a plain task: one stage, "execute", whose
// COMPLETE report squash-merges the item and marks it DONE, and whose ERROR
// report pauses it with an escalation. It has no board checks: a task's
// evidence is its work, which the host (pipeline/team, for one) checks
// before it reports COMPLETE. Worker names are "task-{id}" and, after a
// crash, "task-{id}-retry".
//
// Its reports are Stage 0 reports: a message.Report ("Stage 0 REPORT for
// {id}: COMPLETE." on the wire) or the story flow's Stage 0 lines
// ("Stage 0 COMPLETE for {id}. {N} tasks created. Plan score: {s}/4.",
// whose task count and score are not read, or "Stage 0 ERROR for {id}:
// {details}").
func TaskFlow(cfg StoryConfig) *Flow {
	return &Flow{
		Name:   "task",
		Worker: "task-{id}", CrashWorker: "task-{id}-retry",
		CrashBudget:         orDefault(cfg.CrashBudget, health.DefaultCrashBudget),
		CrashEscalate:       "Task {id} worker crashed {times}",
		CrashResult:         "Crashed (crash_count={n})",
		UnparseableEscalate: "Task {id}: unparseable messages from its worker: {detail}",
		DoneStatus:          BoardDone,
		Stages: []StageSpec{
			{Name: "execute", Rules: []Rule{
				{Outcome: Complete, Action: MergeDone, Result: "Done"},
				{Outcome: Error, Action: Pause, Result: "ERROR: {detail}",
					Escalate: "Task {id} failed: {detail}",
					Suggest:  "read the error, fix its cause (or the task), then resolve the task"},
			}},
		},
	}
}
