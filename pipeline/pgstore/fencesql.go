package pgstore

import "strings"

// FenceSQL returns the SQL that fences a write outside the store by a lease
// term exactly as FencedStore fences its Applies, for packages that keep
// tables of their own beside the store (the worker transport does). lock
// takes the lease's advisory lock shared until the transaction ends: the
// lock a takeover takes exclusively before it raises the term, so it waits
// for the write. term reads the lease's current term (NULL if the lease row
// is gone). Both name the lease by leaseExpr, an SQL expression such as $1
// or a function parameter.
//
// Run lock first and read term in a later statement (or in a volatile
// function, whose every statement reads the latest committed data), so that
// the term is read after any takeover that held the lock has committed; then
// write only if it equals the writer's term, in the same transaction.
func (s *Store) FenceSQL(leaseExpr string) (lock, term string) {
	lock = sqlFor(s.schema, "pg_advisory_xact_lock_shared(@leaselock("+leaseExpr+"))")
	term = sqlFor(s.schema, "(SELECT l.term FROM @.leases l WHERE l.name = "+leaseExpr+")")
	return lock, strings.TrimSpace(term)
}
