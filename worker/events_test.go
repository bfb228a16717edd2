package worker_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/worker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type transportFunc func(ctx context.Context, c worker.Command) error

func (f transportFunc) Send(ctx context.Context, c worker.Command) error { return f(ctx, c) }

// Every defined event is emitted by some real path: drive the Dispatcher
// (and, for the agent events, its Runtime) along each path, record what it
// emits, and compare with the full list.
func TestEveryEventIsEmittedByARealPath(t *testing.T) {
	var mu sync.Mutex
	emitted := map[worker.EventKind][]string{}
	record := func(path string) worker.EventHook {
		return func(e worker.Event) {
			mu.Lock()
			defer mu.Unlock()
			emitted[e.Kind] = append(emitted[e.Kind], path)
		}
	}
	// harnessPath runs steps on a harness whose events are recorded.
	harnessPath := func(name string, cfg worker.Config, steps func(h *harness)) {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, cfg)
			steps(h)
			require.NoError(t, h.d.Close())
			hook := record(name)
			h.mu.Lock()
			defer h.mu.Unlock()
			for _, e := range h.events {
				hook(e)
			}
		})
	}

	harnessPath("review, fencing and progress", worker.Config{MaxWorkers: 1}, func(h *harness) {
		h.submit(reviewItem("story-a"))
		a := h.lastAssign()
		hb := msg(worker.MsgHeartbeat, a)
		hb.Commit, hb.Usage = "c0", worker.Usage{Tokens: 10}
		h.deliver(hb)
		hb.Commit = "c1"
		h.deliver(hb)
		qg := msg(worker.MsgQGResult, a)
		qg.QGOutput = "FAIL"
		h.deliver(qg)
		h.review(h.reachReview(a), false, "again")
		b := h.lastAssign()
		require.Equal(t, worker.Stale, h.deliver(msg(worker.MsgHeartbeat, a)))
		require.Equal(t, worker.Invalid, h.deliver(worker.Message{Kind: 99, Worker: b.Worker, Assignment: b.ID}))
		h.reachReview(b)
		require.Equal(t, worker.Duplicate, h.deliver(msg(worker.MsgReadyForReview, b)))
		h.review(h.worker(b.Worker), true, "")
	})
	harnessPath("agent failed", worker.Config{MaxWorkers: 1}, func(h *harness) {
		h.submit(item("story-a"))
		h.deliver(msg(worker.MsgFailed, h.lastAssign()))
	})
	harnessPath("silent, probe answered", worker.Config{MaxWorkers: 1}, func(h *harness) {
		h.submit(item("story-a"))
		h.clk.Advance(45 * time.Second)
		h.deliver(msg(worker.MsgStatus, h.lastAssign()))
	})
	harnessPath("silent, probe unanswered, item closed", worker.Config{MaxWorkers: 1, ItemChecker: closedBoard{}}, func(h *harness) {
		h.submit(item("story-a"))
		h.clk.Advance(45*time.Second + 2*time.Minute)
	})
	harnessPath("stalled", worker.Config{MaxWorkers: 1}, func(h *harness) {
		h.submit(item("story-a"))
		h.heartbeatFor(h.lastAssign(), 15*time.Minute)
	})

	harnessPath("rate limited, retried", worker.Config{MaxWorkers: 1, RateLimitJitter: -1}, func(h *harness) {
		h.submit(item("story-a"))
		m := msg(worker.MsgRateLimited, h.lastAssign())
		m.ResetsAt = t0.Add(10 * time.Minute)
		h.deliver(m)
		h.clk.Advance(10 * time.Minute)
	})
	harnessPath("waiting for a person", worker.Config{MaxWorkers: 1}, func(h *harness) {
		h.submit(item("story-a"))
		m := msg(worker.MsgNeedsPerson, h.lastAssign())
		m.Question = "Keep the old table?"
		h.deliver(m)
	})
	harnessPath("slow worker", worker.Config{MaxWorkers: 1, LivenessTimeout: -1,
		Evidence: evidenceFunc(func() worker.Evidence { return worker.Evidence{OutputLines: 3} })}, func(h *harness) {
		h.submit(item("story-a"))
		h.clk.Advance(15 * time.Minute)
	})

	t.Run("unreachable worker, escalation refused", func(t *testing.T) {
		clk := foreman.NewFakeClock(t0)
		var assigned []worker.Assignment
		tr := transportFunc(func(_ context.Context, c worker.Command) error {
			if c.Kind == worker.CommandAssign {
				assigned = append(assigned, *c.Assign)
				if c.Worker == "w1" {
					return errors.New("connection refused")
				}
			}
			return nil
		})
		refuse := worker.EscalatorFunc(func(context.Context, worker.Escalation) error { return errors.New("pager down") })
		d, err := worker.New(worker.Config{MaxWorkers: 2, CrashBudget: -1, Transport: tr, Escalator: refuse, Clock: clk,
			OnEvent: record("unreachable worker, escalation refused")})
		require.NoError(t, err)
		require.NoError(t, d.Submit(context.Background(), item("story-a")))
		require.Len(t, assigned, 2)
		a := assigned[1]
		_, err = d.Deliver(context.Background(), worker.Message{Kind: worker.MsgFailed, Worker: a.Worker, Assignment: a.ID})
		require.NoError(t, err)
		require.NoError(t, d.Close())
	})

	t.Run("runtime", func(t *testing.T) {
		done := make(chan struct{})
		agent := worker.AgentFunc(func(context.Context, phases.AgentRequest, phases.StreamCallback) (phases.AgentResult, error) {
			return phases.AgentResult{Success: true}, nil
		})
		hook := record("runtime")
		d, err := worker.New(worker.Config{MaxWorkers: 1, Agent: agent, Commits: worker.NoCommits, Clock: foreman.NewFakeClock(t0),
			OnEvent: func(e worker.Event) {
				hook(e)
				if e.Kind == worker.EventCompleted {
					close(done)
				}
			}})
		require.NoError(t, err)
		require.NoError(t, d.Submit(context.Background(), item("story-a")))
		<-done
		require.NoError(t, d.Close())
	})

	mu.Lock()
	defer mu.Unlock()
	for _, k := range worker.AllEvents() {
		assert.NotEmpty(t, emitted[k], "%s is never emitted", k)
	}
	assert.Len(t, emitted, len(worker.AllEvents()), "only defined events are emitted")
}

// AllEvents is the full list: every EventKind constant declared in the
// package's non-test source files is in it, once.
func TestAllEventsListsEveryDeclaredEventKind(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var declared []string
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "EventKind" {
					for _, n := range vs.Names {
						declared = append(declared, n.Name)
					}
				}
			}
		}
	}
	require.NotEmpty(t, declared)
	values := map[worker.EventKind]bool{}
	for _, k := range worker.AllEvents() {
		assert.False(t, values[k], "%s listed twice", k)
		values[k] = true
	}
	assert.Len(t, worker.AllEvents(), len(declared), "declared: %v", declared)
}
