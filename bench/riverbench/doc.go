// Package riverbench measures the PostgreSQL worker transport
// (worker/pgtransport) against river (github.com/riverqueue/river), the
// most used Go job queue on PostgreSQL, on the same database in the same
// run, and the transport with 10,000 remote runs heartbeating. It is a
// module of its own so that Foreman never depends on river.
//
// # Hand-offs (BenchmarkHandoffs)
//
// A durable hand-off is one assignment created by a coordinator's
// Dispatcher, claimed by a worker host, completed by its (no-op) agent, and
// its DONE written to the database and delivered back to the Dispatcher.
// River's counterpart is one no-op job inserted, fetched by a river client,
// worked and marked completed in the database (counted from river's
// subscription, whose completion events river sends after its completer's
// write, as river's own benchmark counts).
//
// At 64 in flight, in two shapes, each run by both. River's benchmark's
// shape, one worker process of 64: Foreman's one host of 64 with the
// default settings as a process of its own (foreman-1x64; the test binary
// run again) against one river client's 64 workers (river-tuned-64). Four
// worker processes of 16: Foreman's default hosts, 4 hosts of 16 as 4
// processes with no linger (foreman-processes-nolinger), against 4 river
// clients of 16 workers as 4 processes, the jobs inserted by an
// insert-only client in this process (river-tuned-4x16). Also: the 4 hosts
// with a 5 ms linger, and in this process (foreman); Foreman's Dispatcher
// hands out up to 256 assignments. At full tilt: Foreman at its best here
// (foreman-best: 4 hosts of 256 in this process, 4,096 handed out, 5 ms
// linger; foreman-best-1024, the earlier rounds' setting: 2 hosts of 128,
// 1,024 handed out) against river's 2,000 workers.
//
// River runs configured as river's own benchmark configures itself
// (cmd/river/riverbench/river_bench.go: FetchCooldown 2 ms,
// FetchPollInterval 20 ms, MaxWorkers 2,000; river-tuned-*), and at its
// defaults (FetchCooldown 100 ms, FetchPollInterval 1 s: river-defaults-64,
// which caps it near 64 / 100 ms = 640 jobs/s); a comparison must say which.
// Every variant reports the CPU time per hand-off of its client processes
// and of the PostgreSQL server's processes (from /proc, run as root; only
// the server under test, not other servers on the machine).
//
// # Heartbeats (BenchmarkHeartbeats)
//
// 10,000 runs that never finish, on simulated remote hosts (pgtransport.Host
// instances, 25 per process in 4 processes by default), each heartbeating
// every 10 s through PostgreSQL to one coordinator: the coordinator's CPU,
// PostgreSQL's CPU, commits, rows updated and WAL bytes per second.
//
// # Running
//
// As root on Debian,
//
//	cd bench/riverbench && ../../.ci/with-postgres go test -run '^$' -bench Handoffs -benchtime 5000x
//	cd bench/riverbench && ../../.ci/with-postgres go test -run '^$' -bench Heartbeats -benchtime 3x
//
// or with FOREMAN_TEST_POSTGRES set to a throwaway database; without one
// the benchmarks skip. docs/performance.md keeps the figures.
// RIVERBENCH_SETUP, RIVERBENCH_READ_COOLDOWN (the coordinator's
// Config.ReadCooldown, e.g. "-1ns" for none), RIVERBENCH_HOSTSTATS,
// RIVERBENCH_HOST_CPUPROFILE (a directory for the host processes' CPU
// profiles) and RIVERBENCH_PGSS (handoff_test.go, pgss_test.go) are aids
// for trying settings, profiling and reading pg_stat_statements.
package riverbench
