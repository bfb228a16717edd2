package phases_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
)

func startTime() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

func gatePlan() phases.GatePlan {
	return phases.GatePlan{Levels: []phases.GateLevel{
		{Level: phases.L0Contracts, Checks: []phases.GateCheck{{Name: "vet", Argv: []string{"go", "vet", "./..."}}}},
		{Level: phases.L1Tests, Checks: []phases.GateCheck{{Name: "test", Argv: []string{"go", "test", "./..."}}}},
	}}
}

func passReport() phases.VerificationReport {
	return phases.VerificationReport{Passed: true, Levels: []phases.LevelResult{
		{Level: phases.L0Contracts, Passed: true, Checks: []phases.CheckResult{{Name: "vet", Level: phases.L0Contracts, Passed: true}}},
		{Level: phases.L1Tests, Passed: true, Checks: []phases.CheckResult{{Name: "test", Level: phases.L1Tests, Passed: true}}},
	}}
}

// failReport fails L1 with output.
func failReport(output string) phases.VerificationReport {
	return phases.VerificationReport{Passed: false, Levels: []phases.LevelResult{
		{Level: phases.L0Contracts, Passed: true, Checks: []phases.CheckResult{{Name: "vet", Level: phases.L0Contracts, Passed: true}}},
		{Level: phases.L1Tests, Passed: false, Checks: []phases.CheckResult{
			{Name: "test", Level: phases.L1Tests, Passed: false, ExitCode: 1, Output: output}}},
	}}
}

func changedSnapshot(hash string) phases.Snapshot {
	return phases.Snapshot{
		ID: "snap-" + hash, HeadCommit: "head-" + hash, DiffHash: hash,
		Commits: []phases.Commit{{Hash: "c-" + hash, Subject: "change"}},
		Files:   []phases.FileDiff{{Path: "main.go", Status: "M", Insertions: 3, Deletions: 1}},
	}
}

func beforeState() phases.BeforeState {
	return phases.BeforeState{BaseCommit: "base", BaseTree: "base-tree", DirtyFiles: []string{"notes.txt"}, CapturedAt: startTime()}
}

// phaseContext is a context for iteration 1 of run r1 with s as services.
func phaseContext(s phases.PhaseServices) *phases.PhaseContext {
	return &phases.PhaseContext{
		ItemID: foreman.ItemID("item-1"), RunID: "r1", Iteration: 1,
		Task:          phases.TaskSpec{Prompt: "add a feature", GatePlan: gatePlan()},
		WorkspacePath: "/work/space", BeforeState: beforeState(), Services: s,
		Run: phases.RunView{ItemID: "item-1", RunID: "r1", State: phases.StateBuilding, Iteration: 1, MaxIterations: 3},
	}
}

// loggedRecord is one record a logRecorder kept, with its attributes (the
// logger's own included) as key → value.
type loggedRecord struct {
	Level   slog.Level
	Message string
	Attrs   map[string]any
}

// logRecorder is a slog.Handler that keeps every record, so that tests can
// check what was logged and at which level.
type logRecorder struct {
	mu      *sync.Mutex
	records *[]loggedRecord
	attrs   []slog.Attr
	group   string
}

// newLogRecorder returns a logger that records into the returned recorder.
func newLogRecorder() (*slog.Logger, *logRecorder) {
	h := &logRecorder{mu: &sync.Mutex{}, records: &[]loggedRecord{}}
	return slog.New(h), h
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := loggedRecord{Level: r.Level, Message: r.Message, Attrs: map[string]any{}}
	add := func(a slog.Attr) { rec.Attrs[h.group+a.Key] = a.Value.Resolve().Any() }
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(func(a slog.Attr) bool { add(a); return true })
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.records = append(*h.records, rec)
	return nil
}

func (h *logRecorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), attrs...)
	return &c
}

func (h *logRecorder) WithGroup(name string) slog.Handler {
	c := *h
	c.group = h.group + name + "."
	return &c
}

// at returns the records logged at level, in order.
func (h *logRecorder) at(level slog.Level) []loggedRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []loggedRecord
	for _, r := range *h.records {
		if r.Level == level {
			out = append(out, r)
		}
	}
	return out
}

// errorMessages lists the messages logged at ERROR, each followed by its
// "error" attribute, for comparison in one assertion.
func (h *logRecorder) errorMessages() []string {
	var out []string
	for _, r := range h.at(slog.LevelError) {
		out = append(out, fmt.Sprintf("%s: %v", r.Message, r.Attrs["error"]))
	}
	return out
}
