package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/worker"
)

// within reports whether s's bytes lie inside whole's.
func within(s, whole string) bool {
	if len(s) == 0 || len(whole) == 0 {
		return false
	}
	p, lo := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(whole)))
	return p >= lo && p < lo+uintptr(len(whole))
}

// What ParseAssignment returns is kept (the team's MCP server keeps it
// for every token it issued): a slice of the prompt would keep the whole
// prompt alive with it.
func TestParseAssignmentKeepsNoPartOfThePrompt(t *testing.T) {
	prompt := strings.Repeat("Do the work.\n", 100) + AssignmentBlock(SpawnRequest{Item: "P-1", Stage: 2, Worker: "w1", Assignment: "P-1-a3"})
	a, ok := ParseAssignment(prompt)
	require.True(t, ok)
	assert.Equal(t, AgentAssignment{Item: "P-1", Stage: 2, Worker: "w1", Assignment: "P-1-a3"}, a)
	for _, s := range []string{string(a.Item), string(a.Worker), string(a.Assignment)} {
		assert.False(t, within(s, prompt), "%q is a slice of the prompt", s)
	}
}

// A DispatcherSpawner forgets what a finished assignment no longer needs
// (its request, its report, the prompt through the Dispatcher's item)
// and keeps its id: a spawn issued again is still a no-op, and its probe
// is still answered at once with EventProbeTimeout.
func TestDispatcherSpawnerForgetsFinishedAssignments(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var runs atomic.Int64
	agent := worker.AgentFunc(func(ctx context.Context, req phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
		runs.Add(1)
		a, _ := ParseAssignment(req.TaskPrompt)
		return phases.AgentResult{Success: true, Result: reportLine(a.Item, a.Stage, Pass)}, nil
	})
	events := make(chan Event, 64)
	ds, err := NewDispatcherSpawner(DispatcherSpawnerConfig{Worker: worker.Config{Agent: agent, Commits: worker.NoCommits,
		Clock: foreman.NewFakeClock(t0), LivenessTimeout: -1, ProgressTimeout: -1}, Inbox: recordingInbox{events: events},
		Workspace: func(foreman.ItemID) (string, error) { return t.TempDir(), nil }})
	require.NoError(t, err)
	defer func() { assert.NoError(t, ds.Close()) }()
	const n = 20
	req := func(i int) SpawnRequest {
		return SpawnRequest{Item: foreman.ItemID(fmt.Sprintf("P-%d", i)), Stage: 1, Worker: foreman.WorkerID(fmt.Sprintf("w%d", i)),
			Assignment: foreman.AssignmentID(fmt.Sprintf("P-%d-a1", i))}
	}
	next := func(what string) Event {
		t.Helper()
		select {
		case ev := <-events:
			return ev
		case <-ctx.Done():
			t.Fatalf("waiting for %s", what)
			return Event{}
		}
	}
	for i := range n {
		require.NoError(t, ds.Spawn(ctx, req(i)))
	}
	for range n {
		ev := next("a report")
		assert.Equal(t, EventReport, ev.Kind, "%+v", ev)
	}
	ds.mu.Lock()
	held, ended := ds.spawns.Len()
	ds.mu.Unlock()
	assert.Zero(t, held, "requests of finished assignments still held")
	assert.Equal(t, n, ended)
	for i := range n {
		_, ok := ds.Dispatcher().Item(foreman.ItemID(req(i).Assignment))
		assert.False(t, ok, "the Dispatcher still holds %s", req(i).Assignment)
	}

	// A spawn issued again runs nothing; the probe of a finished
	// assignment times out at once.
	require.NoError(t, ds.Spawn(ctx, req(3)))
	require.NoError(t, ds.Send(ctx, Outgoing{Kind: EffectProbe, Item: "P-3", Worker: "w3", Assignment: "P-3-a1", Stage: 1}))
	assert.Equal(t, Event{Kind: EventProbeTimeout, Worker: "w3", Assignment: "P-3-a1", Stage: 1}, next("the probe's answer"))
	require.NoError(t, ds.Spawn(ctx, req(n)))
	ev := next("the last report")
	assert.Equal(t, EventReport, ev.Kind)
	assert.Equal(t, foreman.AssignmentID(fmt.Sprintf("P-%d-a1", n)), ev.Assignment)
	assert.Equal(t, int64(n+1), runs.Load(), "a finished assignment ran again")
}

// A parked assignment (its agent failed) is forgotten by the Dispatcher
// too: nobody submits it again.
func TestDispatcherSpawnerHasTheDispatcherForgetParkedAssignments(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	events := make(chan Event, 8)
	agent := worker.AgentFunc(func(ctx context.Context, req phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
		return phases.AgentResult{ExitCode: 1}, errors.New("agent exited 1")
	})
	ds, err := NewDispatcherSpawner(DispatcherSpawnerConfig{Worker: worker.Config{Agent: agent, Commits: worker.NoCommits,
		Clock: foreman.NewFakeClock(t0), LivenessTimeout: -1, ProgressTimeout: -1}, Inbox: recordingInbox{events: events},
		Workspace: func(foreman.ItemID) (string, error) { return t.TempDir(), nil }})
	require.NoError(t, err)
	require.NoError(t, ds.Spawn(ctx, SpawnRequest{Item: "P-1", Stage: 2, Worker: "w1", Assignment: "P-1-a1"}))
	select {
	case ev := <-events:
		assert.Equal(t, EventIdle, ev.Kind)
	case <-ctx.Done():
		t.Fatal("no EventIdle for the parked assignment")
	}
	require.NoError(t, ds.Close()) // waits for the spawner's goroutines
	_, held := ds.Dispatcher().Item("P-1-a1")
	assert.False(t, held, "the Dispatcher still holds the parked assignment")
	st := ds.Dispatcher().Stats()
	assert.Equal(t, uint64(1), st.Parked)
	assert.Equal(t, uint64(1), st.Forgotten)
}
