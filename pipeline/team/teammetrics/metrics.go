package teammetrics

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/worker"
)

// DefaultNamespace prefixes every metric's name unless Config.Namespace
// says otherwise.
const DefaultNamespace = "foreman"

// DefaultStatusTimeout bounds the status read of one scrape.
const DefaultStatusTimeout = 10 * time.Second

// DefaultStageBuckets and DefaultStoryBuckets return the histograms'
// default bucket bounds, in seconds: an agent's stage takes seconds to
// an hour, a story minutes to a day.
func DefaultStageBuckets() []float64 {
	return []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200}
}

func DefaultStoryBuckets() []float64 {
	return []float64{30, 60, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800, 86400}
}

// ErrInvalidConfig is matched by New's error for a Config it refuses.
var ErrInvalidConfig = errors.New("teammetrics: invalid config")

// Config configures Metrics. Registerer is required; the zero value of
// every other field means its documented default.
type Config struct {
	// Registerer receives the metrics' collectors: the host's own registry
	// (prometheus.NewRegistry()), never a global one unless the host
	// passes it (prometheus.DefaultRegisterer). Required.
	Registerer prometheus.Registerer
	// Namespace prefixes every metric's name. Default: "foreman"
	// (DefaultNamespace).
	Namespace string
	// StageBuckets and StoryBuckets are the stage- and story-duration
	// histograms' bucket bounds in seconds. Default: DefaultStageBuckets()
	// and DefaultStoryBuckets().
	StageBuckets, StoryBuckets []float64
	// StatusTimeout bounds the status read a scrape makes for the gauges
	// of a watched team; negative is an error. Default: 10 s
	// (DefaultStatusTimeout).
	StatusTimeout time.Duration
}

// Metrics turns a team's events, its worker pool's events and its status
// into Prometheus metrics. Create it with New, give it the events
// (Instrument, or ObserveEvent and ObserveWorkerEvent) and, for the
// gauges, the team (Watch). Safe for concurrent use.
type Metrics struct {
	cfg Config

	events          *prometheus.CounterVec
	stagesFinished  *prometheus.CounterVec
	merges          prometheus.Counter
	conflicts       *prometheus.CounterVec
	triage          *prometheus.CounterVec
	escalations     *prometheus.CounterVec
	tokens          *prometheus.CounterVec
	cost            *prometheus.CounterVec
	stageDuration   *prometheus.HistogramVec
	storyDuration   *prometheus.HistogramVec
	lastSeq         prometheus.Gauge
	transitions     *prometheus.CounterVec
	stale           prometheus.Counter
	duplicate       prometheus.Counter
	invalid         prometheus.Counter
	crashes         *prometheus.CounterVec
	stalls          prometheus.Counter
	poolEscalations *prometheus.CounterVec

	gauges *statusCollector

	mu sync.Mutex
	// stage is each story's stage in progress: one at a time per story,
	// so the map is bounded by the plan.
	stage map[foreman.ItemID]stageStart
}

type stageStart struct {
	assignment foreman.AssignmentID
	at         time.Time
}

// New makes the metrics and registers them with cfg.Registerer; a metric
// already registered there (a second Metrics on one registry without
// another Namespace) is an error.
func New(cfg Config) (*Metrics, error) {
	if cfg.Registerer == nil {
		return nil, fmt.Errorf("%w: Registerer is required (prometheus.NewRegistry() makes one)", ErrInvalidConfig)
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if cfg.StageBuckets == nil {
		cfg.StageBuckets = DefaultStageBuckets()
	}
	if cfg.StoryBuckets == nil {
		cfg.StoryBuckets = DefaultStoryBuckets()
	}
	if cfg.StatusTimeout < 0 {
		return nil, fmt.Errorf("%w: StatusTimeout %s is negative", ErrInvalidConfig, cfg.StatusTimeout)
	}
	if cfg.StatusTimeout == 0 {
		cfg.StatusTimeout = DefaultStatusTimeout
	}
	ns := cfg.Namespace
	counter := func(sub, name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help})
	}
	counterVec := func(sub, name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help}, labels)
	}
	m := &Metrics{
		cfg:            cfg,
		stage:          map[foreman.ItemID]stageStart{},
		events:         counterVec("team", "events_total", "Events the team recorded, by kind (story_added, stage_started, stage_finished, gates, story_merged, story_paused, ...).", "kind"),
		stagesFinished: counterVec("team", "stages_finished_total", "Stages whose worker reported, by role and outcome (COMPLETE, GO, NO-GO, PASS, FAIL, ERROR, ...).", "role", "outcome"),
		merges:         counter("team", "merges_total", "Stories squash-merged onto the target branch."),
		conflicts:      counterVec("team", "merge_conflicts_total", "Merge conflicts met, by step: SQUASH (the squash onto the target), REBASE (conflict triage's rebase onto it).", "step"),
		triage:         counterVec("team", "conflict_triage_total", "Conflict triage's moves: rebased (cleanly, gated again), rework (back to a builder with the conflict).", "outcome"),
		escalations:    counterVec("team", "escalations_total", "Stories paused for a person, by the escalation's reason (MERGE_CONFLICT, CRASHED, STAGE_ERROR, RETRIES_EXHAUSTED, ...).", "reason"),
		tokens:         counterVec("team", "tokens_total", "Tokens the agents reported spending, by the role of the stage.", "role"),
		cost:           counterVec("team", "cost_usd_total", "Money (US dollars) the agents reported spending, by the role of the stage.", "role"),
		stageDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: "team", Name: "stage_duration_seconds",
			Help: "From a stage's start to its worker's report, by role and outcome.", Buckets: cfg.StageBuckets}, []string{"role", "outcome"}),
		storyDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: "team", Name: "story_duration_seconds",
			Help: "From a story's first stage to its merge or pause (outcome merged or paused).", Buckets: cfg.StoryBuckets}, []string{"outcome"}),
		lastSeq:         prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: "team", Name: "last_event_seq", Help: "Sequence number of the last event seen."}),
		transitions:     counterVec("worker", "transitions_total", "Worker state transitions in the worker pool, by from and to state.", "from", "to"),
		stale:           counter("worker", "stale_messages_total", "Worker messages ignored as stale (an assignment that is no longer the worker's)."),
		duplicate:       counter("worker", "duplicate_messages_total", "Worker messages ignored as duplicates of one already handled."),
		invalid:         counter("worker", "invalid_messages_total", "Worker messages refused as invalid."),
		crashes:         counterVec("worker", "crashes_total", "Workers that crashed, by cause: dead (silent, its probe unanswered), lost (unreachable), failed (its agent failed).", "cause"),
		stalls:          counter("worker", "stalls_total", "Workers stopped for making no progress."),
		poolEscalations: counterVec("worker", "escalations_total", "Escalations the worker pool raised, by kind.", "kind"),
	}
	m.gauges = newStatusCollector(ns, cfg.StatusTimeout)
	for _, c := range []prometheus.Collector{m.events, m.stagesFinished, m.merges, m.conflicts, m.triage, m.escalations, m.tokens, m.cost,
		m.stageDuration, m.storyDuration, m.lastSeq, m.transitions, m.stale, m.duplicate, m.invalid, m.crashes, m.stalls,
		m.poolEscalations, m.gauges} {
		if err := cfg.Registerer.Register(c); err != nil {
			return nil, fmt.Errorf("teammetrics: registering: %w", err)
		}
	}
	return m, nil
}

// Instrument sets cfg's event hooks (OnEvent and Worker.OnEvent) to feed
// m, calling the hooks cfg already had first. Call it before team.New.
func (m *Metrics) Instrument(cfg *team.Config) {
	if prev := cfg.OnEvent; prev != nil {
		cfg.OnEvent = func(e team.Event) { prev(e); m.ObserveEvent(e) }
	} else {
		cfg.OnEvent = m.ObserveEvent
	}
	if prev := cfg.Worker.OnEvent; prev != nil {
		cfg.Worker.OnEvent = func(e worker.Event) { prev(e); m.ObserveWorkerEvent(e) }
	} else {
		cfg.Worker.OnEvent = m.ObserveWorkerEvent
	}
}

// Watch makes the gauges report t at every scrape: its stories by state,
// whether it runs, and its worker pool's workers by state. A Metrics
// watches one team; Watch again replaces it.
func (m *Metrics) Watch(t *team.Team) { m.gauges.team.Store(t) }

// ObserveEvent counts one of the team's events. It never blocks.
func (m *Metrics) ObserveEvent(e team.Event) {
	m.events.WithLabelValues(string(e.Kind)).Inc()
	if e.Seq > 0 {
		m.lastSeq.Set(float64(e.Seq))
	}
	switch e.Kind {
	case team.EventStageStarted:
		m.mu.Lock()
		m.stage[e.Story] = stageStart{assignment: e.Assignment, at: e.At}
		m.mu.Unlock()
	case team.EventStageFinished:
		outcome := string(e.Outcome)
		m.stagesFinished.WithLabelValues(e.Role, outcome).Inc()
		m.mu.Lock()
		s, ok := m.stage[e.Story]
		if ok && s.assignment == e.Assignment {
			delete(m.stage, e.Story)
		}
		m.mu.Unlock()
		// A stage started before this process (a restart) has no start
		// here: its duration is unknown, not zero.
		if ok && s.assignment == e.Assignment && !e.At.Before(s.at) {
			m.stageDuration.WithLabelValues(e.Role, outcome).Observe(e.At.Sub(s.at).Seconds())
		}
	case team.EventStoryMerged:
		m.merges.Inc()
		m.storyEnded(e, "merged")
	case team.EventStoryPaused:
		reason := "UNKNOWN"
		if e.Escalation != nil {
			reason = string(e.Escalation.Reason)
		}
		m.escalations.WithLabelValues(reason).Inc()
		m.storyEnded(e, "paused")
	case team.EventConflict:
		step := string(e.Outcome)
		if step == "" {
			step = "UNKNOWN"
		}
		m.conflicts.WithLabelValues(step).Inc()
	case team.EventRebased:
		m.triage.WithLabelValues("rebased").Inc()
	case team.EventConflictRework:
		m.triage.WithLabelValues("rework").Inc()
	case team.EventUsage:
		m.tokens.WithLabelValues(e.Role).Add(float64(max(e.Tokens, 0)))
		m.cost.WithLabelValues(e.Role).Add(max(e.CostUSD, 0))
	}
}

func (m *Metrics) storyEnded(e team.Event, outcome string) {
	m.mu.Lock()
	delete(m.stage, e.Story)
	m.mu.Unlock()
	if !e.Started.IsZero() && !e.At.Before(e.Started) {
		m.storyDuration.WithLabelValues(outcome).Observe(e.At.Sub(e.Started).Seconds())
	}
}

// ObserveWorkerEvent counts one of the worker pool's events: state
// transitions, stale, duplicate and invalid messages, crashes, stalls and
// escalations. It never blocks.
func (m *Metrics) ObserveWorkerEvent(e worker.Event) {
	switch e.Kind {
	case worker.EventWorkerState:
		m.transitions.WithLabelValues(e.From.String(), e.To.String()).Inc()
	case worker.EventStale:
		m.stale.Inc()
	case worker.EventDuplicate:
		m.duplicate.Inc()
	case worker.EventInvalid:
		m.invalid.Inc()
	case worker.EventWorkerDead:
		m.crashes.WithLabelValues("dead").Inc()
	case worker.EventWorkerLost:
		m.crashes.WithLabelValues("lost").Inc()
	case worker.EventFailed:
		m.crashes.WithLabelValues("failed").Inc()
	case worker.EventWorkerStalled:
		m.stalls.Inc()
	case worker.EventEscalated:
		kind := "unknown"
		if e.Escalation != nil {
			kind = string(e.Escalation.Kind)
		}
		m.poolEscalations.WithLabelValues(kind).Inc()
	}
}

// statusCollector reads the watched team at scrape time: its stories by
// state (Team.Summary), whether it runs, its workers by state
// (Team.Dispatcher). Reading at scrape time rather than counting events
// keeps the gauges right after a restart of the host.
type statusCollector struct {
	team    atomic.Pointer[team.Team]
	timeout time.Duration

	stories, running, workers, spentTokens, spentCost, refused *prometheus.Desc
}

func newStatusCollector(ns string, timeout time.Duration) *statusCollector {
	name := func(sub, n string) string { return prometheus.BuildFQName(ns, sub, n) }
	return &statusCollector{
		timeout:     timeout,
		stories:     prometheus.NewDesc(name("team", "stories"), "Stories in the plan, by state (pending, running, merged, paused, skipped, abandoned, blocked).", []string{"state"}, nil),
		running:     prometheus.NewDesc(name("team", "running"), "1 while a Run of the team is in progress in this process.", nil, nil),
		workers:     prometheus.NewDesc(name("worker", "workers"), "Workers of the running team's worker pool, by state.", []string{"state"}, nil),
		spentTokens: prometheus.NewDesc(name("team", "spent_tokens"), "Tokens every story's agents have spent, over every run of the team (from its status).", nil, nil),
		spentCost:   prometheus.NewDesc(name("team", "spent_cost_usd"), "Money (US dollars) every story's agents have spent, over every run of the team (from its status).", nil, nil),
		refused: prometheus.NewDesc(name("team", "refused_attempts"), "Attempts of the stories' agents and gate checks beyond their own assignments "+
			"that the team refused, over every run of the team (from its status: every one, where the refused events leave out an assignment's own requests past ten).", nil, nil),
	}
}

func (c *statusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.stories, c.running, c.workers, c.spentTokens, c.spentCost, c.refused} {
		ch <- d
	}
}

// storyStates and workerStates are reported even when zero, so that a
// state's series does not vanish when its count drops to none.
func storyStates() []team.StoryState {
	return []team.StoryState{team.StoryPending, team.StoryRunning, team.StoryMerged, team.StoryPaused,
		team.StorySkipped, team.StoryAbandoned, team.StoryBlocked}
}

func workerStates() []worker.WorkerState {
	return []worker.WorkerState{worker.Idle, worker.Reserved, worker.Busy, worker.Reviewing, worker.ShuttingDown, worker.Stopped}
}

func (c *statusCollector) Collect(ch chan<- prometheus.Metric) {
	t := c.team.Load()
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	// The team's summary: counts kept as the stories change, so a scrape
	// costs the same whatever the size of the plan.
	st, err := t.Summary(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.stories, fmt.Errorf("reading the team's status: %w", err))
	} else {
		for _, s := range storyStates() {
			ch <- prometheus.MustNewConstMetric(c.stories, prometheus.GaugeValue, float64(st.ByState[s]), string(s))
		}
		ch <- prometheus.MustNewConstMetric(c.spentTokens, prometheus.GaugeValue, float64(st.Tokens))
		ch <- prometheus.MustNewConstMetric(c.spentCost, prometheus.GaugeValue, st.CostUSD)
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.GaugeValue, float64(st.Refused))
		running := 0.0
		if st.Running {
			running = 1
		}
		ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, running)
	}
	d := t.Dispatcher()
	if d == nil {
		return
	}
	n := map[worker.WorkerState]int{}
	for _, w := range d.Workers() {
		n[w.State]++
	}
	for _, s := range workerStates() {
		ch <- prometheus.MustNewConstMetric(c.workers, prometheus.GaugeValue, float64(n[s]), s.String())
	}
}
