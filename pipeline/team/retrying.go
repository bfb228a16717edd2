package team

import (
	"sync"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline"
)

// ProviderRetry is a story's agent CLI waiting to retry a failed call to
// its model API by itself (Claude Code's api_retry: a 429 rate limit, a
// 529 overload, a 5xx). The agent is alive and is not taken for stalled:
// each retry it announces is output, which the worker pool counts as
// progress. It is cleared by the agent's next other output and when the
// stage ends; a limit that outlasts the CLI's own retries ends the run as
// rate-limited, and the worker pool's backoff takes over.
type ProviderRetry struct {
	// Detail is the CLI's latest retry, e.g. "model API 429 rate_limit:
	// retry 3 of 10 in 31s".
	Detail string `json:"detail"`
	// Since is when the first retry of this wait was announced; Retries
	// counts the retries announced since.
	Since   time.Time `json:"since"`
	Retries int       `json:"retries"`
}

// providerRetries holds each running story's ProviderRetry, in memory: it
// describes a process of this host, as it runs.
type providerRetries struct {
	mu sync.Mutex
	m  map[foreman.ItemID]ProviderRetry
}

// observe records ev for item and reports whether it began a new wait.
func (p *providerRetries) observe(item foreman.ItemID, ev phases.StreamEvent, now time.Time) (ProviderRetry, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, waiting := p.m[item]
	switch ev.Kind {
	case phases.StreamRetry:
		if !waiting {
			w.Since = now
		}
		w.Detail = ev.Text
		w.Retries++
		if p.m == nil {
			p.m = map[foreman.ItemID]ProviderRetry{}
		}
		p.m[item] = w
		return w, !waiting
	case phases.StreamStderr:
		// A CLI's diagnostics say nothing about whether the API answered.
	default:
		delete(p.m, item)
	}
	return ProviderRetry{}, false
}

func (p *providerRetries) get(item foreman.ItemID) *ProviderRetry {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w, ok := p.m[item]; ok {
		return &w
	}
	return nil
}

func (p *providerRetries) clear(item foreman.ItemID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, item)
}

// watchRetries passes a stage's agent output on to onEvent, keeping the
// story's ProviderRetry up to date and recording an EventWorker when the
// agent begins waiting for its model API.
func (t *Team) watchRetries(a pipeline.AgentAssignment, onEvent phases.StreamCallback) phases.StreamCallback {
	return func(ev phases.StreamEvent) {
		now := ev.Time
		if now.IsZero() {
			now = t.clk.Now()
		}
		if w, began := t.retries.observe(a.Item, ev, now); began {
			t.events.add(Event{Kind: EventWorker, At: now, Story: a.Item, Stage: a.Stage, Role: t.role(a.Stage),
				Worker: a.Worker, Assignment: a.Assignment, Outcome: "RETRYING",
				Detail: "the agent's CLI is retrying its model API by itself: " + w.Detail})
		}
		if onEvent != nil {
			onEvent(ev)
		}
	}
}
