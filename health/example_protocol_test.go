package health_test

import (
	"context"
	"fmt"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
)

// The protocol alone is a pure function: state and event in, state and
// effects out.
func ExampleStep() {
	s := health.State{}
	for _, ev := range []health.EventKind{health.EventIdle, health.EventProbeSent, health.EventIdle, health.EventItemOpen} {
		var effects []health.Effect
		s, effects, _ = health.Step(s, health.Event{Kind: ev}, health.DefaultCrashBudget)
		fmt.Printf("%-10s -> %-13s %v\n", ev, s.Phase, effects)
	}
	_, _, err := health.Step(s, health.Event{Kind: health.EventProbeSent}, 1)
	fmt.Println(err)
	// Output:
	// idle       -> suspicious    [send-probe]
	// probe-sent -> probing       [arm-probe-timeout]
	// idle       -> checking-item [cancel-probe-timeout check-item-open]
	// item-open  -> resuming      [resume]
	// health: no transition for event probe-sent in phase resuming
}

// Host-side services for the Monitor example: they print what they are
// asked to do.
type printProber struct{}

func (printProber) Probe(_ context.Context, p health.Probe) error {
	fmt.Println("probe:", p.Text)
	return nil
}

type openItems struct{}

func (openItems) ItemOpen(context.Context, foreman.ItemID) (bool, error) { return true, nil }

type printEscalator struct{}

func (printEscalator) Escalate(_ context.Context, e health.Escalation) error {
	fmt.Printf("escalate: %s\n  do: %s\n", e.Message, e.SuggestedAction)
	return nil
}

type printResumer struct{}

func (printResumer) Resume(_ context.Context, p health.ResumePlan) (health.Resumed, error) {
	fmt.Printf("resume %s in %s mode (session %q)\n", p.Item, p.Mode, p.Session)
	return health.Resumed{Assignment: "PROJ-42-s2-2", Worker: "story-PROJ-42-s2-retry"}, nil
}

type oneCheckpoint struct{}

func (oneCheckpoint) LoadCheckpoint(context.Context, foreman.ItemID) (health.Checkpoint, error) {
	return health.Checkpoint{Version: 1, Item: "PROJ-42", Stage: 2, AgentSession: "sess-7"}, nil
}

// The Monitor probes a quiet worker, resumes it after a confirmed crash,
// and pauses the item with an escalation when it crashes again.
func ExampleMonitor() {
	ctx := context.Background()
	clk := foreman.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	m, _ := health.NewMonitor(health.MonitorConfig{
		Clock: clk, Prober: printProber{}, ItemChecker: openItems{}, Escalator: printEscalator{},
		Resumer: printResumer{}, Checkpoints: oneCheckpoint{},
	})
	defer m.Close()
	_ = m.Watch(health.Subject{Item: "PROJ-42", Stage: 2, Assignment: "PROJ-42-s2-1", Worker: "story-PROJ-42-s2"})

	_, _ = m.Idle(ctx, "PROJ-42-s2-1")
	out, _ := m.Reply(ctx, "PROJ-42-s2-1", "Status for PROJ-42: Stage 2 EXECUTING. Current step: running tests.")
	fmt.Println("after reply:", out.State.Phase)

	_, _ = m.Idle(ctx, "PROJ-42-s2-1")
	clk.Advance(health.DefaultProbeTimeout) // no answer
	st, _ := m.State("PROJ-42")
	fmt.Println("after timeout:", st.Phase, "crashes:", st.Crashes)

	_, _ = m.Idle(ctx, "PROJ-42-s2-2")
	out, _ = m.Idle(ctx, "PROJ-42-s2-2")
	fmt.Println("after second crash:", out.State.Phase)
	// Output:
	// probe: Status check: are you still working on Stage 2 for PROJ-42?
	// after reply: working
	// probe: Status check: are you still working on Stage 2 for PROJ-42?
	// resume PROJ-42 in session mode (session "sess-7")
	// after timeout: working crashes: 1
	// probe: Status check: are you still working on Stage 2 for PROJ-42?
	// escalate: Item PROJ-42: worker crashed 2 time(s) at stage 2; crash budget is 1.
	//   do: Read the worker's last output and the item's checkpoint to find why it keeps dying (context overflow, a hanging tool, a broken environment); fix that, then resume the item or reassign it.
	// after second crash: paused
}
