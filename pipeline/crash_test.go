package pipeline

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
)

// Tests of the handlers of a worker's health (crash.go), apart from the
// other handlers' (core_test.go): the crash-detection protocol for an idle
// worker and a probe that timed out, and unparseable messages (probed
// once, then paused).

func TestCrashHandler(t *testing.T) {
	f := StoryFlow(StoryConfig{})
	s := atStage(t, f, 2)
	old := s

	// Steps 1 and 2: suspicious, probe.
	s, effs := mustStep(t, f, s, from(s, Event{Kind: EventIdle}), t0.Add(time.Hour))
	assert.Equal(t, []EffectKind{EffectProbe}, kinds(effs))
	assert.Equal(t, health.ProbeText(item, 2), effs[0].Text())
	assert.Equal(t, health.Probing, s.Crash.Phase)

	// A reply about another stage clears nothing; a parseable one clears it.
	same, _ := mustStep(t, f, s, from(s, Event{Kind: EventStatusReply, Stage: 1}), t0.Add(time.Hour))
	assert.Equal(t, s, same)
	cleared, effs := mustStep(t, f, s, from(s, Event{Kind: EventStatusReply, Stage: 2}), t0.Add(time.Hour))
	assert.Empty(t, effs)
	assert.Equal(t, health.Working, cleared.Crash.Phase)

	// Idle again: crash 1 is within the budget: a fresh retry worker resumes.
	s, effs = mustStep(t, f, s, from(s, Event{Kind: EventIdle}), t0.Add(2*time.Hour))
	assert.Equal(t, []EffectKind{EffectShutdown, EffectSpawn}, kinds(effs))
	assert.Equal(t, old.Worker, effs[0].Worker)
	assert.True(t, effs[1].Resume)
	assert.Equal(t, foreman.WorkerID("story-PROJ-42-s2-retry"), s.Worker)
	assert.Equal(t, 1, s.Crash.Crashes)
	assert.Equal(t, health.Working, s.Crash.Phase)
	assert.Equal(t, StatusActive, s.Status)

	// The probe timeout confirms the second crash: over budget, paused.
	s, _ = mustStep(t, f, s, from(s, Event{Kind: EventIdle}), t0.Add(3*time.Hour))
	s, effs = mustStep(t, f, s, from(s, Event{Kind: EventProbeTimeout}), t0.Add(4*time.Hour))
	assert.Equal(t, StatusPaused, s.Status)
	assert.Equal(t, []EffectKind{EffectRemoveWorktree, EffectEscalate, EffectShutdown, EffectAppendReport}, kinds(effs))
	assert.Equal(t, "Story PROJ-42 worker crashed twice at Stage 2", s.Pause.Message)
	assert.Equal(t, ReasonCrashed, s.Pause.Reason)
	assert.Equal(t, 2, s.Pause.Crashes)
	assert.Equal(t, "Crashed at Stage 2 (crash_count=2)", s.Stages[2].Result)

	// A probe timeout with no probe outstanding is a leftover timer.
	a := atStage(t, f, 1)
	next, effs := mustStep(t, f, a, from(a, Event{Kind: EventProbeTimeout}), t0)
	assert.Equal(t, a, next)
	assert.Empty(t, effs)
	// So is a reply nobody asked for.
	next, _ = mustStep(t, f, a, from(a, Event{Kind: EventStatusReply}), t0)
	assert.Equal(t, a, next)
}

func TestCrashBudgetZeroPausesOnFirstCrash(t *testing.T) {
	f := StoryFlow(StoryConfig{CrashBudget: -1})
	s := atStage(t, f, 1)
	s, _ = mustStep(t, f, s, from(s, Event{Kind: EventIdle}), t0)
	s, _ = mustStep(t, f, s, from(s, Event{Kind: EventIdle}), t0)
	assert.Equal(t, StatusPaused, s.Status)
	assert.Equal(t, "Story PROJ-42 worker crashed once at Stage 1", s.Pause.Message)
}

func TestUnparseableProbesThenPauses(t *testing.T) {
	f := StoryFlow(StoryConfig{})
	s := atStage(t, f, 2)
	s, effs := mustStep(t, f, s, from(s, Event{Kind: EventUnparseable, Detail: "hello?"}), t0)
	assert.Equal(t, []EffectKind{EffectProbe}, kinds(effs))
	assert.Equal(t, StatusActive, s.Status)

	// A parseable status in between starts the count again.
	c, _ := mustStep(t, f, s, from(s, Event{Kind: EventStatusReply, Stage: 2}), t0)
	assert.Equal(t, 0, c.Unparsed)

	s, effs = mustStep(t, f, s, from(s, Event{Kind: EventUnparseable, Detail: "gibberish"}), t0)
	assert.Equal(t, StatusPaused, s.Status)
	assert.Equal(t, ReasonUnparseable, s.Pause.Reason)
	assert.Equal(t, "Story PROJ-42: unparseable messages from the Stage 2 worker: gibberish", s.Pause.Message)
	assert.Equal(t, []EffectKind{EffectRemoveWorktree, EffectEscalate, EffectShutdown, EffectAppendReport}, kinds(effs))
}

// A worker that printed garbage and then ended answers no probe: the probe's
// timeout hands the item to the crash protocol instead of leaving it ACTIVE
// with nobody left to send a second message.
func TestAnUnansweredProbeOfGarbageGoesToTheCrashProtocol(t *testing.T) {
	f := StoryFlow(StoryConfig{})
	s := atStage(t, f, 2)
	first := s.Assignment
	s, effs := mustStep(t, f, s, from(s, Event{Kind: EventUnparseable, Detail: "garbage"}), t0)
	require.Equal(t, []EffectKind{EffectProbe}, kinds(effs))

	s, effs = mustStep(t, f, s, from(s, Event{Kind: EventProbeTimeout}), t0.Add(time.Minute))
	assert.Equal(t, StatusActive, s.Status)
	assert.Equal(t, health.Probing, s.Crash.Phase, "the crash protocol probes once more")
	assert.Equal(t, []EffectKind{EffectProbe}, kinds(effs))

	s, effs = mustStep(t, f, s, from(s, Event{Kind: EventProbeTimeout}), t0.Add(2*time.Minute))
	assert.Equal(t, StatusActive, s.Status)
	assert.NotEqual(t, first, s.Assignment, "a fresh worker resumes the stage")
	assert.Equal(t, 2, s.Stage)
	assert.Contains(t, kinds(effs), EffectSpawn)
	assert.Equal(t, 0, s.Unparsed, "the fresh worker starts with a clean count")
}
