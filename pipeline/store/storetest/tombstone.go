package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline/store"
)

// tombstoneCases check that versions never repeat for a (kind, id) across
// delete and create: a store that starts a created-again record over at 1
// fails them.
func tombstoneCases() []testCase {
	return []testCase{
		{"StaleWriterAfterDeleteAndRecreateConflicts", func(t *testing.T, s store.Store) {
			stale := mustApply(t, s, put("item", "a", 0, "first life"))[0]
			mustApply(t, s, del("item", "a", stale.Version))
			reborn := mustApply(t, s, put("item", "a", 0, "second life"))[0]
			assertRecord(t, reborn, "item", "a", 2, "second life")

			// A writer that read the first life must not overwrite the second.
			_, err := s.Apply(t.Context(), put("item", "a", stale.Version, "stale write"))
			requireConflict(t, err, "item", "a", 1, 2)
			_, err = s.Apply(t.Context(), del("item", "a", stale.Version))
			requireConflict(t, err, "item", "a", 1, 2)
			assertRecord(t, mustGet(t, s, "item", "a"), "item", "a", 2, "second life")
		}},
		{"VersionsContinueAfterRecreate", func(t *testing.T, s store.Store) {
			mustApply(t, s, put("item", "a", 0, "v1"))
			mustApply(t, s, put("item", "a", 1, "v2"))
			mustApply(t, s, put("item", "a", 2, "v3"))
			mustApply(t, s, del("item", "a", 3))
			assertRecord(t, mustApply(t, s, put("item", "a", 0, "v4"))[0], "item", "a", 4, "v4")
			assertRecord(t, mustApply(t, s, put("item", "a", 4, "v5"))[0], "item", "a", 5, "v5")
			mustApply(t, s, del("item", "a", 5))

			// In a batch, beside other records, in op order.
			recs := mustApply(t, s, put("item", "b", 0, "b1"), put("item", "a", 0, "v6"), put("task", "a", 0, "t1"))
			assertRecord(t, recs[0], "item", "b", 1, "b1")
			assertRecord(t, recs[1], "item", "a", 6, "v6")
			assertRecord(t, recs[2], "task", "a", 1, "t1")
			assertSameRecord(t, recs[1], mustGet(t, s, "item", "a"))
			assertRecord(t, mustApply(t, s, put("item", "a", 6, "v7"))[0], "item", "a", 7, "v7")
		}},
		{"TombstonesAreHidden", func(t *testing.T, s store.Store) {
			mustApply(t, s, put("item", "a", 0, "a1"), put("item", "b", 0, "b1"), put("task", "a", 0, "t1"))
			mustApply(t, s, put("item", "a", 1, "a2"))
			recs := mustApply(t, s, del("item", "a", 2), del("item", "b", 1))
			for _, r := range recs {
				assert.Zero(t, r.Version, "a deleted record is returned with version 0")
				assert.Empty(t, r.Data)
			}
			assertMissing(t, s, "item", "a")
			assertMissing(t, s, "item", "b")
			list, err := s.List(t.Context(), "item")
			require.NoError(t, err)
			assert.Empty(t, list, "a kind with only tombstones lists nothing")
			list, err = s.List(t.Context(), "task")
			require.NoError(t, err)
			require.Len(t, list, 1)
			assertRecord(t, list[0], "task", "a", 1, "t1")

			// To a version check a tombstone is an absent record.
			_, err = s.Apply(t.Context(), put("item", "a", 2, "stale"))
			requireConflict(t, err, "item", "a", 2, 0)
			mustApply(t, s, put("item", "c", 0, "c1"))
			list, err = s.List(t.Context(), "item")
			require.NoError(t, err)
			require.Len(t, list, 1)
			assert.Equal(t, "c", list[0].ID)
		}},
		{"DeleteOfTombstoneConflicts", func(t *testing.T, s store.Store) {
			mustApply(t, s, put("item", "a", 0, "a1"))
			mustApply(t, s, put("item", "a", 1, "a2"))
			mustApply(t, s, del("item", "a", 2))
			for _, v := range []int64{2, 3, 1} {
				_, err := s.Apply(t.Context(), del("item", "a", v))
				requireConflict(t, err, "item", "a", v, 0)
			}
			assertRecord(t, mustApply(t, s, put("item", "a", 0, "a3"))[0], "item", "a", 3, "a3")
		}},
		{"ConflictKeepsTheTombstone", func(t *testing.T, s store.Store) {
			mustApply(t, s, put("item", "a", 0, "a1"), put("item", "b", 0, "b1"))
			mustApply(t, s, del("item", "a", 1))
			// The create of a comes first, so a store that acts op by op has
			// already spent a's tombstone when b's check fails.
			_, err := s.Apply(t.Context(), put("item", "a", 0, "a2"), put("item", "b", 7, "b2"))
			requireConflict(t, err, "item", "b", 7, 1)
			assertMissing(t, s, "item", "a")
			assertRecord(t, mustApply(t, s, put("item", "a", 0, "a2"))[0], "item", "a", 2, "a2")

			// Likewise a delete rolled back leaves no tombstone behind.
			_, err = s.Apply(t.Context(), del("item", "b", 1), put("item", "a", 9, "x"))
			requireConflict(t, err, "item", "a", 9, 2)
			assertRecord(t, mustGet(t, s, "item", "b"), "item", "b", 1, "b1")
			_, err = s.Apply(t.Context(), put("item", "b", 0, "again"))
			requireConflict(t, err, "item", "b", 0, 1)
		}},
		{"PurgeTombstones", purgeTombstones},
	}
}

// purgeTombstones checks TombstonePurger, for stores that implement it. It
// takes its cutoffs from the times Apply returned, so it holds whatever
// clock the store runs on.
func purgeTombstones(t *testing.T, s store.Store) {
	p, ok := s.(store.TombstonePurger)
	if !ok {
		t.Skip("the store does not implement store.TombstonePurger")
	}
	mustApply(t, s, put("item", "a", 0, "a1"), put("item", "live", 0, "l1"))
	mustApply(t, s, put("item", "a", 1, "a2"))
	deleted := mustApply(t, s, del("item", "a", 2))[0].UpdatedAt

	n, err := p.PurgeTombstones(t.Context(), deleted)
	require.NoError(t, err)
	assert.Zero(t, n, "a tombstone deleted at the cutoff is kept")
	n, err = p.PurgeTombstones(t.Context(), time.Time{})
	require.NoError(t, err)
	assert.Zero(t, n, "the zero time purges nothing")

	n, err = p.PurgeTombstones(t.Context(), deleted.Add(time.Nanosecond))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assertMissing(t, s, "item", "a")
	assertRecord(t, mustGet(t, s, "item", "live"), "item", "live", 1, "l1")
	assertRecord(t, mustApply(t, s, put("item", "a", 0, "fresh"))[0], "item", "a", 1, "fresh")

	// A tombstone spent by a create is gone: nothing is left to purge.
	mustApply(t, s, del("item", "live", 1))
	mustApply(t, s, put("item", "live", 0, "l2"))
	n, err = p.PurgeTombstones(t.Context(), time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	assert.Zero(t, n)
	assertRecord(t, mustGet(t, s, "item", "live"), "item", "live", 2, "l2")

	ctx := cancelledContext(t)
	_, err = p.PurgeTombstones(ctx, deleted)
	assert.ErrorIs(t, err, ctx.Err())
	require.NoError(t, s.Close())
	_, err = p.PurgeTombstones(t.Context(), deleted)
	assert.ErrorIs(t, err, store.ErrClosed)
}
