package message_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/agentforeman/foreman/pipeline/message"
)

func ExampleParse() {
	m, err := message.Parse("Stage 0 COMPLETE for PROJ-42. 3 tasks created. Plan score: 4/4.")
	if err != nil {
		panic(err)
	}
	done := m.(message.Stage0Complete)
	fmt.Println(m.Kind(), done.Item, done.Tasks, done.PlanScore)

	m, _ = message.Parse("Stage 3 COMPLETE for PROJ-42. Verdict: FAIL. Quality Score: 41/100. Issues: no tests")
	qa := m.(message.Stage3Complete)
	fmt.Println(qa.Verdict, qa.Score, qa.Issues, qa.AgentsOrNA())
	// Output:
	// Stage0Complete PROJ-42 3 4
	// FAIL 41 no tests N/A
}

func ExampleParse_unparseable() {
	_, err := message.Parse("Stage 0 done for PROJ-42, 3 tasks")
	var pe *message.ParseError
	fmt.Println(errors.Is(err, message.ErrUnparseable), errors.As(err, &pe))
	// Output:
	// true true
}

func ExampleFormat() {
	fmt.Println(message.Format(message.Stage1Complete{Item: "PROJ-42", Verdict: message.VerdictNoGo, Readiness: 3, Reason: "scope unclear"}))
	fmt.Println(message.Format(message.StatusCheck{Stage: 2, Item: "PROJ-42"}))
	// Output:
	// Stage 1 COMPLETE for PROJ-42. Verdict: NO-GO. Readiness: 3. Reason: scope unclear
	// Status check: are you still working on Stage 2 for PROJ-42?
}

func ExampleAckFor() {
	m, _ := message.Parse("Stage 2 COMPLETE for PROJ-42. All tasks Done. Story set to To Review.")
	if ack, ok := message.AckFor(m); ok {
		fmt.Println(message.Format(ack))
	}
	// Output:
	// ACK Stage 2 for PROJ-42
}

func ExampleOpen() {
	at := time.Date(2026, 3, 9, 12, 0, 0, 0, time.UTC)
	env, err := message.Open("story-PROJ-42-s1", "asg-7", "Stage 1 COMPLETE for PROJ-42. Verdict: GO. Readiness: 8.", at)
	if err != nil {
		panic(err)
	}
	fmt.Println(env.Sender, env.Assignment, env.Body.Kind(), env.Body.ItemID())

	env, err = message.Open("story-PROJ-42-s1", "asg-7", "all done!", at)
	fmt.Println(env.Body == nil, errors.Is(err, message.ErrUnparseable), env.Raw)
	// Output:
	// story-PROJ-42-s1 asg-7 Stage1Complete PROJ-42
	// true true all done!
}

func ExampleRoute() {
	for _, text := range []string{
		"[executor] IMPL-001 completed: 12 tests pass",
		"check",
		"resume",
		"",
	} {
		w := message.Route(text)
		fmt.Printf("%q → %v", text, w.Kind)
		if w.Kind == message.WakeCallback {
			fmt.Printf(" from %s: %s %s", w.Role, w.Callback.Subject, w.Callback.Status)
		}
		fmt.Println()
	}
	// Output:
	// "[executor] IMPL-001 completed: 12 tests pass" → callback from executor: IMPL-001 completed
	// "check" → check
	// "resume" → resume
	// "" → spawn-next
}

// A stage of any flow reports with a Report: typed in one process, a line
// of its own on the wire, and the story flow's own line when one says the
// same.
func ExampleReport() {
	r := message.Report{Item: "US-7", Stage: 5, Outcome: "APPROVED", Score: 9, HasScore: true}
	fmt.Println(message.Line(r))
	m, _ := message.Parse("Stage 3 COMPLETE for US-7. Verdict: FAIL. Quality Score: 40/100. Issues: no tests")
	back, _ := message.ReportOf(m)
	fmt.Printf("%s %d %s\n", back.Outcome, back.Score, back.Detail)
	fmt.Println(message.Line(back))
	// Output:
	// Stage 5 REPORT for US-7: APPROVED. Score: 9.
	// FAIL 40 no tests
	// Stage 3 COMPLETE for US-7. Verdict: FAIL. Quality Score: 40/100. Issues: no tests
}
