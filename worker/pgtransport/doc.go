// Package pgtransport carries the worker pool's commands and messages
// through PostgreSQL, so that the Dispatcher runs in a coordinator process
// and its workers run in worker host processes on other machines. It is a
// worker.Transport (Coordinator) and the process that serves it (Host); it
// lives in its own package so that hosts that do not use it do not compile
// pgx.
//
// # Coordinator and hosts
//
// The coordinator (the process that leads, see pgstore's leadership) makes
// a Coordinator with its pgstore.Store and Leader, gives it to
// worker.Config.Transport and calls Start with the Dispatcher. Every ASSIGN
// becomes a row in the queue (Config.Queue); any Host serving that queue,
// in any process on any machine, claims it with FOR UPDATE SKIP LOCKED (so
// hosts never wait for one another and never take the same row), runs it
// in a worker.Runtime exactly as a single process would (the agent, its
// heartbeats, probe answers, quality gate and outcome), and writes the
// Runtime's messages back; the Coordinator delivers them to the Dispatcher
// in the order they were written. PROBE, KILL, RESET and SHUTDOWN reach
// the host that claimed the assignment; a KILL, RESET or SHUTDOWN also
// withdraws an assignment nobody has claimed yet.
//
// How much runs at once is the smaller of two numbers: the Dispatcher's
// worker.Config.MaxWorkers (its default is 4) bounds how many assignments
// are out across every host, and each host's HostConfig.Capacity how many
// of them it runs. Give the Dispatcher at least the hosts' total Capacity
// (the benchmark gives it four times as much, so a host's next claims are
// waiting when its runs end); with the default, four hosts of 64 run 4.
//
// # Cost
//
// Send does not wait: one writer writes queued commands in order, many per
// transaction (Flush waits for them). A host does everything in one round
// trip per round, one call of one function: the messages its runs sent
// since the last round, the heartbeats of all its runs in one UPDATE (a
// heartbeat changes the assignment's row in place, a HOT update that
// writes no index entry), the commands waiting for it, and new claims up
// to its Capacity. A busy host starts a round at most every
// HostConfig.Cooldown (5 ms) while its runs may still send something, so
// that one round, one commit, carries many runs' messages and claims; an
// idle host, or one whose runs have all reported, goes at once. A
// hand-off writes one row: the ASSIGN inserts it, the claim and the
// final message update it (the latter a HOT update), and the coordinator
// deletes it once it delivered the message, in the transaction of its
// next write (only messages that are not final, such as a probe's
// answer, take rows of their own); the host's notification names the
// rows it finished, so the coordinator reads them by primary key, in a
// read-only transaction, at most every Config.ReadCooldown (5 ms) however
// many hosts notify it. Messages and assignments are JSON without their
// zero fields. So the database sees one statement
// per host per PollInterval for heartbeats however many runs each host
// has, and the coordinator reads new heartbeats with one indexed query per
// PollInterval. LISTEN/NOTIFY wakes hosts for new work and commands and the
// coordinator for new messages; polling every PollInterval is the fallback
// (a lost notification or connection costs at most one interval), and
// NoListen turns notifications off. Notifications are dear in PostgreSQL
// 15 (every notifying commit takes one cluster-wide lock until its WAL is
// flushed, and signals every listening backend of the database), so they
// go only where polling would not do as well: a coordinator that hands
// out work promises, in each write, to poll its hosts' finished rows
// every ReadCooldown for a while, and a host's round that finishes rows
// under that promise does not notify (HostStats.Notifies counts the
// notifications) but records their ids in one wt_done row, in the same
// statement, which the coordinator's polls read with one index range scan
// (a poll costs what finished since the last one, not what is out, so the
// promise holds however many assignments are out); a host whose runs'
// messages start its rounds close together stops listening (UNLISTEN)
// until it goes quiet for four cooldowns, taking new work and commands
// in those rounds (HostStats.Unlistens). HostConfig.Linger lets a host gather
// its runs' messages a few milliseconds longer, for many short runs on a
// busy database; docs/performance.md compares the durable hand-off rate
// with river's.
//
// # Fencing
//
// The assignment id fences every message across processes: a host writes
// a message only while the assignment's row is claimed by that host (its
// name and its database role), in the same statement, and a final message
// (DONE, READY_FOR_REVIEW, FAILED, RATE_LIMITED, NEEDS_PERSON) is written
// into that row, which the same UPDATE turns from claimed to finished: it
// takes no more messages or heartbeats, and a KILL finds nothing to stop.
// So a late DONE of a withdrawn assignment, a second final message, or a
// message from a host that does not hold it, is never written
// (HostStats.Dropped counts them), and the Dispatcher fences what is
// written as it always does. A host learns that an assignment was
// withdrawn from the KILL or, should that be lost, from its next
// heartbeat, and stops the run.
//
// The coordinator's writes are fenced by its lease term: every transaction
// it writes first takes the lease's lock shared and checks the term
// (pgstore.Store.FenceSQL, the same check as the store's fenced writes), so
// once another coordinator holds the lease, no ASSIGN or command of the old
// one lands. It learns at its next write (Flush, Err, and every later Send
// return pgstore.ErrFenced), or at once when its Leader knows it lost the
// lease. A new term's NewCoordinator withdraws every assignment earlier
// terms left in its queue and kills their runs: the new leader starts from
// its own state, as a restarted single process does.
//
// Delivery is at least once: a message (or a finished assignment's row,
// which holds its final message) is deleted after it was delivered (a
// finished row by the coordinator's next write or full read, in the
// meantime never delivered again), so a coordinator that dies in between,
// or whose term ends (its deletions are fenced, as every write is), hands
// it to its successor, whose Dispatcher ignores it as stale. A host that
// stops (Run's context ends)
// kills its runs and reports each unfinished one FAILED so the coordinator
// requeues it at once; a host that dies without a word is noticed by the
// Dispatcher's liveness deadline and probe, as a crashed worker is.
//
// # Building on it
//
// HostConfig.Prepare runs before each assignment and may change it (a host
// on another machine makes its own worktree: clone or fetch the shared
// remote, check out the base); HostConfig.Report sees each final message
// before it is written and may turn DONE into FAILED (push the item's
// branch first). Config.Queue separates pools of hosts (one queue per kind
// of worker, or per team).
//
// # Worker hosts' database role
//
// A worker host runs agents, which may be hostile, so it should not log
// in with the coordinators' role, which can write everything (the store's
// records, the leader's lease). A host does all its work through
// SECURITY DEFINER functions (wt_host_round, which does a round in one
// call, and wt_claim, wt_host_write, wt_heartbeats and wt_take_commands,
// each one part of it), and GrantWorker gives a role of its own exactly that:
// EXECUTE on them, USAGE on the schema and SELECT on the version tables,
// no privilege on any table. Each claim records the role the host logged
// in with (session_user) beside the host's name; a host's every later
// write is joined to claims of its own role, and naming another role's
// claim, or writing a message that names another assignment than the one
// it is written for, is refused with SQLSTATE 42501. So a worker role
// cannot write the coordinators' records, the lease, another role's
// claims, messages or commands, or create anything; CheckWorker tells a
// host whether its role can do more. Hosts that share a role can act for
// each other's claims: give each machine a login role of its own when
// that matters (members of one group role that GrantWorker granted).
// What a worker role can still do is deny service: claim work and sit on
// it (the coordinator's silence deadline ends that), or take advisory
// locks and send notifications, which PostgreSQL allows every role.
//
// # Tables
//
// The transport keeps its tables (wt_assignments, wt_commands,
// wt_messages, wt_polls and the unlogged wt_done), the host functions and a version table (transport_schema,
// at SchemaVersion) in the store's PostgreSQL schema; NewCoordinator and NewHost
// create or migrate them (and the store's own schema) under an advisory
// lock. Tables at this build's version are only read, so a worker role
// opens them; one that finds them older fails with ErrNotMigrated until a
// coordinator of this build has migrated them.
//
// # Running the tests
//
// As root on Debian, `.ci/with-postgres go test ./worker/pgtransport/`
// installs and starts a throwaway PostgreSQL for the tests; elsewhere set
// FOREMAN_TEST_POSTGRES to a database they may use. Without it they skip
// with one line; with CI=true they fail instead. The tests run the
// transport conformance suite (worker/transporttest) that the in-process
// Runtime also passes, and start worker hosts as real subprocesses.
package pgtransport
