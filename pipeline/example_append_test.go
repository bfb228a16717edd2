package pipeline_test

import (
	"fmt"
	"time"

	"github.com/agentforeman/foreman/pipeline"
)

// AppendStep appends a transition's effects to a slice the caller owns.
// A host that carries out each transition's effects before the next step
// reuses one buffer and allocates nothing for effects; a host with a queue
// of pending effects appends to the queue. Either way the new state shares
// no memory with the slice.
func ExampleFlow_AppendStep() {
	f := pipeline.StoryFlow(pipeline.StoryConfig{})
	now := time.Date(2026, 3, 9, 10, 0, 0, 0, time.UTC)
	buf := make([]pipeline.Effect, 0, 8)   // the next two transitions reuse it
	show := func(effs []pipeline.Effect) { // carries them out before buf is reused
		for i, e := range effs {
			if i > 0 {
				fmt.Print(" ")
			}
			fmt.Print(e.Kind)
		}
		fmt.Printf(" (%d effects in the buffer of %d)\n", len(effs), cap(effs))
	}

	s, effs, _ := f.AppendStep(buf[:0], pipeline.State{Item: "PROJ-42"}, pipeline.Event{Kind: pipeline.EventStart}, now)
	show(effs)

	report := pipeline.Event{Kind: pipeline.EventReport, Worker: s.Worker, Assignment: s.Assignment,
		Stage: 0, Outcome: pipeline.Complete, Tasks: 3, Score: "4",
		Board: &pipeline.BoardStory{Found: true, Status: "Backlog", Tasks: 3}}
	s, effs, _ = f.AppendStep(effs[:0], s, report, now.Add(time.Minute))
	show(effs)

	// A queue: the effects of a transition follow those still pending, and
	// are numbered within their own transition.
	queue := effs[2:] // the ACK and the shutdown are done; the spawn is pending
	idle := pipeline.Event{Kind: pipeline.EventIdle, Worker: s.Worker, Assignment: s.Assignment}
	s, queue, _ = f.AppendStep(queue, s, idle, now.Add(time.Hour))
	for _, e := range queue {
		fmt.Printf("%s step %d index %d\n", e.Kind, e.Step, e.Index)
	}
	fmt.Println(s.Status, s.Crash.Phase)

	// Output:
	// create-worktree spawn (2 effects in the buffer of 8)
	// ack shutdown spawn (3 effects in the buffer of 8)
	// spawn step 2 index 2
	// probe step 3 index 0
	// ACTIVE probing
}
