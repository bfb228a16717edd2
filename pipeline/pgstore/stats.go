package pgstore

import "sync/atomic"

// Stats counts the store's writes since Open.
type Stats struct {
	// Applies is how many Applies with at least one op went to the
	// database (conflicting and fenced ones included).
	Applies int64
	// GroupCommits is how many database calls carried them: Applies /
	// GroupCommits is the average group size.
	GroupCommits int64
	// LargestGroup is the most Applies one group commit carried.
	LargestGroup int64
}

type counters struct {
	applies, groups, largest atomic.Int64
}

func (c *counters) record(applies int) {
	c.applies.Add(int64(applies))
	c.groups.Add(1)
	for {
		cur := c.largest.Load()
		if int64(applies) <= cur || c.largest.CompareAndSwap(cur, int64(applies)) {
			return
		}
	}
}

// Stats returns the write counters.
func (s *Store) Stats() Stats {
	return Stats{Applies: s.stats.applies.Load(), GroupCommits: s.stats.groups.Load(), LargestGroup: s.stats.largest.Load()}
}
