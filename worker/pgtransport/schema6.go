package pgtransport

// pollPromise is migration 5 -> 6: a host's round notifies the coordinator
// of the rows it finished only when no coordinator's promise to poll
// their queue holds.
//
// A NOTIFY is the dearest part of a busy host's round: PostgreSQL 15 takes
// one lock for the whole cluster at every notifying commit and holds it
// until the commit's WAL is flushed (so notifying commits never share a
// flush, and the hosts' rounds wait for each other: "SELECT waiting"),
// then signals every listening backend of the database. A coordinator
// that hands out work polls anyway: each of its writes records in
// wt_polls, in the same transaction, the time until which it promises to
// read its hosts' finished rows at least every ReadCooldown (it looks
// them up by the ids of its assignments still out), and a round that
// finishes rows of a queue whose promise holds does not notify. Once the
// coordinator stops writing the promise runs out and the rounds notify as
// before; and the coordinator still reads every finished row at every
// PollInterval, so a promise that is not kept (a coordinator that died,
// a host that stalled between its round's check and its commit) costs at
// most one PollInterval, as a lost notification did. Only the host
// functions (as their owner) read wt_polls, and only a coordinator's
// fenced write changes it.
func pollPromise(schema string) string {
	return `CREATE TABLE @.wt_polls (
			queue text COLLATE "C" PRIMARY KEY,
			until timestamptz NOT NULL
		);
		` + roundFunction(schema, 6)
}
