// Package pgstore is a store.Store on PostgreSQL, through pgx, for hosts
// that run coordinators on several machines, and the leader election that
// lets them share it safely: any number of coordinators campaign for a
// lease, one leads at a time, and the lease's term number fences every
// write the leader makes. It lives in its own package so that hosts that
// do not use it do not compile pgx.
//
// # The store
//
// Open takes a connection string and owns its pool; OpenPool uses the
// host's pool. Tables live in one PostgreSQL schema (Options.Schema,
// default "foreman"), so several independent stores can share a database.
// A schema name is a plain identifier ([a-z_][a-z0-9_]{0,62}, not pg_...;
// ValidateSchema, a *SchemaNameError otherwise): it is written into SQL,
// the bodies of dollar-quoted functions included, so anything else is
// refused before a connection is made.
// Records, versions, conflicts and tombstones follow package store exactly
// (the storetest conformance suite runs against a real server): a delete
// moves the record's last version to a tombstones table and a create
// continues from it, so versions never repeat across delete and create.
// Kinds and ids must be text PostgreSQL can hold (valid UTF-8 without NUL;
// anything else is store.ErrInvalidOp), and UpdatedAt keeps microseconds.
//
// Every write goes through one server-side function, apply_batch. Concurrent
// Applies are group-committed: while one call is on its way, later Applies
// queue, and the next call carries up to Options.MaxBatch (64) of them in
// one round trip, one transaction and one WAL flush. Each Apply runs in its
// own subtransaction, so a conflict or a fence undoes that Apply only and
// is reported to its caller alone; should the database refuse the call as
// a whole, each Apply is retried alone. Options.Writers (2) calls may be in
// flight at once, each on its own connection. An Apply that is still queued
// when its context ends is withdrawn; one whose call is under way waits for
// the outcome (at most Options.WriteTimeout) so that it never reports a
// failure for a write that landed. Stats says how many Applies each call
// carried. Writes run under READ COMMITTED, and each statement's WHERE
// clause is the version check, so writers on other hosts never block each
// other except on the same record.
//
// # Schema and migrations
//
// A table foreman_schema holds the schema version (SchemaVersion). Open
// creates the schema in an empty database and migrates an older one
// forward, in one transaction under an advisory lock, so coordinators
// starting together create it once. Version 1 is the records and
// tombstones tables; version 2 adds the leases table and apply_batch. Open
// refuses, without changing anything, a schema from a newer build
// (*SchemaVersionError: upgrade Foreman) and a schema with other tables but
// no foreman_schema (ErrForeignSchema).
//
// # Leadership and fencing
//
// The leases table holds one row per lease: holder, term and expiry.
// TryLead takes a free or expired lease in one statement that raises the
// term by one, or returns a *LeaseHeldError naming the holder; Campaign
// waits until it can take it, trying again when the current lease may have
// run out. The returned Leader renews every LeaseOptions.RenewEvery (TTL/3)
// in a goroutine of its own until Resign, or until it learns it lost the
// lease: its renewal finds a later term, or its own clock says the lease ran
// out before a renewal got through. Then Lost closes and Err says why. A
// leader that stops renewing (killed, paused, cut off) is replaced once
// LeaseOptions.TTL (default 10 s) has passed since its last renewal: a
// campaigning contender waits exactly what the database says the lease has
// left.
//
// Noticing a loss is not what keeps an old leader from doing harm, since a
// paused process notices nothing. Leader.Store (or Store.Fenced for hosts
// with their own election) returns a view of the store whose every Apply
// carries its term: inside the transaction that writes, apply_batch takes
// the lease's advisory lock shared, reads the term and writes only if it is
// still current, else the Apply fails with a *FencedError (errors.Is
// ErrFenced) and writes nothing. A takeover takes that lock exclusively
// before it raises the term, so it waits for fenced writes in flight, and
// every fenced write after it reads the new term: once a new leader holds
// the lease, no write of an older term lands. PostgreSQL queues lock
// requests fairly, so a stream of writes cannot hold a takeover off, and
// renewals do not take the lock, so writes never delay them. Give the fenced
// view to everything that writes coordinator state (pipeline.Runtime and
// the team persist before they act, so an act follows a write that the
// fence checked). A leader whose lease ran out but which nobody replaced
// can still write; that is harmless, since no other leader exists. The
// fence covers the store only: an act the old leader had already decided
// on when it was paused (an effect persisted before the pause) may still
// be carried out once when it wakes, before its next write fails; such
// acts must be idempotent, as the pipeline's effects are, and act-side
// fencing (workers that check the term) is the transport's job.
//
// # Time
//
// Lease expiry is decided by the database's clock (clock_timestamp()),
// the one clock every host shares: a host whose clock is ahead or behind
// can neither steal a live lease nor keep an expired one. This host's clock
// only times renewals and retries and the leader's own view of its expiry,
// as durations measured from when each renewal was sent, so the leader
// gives up no later than the database would let another take over (clocks
// that run at the same rate suffice; their readings need not agree).
// LeaseOptions.Clock replaces both with one clock, which tests use: every
// contender gets a fake clock and a paused leader is one whose clock stands
// still. UpdatedAt comes from Options.Clock (this host's wall clock), as in
// every store.
//
// # Restricted roles
//
// A process that must not be trusted with the store (a worker host, which
// runs agents) connects with a role of its own: GrantOpen lets a role open
// the store (USAGE on the schema, SELECT on the version table) and no
// more, the packages built on the store grant it the SECURITY DEFINER
// functions it calls (worker/pgtransport.GrantWorker,
// pipeline/team/teampg.GrantWorker), and CheckRestricted reports, as a
// *PrivilegeError, whatever else a role can do with the schema's tables.
//
// # Running the tests
//
// The tests need a PostgreSQL server. As root on Debian,
//
//	.ci/with-postgres go test ./pipeline/pgstore/
//
// installs PostgreSQL if missing, starts a throwaway server, runs the
// command with FOREMAN_TEST_POSTGRES set and removes the server afterwards.
// Elsewhere set FOREMAN_TEST_POSTGRES to a database the tests may use (each
// test works in a schema of its own and drops it). Without it the tests
// skip and say so in one line; with CI=true they fail instead.
package pgstore
