package taskgraph

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	foreman "github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/store"
)

var t0 = time.Date(2026, 2, 26, 10, 0, 0, 0, time.UTC)

// newSession creates a session of a standard mode at t0.
func newSession(t testing.TB, c *Core, mode Mode) *Session {
	t.Helper()
	s, err := c.NewSession("s1", mode, nil, t0)
	require.NoError(t, err)
	return s
}

// customSession creates a session from specs.
func customSession(t testing.TB, c *Core, specs ...TaskSpec) *Session {
	t.Helper()
	s, err := c.NewSession("s1", "custom", specs, t0)
	require.NoError(t, err)
	return s
}

// handle runs one wake-up and fails the test on error.
func handle(t testing.TB, c *Core, s *Session, w WakeUp) (*Session, Result) {
	t.Helper()
	if w.At.IsZero() {
		w.At = t0
	}
	n, res, err := c.Handle(s, w)
	require.NoError(t, err)
	return n, res
}

// complete marks task done through a fenced callback from its worker.
func complete(t testing.TB, c *Core, s *Session, task string) (*Session, Result) {
	t.Helper()
	tk, ok := s.Graph.Task(task)
	require.True(t, ok, task)
	return handle(t, c, s, WakeUp{Handler: HandleCallback, Role: tk.Role, Assignment: tk.Assignment, Outcome: OutcomeCompleted})
}

func status(t testing.TB, s *Session, task string) Status {
	t.Helper()
	tk, ok := s.Graph.Task(task)
	require.True(t, ok, task)
	return tk.Status
}

func notes(effects []Effect) []Note {
	var out []Note
	for _, e := range effects {
		out = append(out, e.Note)
	}
	return out
}

func spawns(effects []Effect) []string {
	var out []string
	for _, e := range effects {
		if e.Kind == EffectSpawn {
			out = append(out, e.Task)
		}
	}
	return out
}

// recordingSpawner records spawns, ignoring repeats of an assignment as
// the Spawner contract requires.
type recordingSpawner struct {
	mu    sync.Mutex
	calls []SpawnRequest
	seen  map[foreman.AssignmentID]bool
	fail  error
}

func (r *recordingSpawner) Spawn(_ context.Context, req SpawnRequest) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, req)
	if r.fail != nil {
		return r.fail
	}
	if r.seen == nil {
		r.seen = map[foreman.AssignmentID]bool{}
	}
	r.seen[req.Assignment] = true
	return nil
}

func (r *recordingSpawner) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

func newMemory() store.Store { return store.NewMemory(store.MemoryOptions{}) }
