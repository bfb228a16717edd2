// Package teammetrics exposes a team of agents (pipeline/team) to
// Prometheus: what the team and its worker pool did, counted; how long
// stages and stories took, as histograms; and where the plan and the
// workers stand, as gauges read at every scrape. It is a package of its
// own so that a host that does not want Prometheus does not compile it.
//
//	reg := prometheus.NewRegistry()
//	m, err := teammetrics.New(teammetrics.Config{Registerer: reg})
//	m.Instrument(&cfg)        // before team.New: feeds the team's and the worker pool's events
//	t, err := team.New(ctx, cfg)
//	m.Watch(t)                // the gauges read t's status at every scrape
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// The metrics go to the Registerer the host passes; the package keeps no
// global registry.
//
// # Why Prometheus
//
// A team runs in one host process, usually next to its status page on
// 127.0.0.1: a pull endpoint beside the page is all a person or a
// Prometheus server needs, with no collector to run. client_golang is
// small next to OpenTelemetry's SDK and exporters, and its testutil lets
// tests compare exact exposition text. A host on OpenTelemetry can still
// scrape this endpoint with its Prometheus receiver.
//
// # What it counts
//
// From the team's events (Config.OnEvent):
//
//   - foreman_team_events_total{kind}: every event, by kind;
//   - foreman_team_stages_finished_total{role,outcome}: the stages whose
//     worker reported (COMPLETE, GO, NO-GO, PASS, FAIL, ERROR, ...);
//   - foreman_team_merges_total;
//   - foreman_team_merge_conflicts_total{step}: conflicts met at the
//     squash (SQUASH) and at conflict triage's rebase (REBASE);
//   - foreman_team_conflict_triage_total{outcome}: triage's moves, a clean
//     rebase (rebased) or the story back to a builder (rework);
//   - foreman_team_escalations_total{reason}: stories paused for a person,
//     by the escalation's reason (MERGE_CONFLICT, CRASHED, STAGE_ERROR, ...);
//   - foreman_team_tokens_total{role}, foreman_team_cost_usd_total{role}:
//     what the agents reported spending (agentcmd reads Claude's and
//     Codex's usage);
//   - foreman_team_stage_duration_seconds{role,outcome}: from a stage's
//     start to its report (a stage that started before a restart of the
//     host is not timed);
//   - foreman_team_story_duration_seconds{outcome}: from a story's first
//     stage to its merge or pause, also across restarts (the events carry
//     the story's start);
//   - foreman_team_last_event_seq: the last event's sequence number.
//
// From the worker pool's events (Config.Worker.OnEvent), which the team
// does not record: foreman_worker_transitions_total{from,to} (worker
// state transitions), foreman_worker_stale_messages_total,
// foreman_worker_duplicate_messages_total,
// foreman_worker_invalid_messages_total,
// foreman_worker_crashes_total{cause} (dead, lost, failed),
// foreman_worker_stalls_total and foreman_worker_escalations_total{kind}.
//
// Read at scrape time from the watched team (Watch): foreman_team_stories
// {state}, foreman_team_running, foreman_team_spent_tokens,
// foreman_team_spent_cost_usd and foreman_team_refused_attempts (the
// status's totals, over every run: the last counts every attempt of the
// stories' agents and gate checks beyond their assignments that the team
// refused, where foreman_team_events_total{kind="refused"} leaves out an
// assignment's own requests past its tenth), and, while a Run is in
// progress, foreman_worker_workers{state}. A scrape reads the team's
// Summary: counts the team keeps as its stories change, so it costs the
// same whatever the size of the plan.
//
// Counters start at zero with the process, as Prometheus expects; the
// team's own totals (Status.Tokens, the event log) are durable.
package teammetrics
