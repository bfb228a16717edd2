package teamcore

import (
	"context"
	"testing"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeFlow is the flow's runtime reduced to the states a test sets; it
// records the restarts the coordinator asks for.
type fakeFlow struct {
	states   map[foreman.ItemID]pipeline.State
	resolved []int
}

func (f *fakeFlow) Get(_ context.Context, item foreman.ItemID) (pipeline.State, error) {
	st, ok := f.states[item]
	if !ok {
		st = pipeline.State{Item: item, Status: pipeline.StatusNew}
	}
	return st, nil
}

func (f *fakeFlow) Start(_ context.Context, item foreman.ItemID, title string) (pipeline.State, error) {
	st := pipeline.State{Item: item, Title: title, Status: pipeline.StatusActive}
	f.states[item] = st
	return st, nil
}

func (f *fakeFlow) Resolve(_ context.Context, item foreman.ItemID, stage int, _ string) (pipeline.State, error) {
	f.resolved = append(f.resolved, stage)
	st := pipeline.State{Item: item, Status: pipeline.StatusActive, Stage: stage}
	f.states[item] = st
	return st, nil
}

func (f *fakeFlow) Pending(context.Context, foreman.ItemID) ([]pipeline.Effect, error) {
	return nil, nil
}

func (f *fakeFlow) Handle(_ context.Context, item foreman.ItemID, _ pipeline.Event) (pipeline.State, error) {
	return f.states[item], nil
}

func (f *fakeFlow) Deliver(_ context.Context, item foreman.ItemID, _ message.Envelope) (pipeline.State, error) {
	return f.states[item], nil
}

func (f *fakeFlow) Recover(context.Context) error { return nil }

// fakeHost holds a person's decision about S1.
type fakeHost struct {
	decision *Decision
	taken    int
}

func (h *fakeHost) Title(item foreman.ItemID) (string, error) { return "story " + string(item), nil }
func (h *fakeHost) Decision(context.Context, pipeline.State) (*Decision, error) {
	return h.decision, nil
}
func (h *fakeHost) DecisionTaken(context.Context, foreman.ItemID) error {
	h.decision = nil
	h.taken++
	return nil
}
func (h *fakeHost) ReworkDue(context.Context, pipeline.State) (int, bool, error) {
	return 0, false, nil
}
func (h *fakeHost) GrantRework(context.Context, pipeline.State, int) (string, error) {
	return "", nil
}

// fixture is a coordinator over a real task graph (one story, S1) and a
// fake flow; spawns are recorded, not carried out.
type fixture struct {
	co     *Coordinator
	graph  *taskgraph.Runtime
	flow   *fakeFlow
	host   *fakeHost
	spawns []taskgraph.SpawnRequest
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	clk := foreman.NewFakeClock(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC))
	f := &fixture{flow: &fakeFlow{states: map[foreman.ItemID]pipeline.State{}}, host: &fakeHost{}}
	var err error
	f.graph, err = taskgraph.NewRuntime(taskgraph.Config{Store: store.NewMemory(store.MemoryOptions{}), Clock: clk,
		Spawner: taskgraph.SpawnerFunc(func(_ context.Context, r taskgraph.SpawnRequest) error {
			f.spawns = append(f.spawns, r)
			return nil
		}),
		Core: taskgraph.CoreConfig{Roles: []string{StoryRole}, NoCheckpoints: true, MaxActive: 1}})
	require.NoError(t, err)
	_, err = f.graph.Create(ctx, GraphSession, "foreman", "team", []taskgraph.TaskSpec{{Subject: "S1", Role: StoryRole}})
	require.NoError(t, err)
	f.co = New(Config{Flow: f.flow, Graph: f.graph, Stages: pipeline.StoryFlow(pipeline.StoryConfig{}), Host: f.host, Clock: clk})
	return f
}

// start has the graph spawn S1 and the coordinator start it.
func (f *fixture) start(t *testing.T) foreman.AssignmentID {
	t.Helper()
	ctx := context.Background()
	n := len(f.spawns)
	_, err := f.co.Step(ctx, taskgraph.WakeUp{Text: "next"})
	require.NoError(t, err)
	require.Len(t, f.spawns, n+1, "the graph spawns S1")
	a := f.spawns[n].Assignment
	_, err = f.co.Spawn(ctx, "S1", a)
	require.NoError(t, err)
	return a
}

func (f *fixture) task(t *testing.T) taskgraph.Status {
	t.Helper()
	sess, _, err := f.graph.Load(context.Background(), GraphSession)
	require.NoError(t, err)
	task, ok := sess.Graph.Task("S1")
	require.True(t, ok)
	return task.Status
}

// pause has the flow pause S1 and returns the coordinator's effects.
func (f *fixture) pause(t *testing.T, key string) []Effect {
	t.Helper()
	f.flow.states["S1"] = pipeline.State{Item: "S1", Status: pipeline.StatusPaused, Stage: 3,
		Pause: &pipeline.Escalation{Key: key, Reason: pipeline.ReasonRetriesExhausted, Message: "quality gate failed three times"}}
	_, effs, err := f.co.Handle(context.Background(), "S1", pipeline.Event{Kind: pipeline.EventIdle})
	require.NoError(t, err)
	return effs
}

func kinds(effs []Effect) []EffectKind {
	var out []EffectKind
	for _, e := range effs {
		out = append(out, e.Kind)
	}
	return out
}

// A person who decides as soon as a story pauses may do so before the
// team has parked its task (the pause is recorded and seen first, the
// parking comes later): the decision then finds nothing parked to act on.
// Parking carries it out, so the story goes back to work in this Run
// rather than waiting, decided, for the next.
func TestADecisionBeforeTheParkingIsCarriedOutByIt(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.start(t)
	effs := f.pause(t, "k1")
	require.Equal(t, []EffectKind{EffectPaused, EffectPark}, kinds(effs))

	f.host.decision = &Decision{To: taskgraph.Pending, Stage: 3, Feedback: "again", Pause: "k1"}
	woken, err := f.co.Decided(ctx, "S1")
	require.NoError(t, err)
	assert.Equal(t, []EffectKind{EffectWake}, kinds(woken))
	assert.Equal(t, taskgraph.InProgress, f.task(t), "nothing parked yet: the decision waits")

	after, err := f.co.Park(ctx, effs[1])
	require.NoError(t, err)
	assert.Equal(t, taskgraph.Pending, f.task(t), "parking carried the decision out")
	for _, e := range after {
		_, err := f.co.Step(ctx, e.Wake)
		require.NoError(t, err, e.Wake.Text)
	}
	require.Len(t, f.spawns, 2, "the released story is spawned again")
	_, err = f.co.Spawn(ctx, "S1", f.spawns[1].Assignment)
	require.NoError(t, err)
	assert.Equal(t, []int{3}, f.flow.resolved, "the flow restarts at the decided stage")
	assert.Equal(t, 1, f.host.taken)
}

// A retry's record that a crash kept after the flow acted on it (the
// flow restarted, the record was not yet cleared) decides no later pause:
// the story waits for a person again.
func TestADecisionAboutAnEarlierPauseDecidesNoLaterOne(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.start(t)
	f.host.decision = &Decision{To: taskgraph.Pending, Stage: 2, Pause: "k1"}
	effs := f.pause(t, "k2")
	require.Equal(t, []EffectKind{EffectPaused, EffectPark}, kinds(effs))
	_, err := f.co.Park(ctx, effs[1])
	require.NoError(t, err)
	assert.Equal(t, taskgraph.Parked, f.task(t), "the earlier pause's decision does not release it")

	_, err = f.co.Recover(ctx)
	require.NoError(t, err)
	assert.Equal(t, taskgraph.Parked, f.task(t), "nor does a restart")
	assert.Empty(t, f.flow.resolved)

	assert.Nil(t, f.host.decision, "and it is forgotten")

	f.host.decision = &Decision{To: taskgraph.Pending, Stage: 2, Pause: "k2"}
	_, err = f.co.Decided(ctx, "S1")
	require.NoError(t, err)
	assert.Equal(t, taskgraph.Pending, f.task(t), "a decision about this pause does")
}

// A wake-up the graph rejects (here: a callback about a task the graph
// does not have) is skipped, as the team's Run skips it; it is no fault.
func TestARejectedWakeUpIsSkipped(t *testing.T) {
	f := newFixture(t)
	done, err := f.co.Step(context.Background(), taskgraph.WakeUp{Handler: taskgraph.HandleCallback, Role: StoryRole,
		Assignment: "nobody.1", Task: "S9", Outcome: taskgraph.OutcomeCompleted})
	require.NoError(t, err)
	assert.False(t, done)
	assert.True(t, RejectedWakeUp(taskgraph.ErrInvalidWakeUp))
	assert.False(t, RejectedWakeUp(context.Canceled))
}
