package pgstore

import (
	"context"
	"time"

	"github.com/agentforeman/foreman/pipeline/store"
)

var _ store.TombstonePurger = (*Store)(nil)

// PurgeTombstones implements store.TombstonePurger in one statement. It
// scans the tombstones table, which has no index on deleted_at: a
// maintenance call, not one for every transition.
func (s *Store) PurgeTombstones(ctx context.Context, deletedBefore time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	leave, err := s.enter()
	if err != nil {
		return 0, err
	}
	defer leave()
	tag, err := s.pool.Exec(ctx, s.sql.purge, ceilMicrosecond(deletedBefore))
	if err != nil {
		return 0, s.fail("purge tombstones", err)
	}
	return int(tag.RowsAffected()), nil
}

// ceilMicrosecond rounds t up to PostgreSQL's microseconds: deletion times
// are stored in whole microseconds, so "deleted before t" is "deleted
// before t rounded up", where rounding down would miss those deleted in
// t's own microsecond but before t.
func ceilMicrosecond(t time.Time) time.Time {
	down := t.Truncate(time.Microsecond)
	if down.Equal(t) {
		return t
	}
	return down.Add(time.Microsecond)
}
