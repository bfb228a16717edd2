package taskgraph

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline/store"
)

// checkIndex compares the graph's incremental index with one computed
// afresh from its tasks.
func checkIndex(t *testing.T, g *Graph, when string) {
	t.Helper()
	fresh := &Graph{specs: g.specs, state: slices.Clone(g.state), index: g.index, blockers: g.blockers}
	fresh.initIndex()
	require.Equal(t, fresh.counts, g.counts, "counts %s", when)
	require.Equal(t, fresh.unmet, g.unmet, "unmet blockers %s", when)
	require.Equal(t, fresh.readyBits, g.readyBits, "ready set %s", when)
	require.Equal(t, fresh.nReady, g.nReady, "ready count %s", when)
	var ready []string
	for i := range g.specs {
		if g.ready(i) {
			ready = append(ready, g.specs[i].Subject)
		}
	}
	require.Equal(t, ready, g.Ready(), "Ready %s", when)
}

// randomSpecs is a random acyclic graph: each task blocked by up to three
// earlier ones.
func randomSpecs(r *rand.Rand, n int) []TaskSpec {
	specs := make([]TaskSpec, n)
	for i := range specs {
		specs[i] = TaskSpec{Subject: fmt.Sprintf("T%03d", i), Role: "executor"}
		for range r.IntN(4) {
			if i > 0 {
				b := specs[r.IntN(i)].Subject
				if !slices.Contains(specs[i].BlockedBy, b) {
					specs[i].BlockedBy = append(specs[i].BlockedBy, b)
				}
			}
		}
	}
	return specs
}

// The index kept step by step equals the index computed afresh, through
// random runs of spawns, completions, failures, parkings, releases and
// cancellations, in place (Apply) and copying (Handle).
func TestIndexFollowsEveryStep(t *testing.T) {
	for seed := range uint64(20) {
		for _, inPlace := range []bool{true, false} {
			t.Run(fmt.Sprintf("seed%d-inplace=%v", seed, inPlace), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 7))
				c := NewCore(CoreConfig{NoCheckpoints: true, MaxActive: 1 + r.IntN(4)})
				s := customSession(t, c, randomSpecs(r, 40)...)
				step := func(w WakeUp) {
					w.At = t0
					if inPlace {
						_, err := c.Apply(s, w)
						require.NoError(t, err)
					} else {
						n, _, err := c.Handle(s, w)
						require.NoError(t, err)
						s = n
					}
				}
				update := func(u TaskUpdate) {
					if inPlace {
						_, err := c.ApplyUpdate(s, u)
						require.NoError(t, err)
					} else {
						n, _, err := c.Update(s, u)
						require.NoError(t, err)
						s = n
					}
				}
				step(WakeUp{Handler: HandleSpawnNext})
				for k := 0; k < 400 && s.Status != SessionCompleted; k++ {
					checkIndex(t, s.Graph, fmt.Sprintf("after step %d", k))
					running := s.ActiveWorkers
					switch x := r.IntN(10); {
					case len(running) > 0 && x < 5:
						w := running[r.IntN(len(running))]
						outcome := OutcomeCompleted
						if x == 0 {
							outcome = OutcomeFailed
						}
						step(WakeUp{Handler: HandleCallback, Role: w.Role, Assignment: w.Assignment, Outcome: outcome})
					case len(running) > 0 && x == 5:
						w := running[r.IntN(len(running))]
						update(TaskUpdate{Task: w.Task, To: Parked, Assignment: w.Assignment})
						step(WakeUp{Handler: HandleCallback, Role: w.Role, Assignment: w.Assignment, Outcome: OutcomeFailed})
					case x == 6:
						for _, tk := range s.Graph.Tasks() {
							if tk.Status == Parked {
								update(TaskUpdate{Task: tk.Subject, To: []Status{Pending, Completed, Cancelled}[r.IntN(3)], Assignment: tk.Assignment})
								break
							}
						}
					case x == 7:
						step(WakeUp{Handler: HandleResume})
					default:
						step(WakeUp{Handler: HandleSpawnNext})
					}
				}
				checkIndex(t, s.Graph, "at the end")
			})
		}
	}
}

// countingStore counts the ops of each Apply.
type countingStore struct {
	store.Store
	mu  sync.Mutex
	ops []int
}

func (c *countingStore) Apply(ctx context.Context, ops ...store.Op) ([]store.Record, error) {
	c.mu.Lock()
	c.ops = append(c.ops, len(ops))
	c.mu.Unlock()
	return c.Store.Apply(ctx, ops...)
}

// A step writes the session record and the tasks it changed: spawning
// one task of a thousand writes two records, and the effects done one.
func TestStepWritesWhatItTouches(t *testing.T) {
	ctx := context.Background()
	cs := &countingStore{Store: newMemory()}
	var changed [][]Task
	rt, err := NewRuntime(Config{Store: cs, Spawner: &recordingSpawner{},
		Core:     CoreConfig{Roles: []string{"story"}, NoCheckpoints: true, MaxActive: 1},
		OnChange: func(_ string, tasks []Task) { changed = append(changed, tasks) }})
	require.NoError(t, err)
	specs := make([]TaskSpec, 1000)
	for i := range specs {
		specs[i] = TaskSpec{Subject: fmt.Sprintf("S%d", i), Role: "story"}
	}
	_, err = rt.Create(ctx, "team", "", "team", specs)
	require.NoError(t, err)
	assert.Equal(t, []int{1001}, cs.ops, "created: the session and every task")
	require.Len(t, changed, 1)
	assert.Len(t, changed[0], 1000)

	cs.ops, changed = nil, nil
	res, err := rt.Step(ctx, "team", WakeUp{Handler: HandleSpawnNext})
	require.NoError(t, err)
	assert.Equal(t, []string{"S0"}, res.Spawned)
	assert.Equal(t, 999, res.HeldCount)
	assert.Len(t, res.Held, MaxHeldListed)
	assert.Equal(t, []int{2, 1}, cs.ops, "the step: the session and S0; the effects done: the session")
	require.Len(t, changed, 1)
	assert.Equal(t, "S0", changed[0][0].Subject)
	assert.Equal(t, InProgress, changed[0][0].Status)

	a := res.Effects[1].Assignment
	cs.ops = nil
	res, err = rt.Step(ctx, "team", WakeUp{Handler: HandleCallback, Role: "story", Assignment: a, Outcome: OutcomeCompleted})
	require.NoError(t, err)
	assert.Equal(t, []string{"S1"}, res.Spawned)
	assert.Equal(t, []int{3, 1}, cs.ops, "S0 completed and S1 spawned in one write")

	s := stored(t, cs.Store, "team")
	assert.Equal(t, Completed, status(t, s, "S0"))
	assert.Equal(t, InProgress, status(t, s, "S1"))
	assert.Equal(t, Pending, status(t, s, "S2"))
}

// A session stored the way earlier versions stored it, every task inside
// the session record, is read, stepped, and from then on stored the new
// way with nothing lost.
func TestSessionOfTheEarlierFormat(t *testing.T) {
	ctx := context.Background()
	mem := newMemory()
	c := NewCore(CoreConfig{})
	s := newSession(t, c, ModeImplOnly)
	s, _ = handle(t, c, s, WakeUp{Handler: HandleSpawnNext})
	s.Pending = nil
	data, err := json.Marshal(s)
	require.NoError(t, err)
	_, err = mem.Apply(ctx, store.Op{Kind: RecordKind, ID: "s1", Data: data})
	require.NoError(t, err)

	sp := &recordingSpawner{}
	rt := newRuntime(t, mem, sp, nil, nil)
	got, _, err := rt.Load(ctx, "s1")
	require.NoError(t, err)
	assert.Equal(t, s.Graph.Tasks(), got.Graph.Tasks())

	plan, _ := s.Graph.Task("PLAN-001")
	res, err := rt.Step(ctx, "s1", WakeUp{Handler: HandleCallback, Role: plan.Role, Assignment: plan.Assignment, Outcome: OutcomeCompleted})
	require.NoError(t, err)
	assert.Equal(t, []string{"IMPL-001"}, res.Spawned)
	recs, err := mem.List(ctx, TaskRecordKind)
	require.NoError(t, err)
	assert.Len(t, recs, s.Graph.Len(), "every task has its record now")
	back := stored(t, mem, "s1")
	assert.Equal(t, Completed, status(t, back, "PLAN-001"))
	assert.Equal(t, InProgress, status(t, back, "IMPL-001"))
	assert.Equal(t, Pending, status(t, back, "REVIEW-001"))
}

// A runtime that keeps a session in memory notices another runtime's
// write (another process) and reads the session again.
func TestCachedSessionSeesOtherWriters(t *testing.T) {
	ctx := context.Background()
	mem := newMemory()
	a := newRuntime(t, mem, &recordingSpawner{}, nil, nil)
	b := newRuntime(t, mem, &recordingSpawner{}, nil, nil)
	_, err := a.Create(ctx, "s1", "", ModeImplOnly, nil)
	require.NoError(t, err)
	_, err = a.Step(ctx, "s1", WakeUp{Handler: HandleSpawnNext})
	require.NoError(t, err)
	_, err = b.Update(ctx, "s1", TaskUpdate{Task: "REVIEW-001", To: Cancelled})
	require.NoError(t, err)
	res, err := a.Step(ctx, "s1", WakeUp{Handler: HandleCheck})
	require.NoError(t, err)
	rep := res.Effects[0].Details.Report
	require.NotNil(t, rep)
	assert.Contains(t, rep.Text(), "[- REVIEW-001]", "a's step saw b's cancellation")
}
