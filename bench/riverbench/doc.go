// Package riverbench measures the PostgreSQL worker transport
// (worker/pgtransport) against river (github.com/riverqueue/river), the
// most used Go job queue on PostgreSQL, on the same database in the same
// run. It is a module of its own so that Foreman never depends on river.
//
// A durable hand-off is one assignment created by a coordinator's
// Dispatcher, claimed by a worker host, completed by its (no-op) agent, and
// its DONE written to the database and delivered back to the Dispatcher.
// River's counterpart is one no-op job inserted, fetched by a river client,
// worked and marked completed in the database. Both keep 64 runs going at
// once: river one client's 64 workers, Foreman 4 worker hosts of 16 (in
// this process with a connection pool each, or as 4 processes: the test
// binary run again), with up to 256 assignments handed out so that a host
// that finishes one claims the next in the same round trip. Run, as root
// on Debian,
//
//	cd bench/riverbench && ../../.ci/with-postgres go test -run '^$' -bench . -benchtime 5000x
//
// or with FOREMAN_TEST_POSTGRES set to a throwaway database; without one
// the benchmarks skip. docs/performance.md keeps the figures.
//
// River runs here with its default settings (FetchCooldown 100 ms,
// FetchPollInterval 1 s), which cap it near MaxWorkers / FetchCooldown:
// about 640 jobs/s at 64 workers. River's own benchmark (cmd/river/riverbench)
// sets FetchCooldown 2 ms and FetchPollInterval 20 ms; so configured it ran
// at 1.0-2.0x Foreman's default rate on the same machine
// (docs/performance.md). A comparison from this benchmark is one against
// river's defaults, and must say so.
package riverbench
