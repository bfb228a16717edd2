// Package groupcommit is the group-commit queue under Foreman's durable
// stores (pipeline/sqlitestore, pipeline/pgstore): concurrent writers share
// one transaction, and so one fsync or one round trip, without a background
// goroutine or a timer.
//
// Every Submit queues its request. A caller that finds a leader slot free
// (Config.Leaders, default 1) becomes a leader: it takes a batch from the
// head of the queue (oldest first, at most Config.MaxBatch requests and
// Config.MaxWeight of weight, at least one), runs Config.Commit on it, hands
// every caller of the batch its own Result, and then hands its slot to the
// oldest queued caller not yet holding one, or gives the slot up when
// nobody waits. A lone writer therefore commits at once, and under load
// each batch is whatever queued while the previous one committed. A slot
// is good for one batch, and the leader's own request is not always in it
// (the queue is served oldest first, and a batch may be capped): the
// leader then waits for its own outcome like any caller, and may be handed
// a slot again.
//
// # Cancellation
//
// The rules follow from store.Store's contract that an Apply either wrote
// everything and says so or wrote nothing and says why: a caller is never
// told "cancelled" about a write that landed, and no caller's context may
// abort a transaction that carries other callers' writes.
//
//   - Before queueing: a caller whose context has already ended returns its
//     context's error; nothing is queued.
//   - While queued: the caller withdraws its request and returns its
//     context's error at once; the request is never committed.
//   - Taken into a batch whose Commit has not started yet: the leader drops
//     every request whose context has ended just before it calls Commit and
//     answers it with that context's error (nothing of it was written), so
//     a cancellation is honoured as late as it safely can be.
//   - While its batch commits: the caller waits for the outcome, whatever
//     its context says, and gets the truth (written, or not and why).
//     Returning early could report a failure for a write that lands. The
//     wait is bounded by whatever bounds Commit: the context Commit
//     receives carries the leading caller's values but never any caller's
//     cancellation, and the store bounds the transaction itself (pgstore
//     with Options.WriteTimeout, SQLite with its busy timeout).
//   - A leader's own context: a caller whose context ends after it became a
//     leader and took its batch still commits that batch and hands its slot
//     on (others' writes depend on it), then returns its own request's
//     outcome like any caller in the batch. A caller handed a slot whose
//     context has already ended does no work for others: it passes the
//     slot to the next caller at once and withdraws its own request (or,
//     if another leader already took it, waits for its outcome).
//
// Earlier, the two stores each had a queue of their own and differed here:
// sqlitestore dropped cancelled requests at the start of a batch but made a
// cancelled caller lead when the slot reached it; pgstore never dropped
// them (a caller cancelled before its batch started was written anyway) and
// also made a cancelled caller lead. The rules above take the stricter
// choice of each.
//
// # Failures
//
// Commit returns one Result per request of its batch, in order; what a
// failure means for each request (a conflict, a retry alone, a failed
// commit that wrote nothing) is the store's business. Should Commit panic,
// or return the wrong number of results, every caller of the batch gets an
// error matching ErrCommitPanicked (whether the batch was written is then
// unknown), the slot is handed on so that the queue keeps going, and the
// panic goes on up the leader's Submit.
package groupcommit
