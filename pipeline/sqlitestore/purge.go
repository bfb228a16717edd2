package sqlitestore

import (
	"context"
	"math"
	"time"

	"github.com/agentforeman/foreman/pipeline/store"
)

var _ store.TombstonePurger = (*Store)(nil)

// PurgeTombstones implements store.TombstonePurger in one statement (its own
// durable transaction). It scans the tombstones table, which has no index on
// deleted_at: a maintenance call, not one for every transition.
func (s *Store) PurgeTombstones(ctx context.Context, deletedBefore time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	leave, err := s.enter()
	if err != nil {
		return 0, err
	}
	defer leave()
	if s.readOnly {
		return 0, ErrReadOnly
	}
	res, err := s.writer.ExecContext(ctx, `DELETE FROM tombstones WHERE deleted_at < ?`, clampedNanos(deletedBefore))
	if err != nil {
		return 0, s.fail("purge tombstones", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, s.fail("purge tombstones", err)
	}
	return int(n), nil
}

// clampedNanos is t in Unix nanoseconds, saturated where UnixNano is
// undefined (before 1678 or after 2262), so that a cutoff such as the zero
// time purges nothing instead of whatever an overflow gives.
func clampedNanos(t time.Time) int64 {
	switch {
	case t.Before(time.Unix(0, math.MinInt64)):
		return math.MinInt64
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}
