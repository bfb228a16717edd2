package storetest

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline/store"
)

func basicCases() []testCase {
	return []testCase{
		{"CreateThenGet", func(t *testing.T, s store.Store) {
			recs := mustApply(t, s, put("item", "a", 0, `{"stage":0}`))
			assertRecord(t, recs[0], "item", "a", 1, `{"stage":0}`)
			assertSameRecord(t, recs[0], mustGet(t, s, "item", "a"))
		}},
		{"VersionsIncrementByOne", func(t *testing.T, s store.Store) {
			mustApply(t, s, put("item", "a", 0, "v1"))
			for v := int64(1); v < 6; v++ {
				recs := mustApply(t, s, put("item", "a", v, "next"))
				assertRecord(t, recs[0], "item", "a", v+1, "next")
			}
			assertRecord(t, mustGet(t, s, "item", "a"), "item", "a", 6, "next")
		}},
		{"ExpectVersionZeroOnlyCreates", func(t *testing.T, s store.Store) {
			mustApply(t, s, put("item", "a", 0, "first"))
			_, err := s.Apply(t.Context(), put("item", "a", 0, "second"))
			requireConflict(t, err, "item", "a", 0, 1)
			assertRecord(t, mustGet(t, s, "item", "a"), "item", "a", 1, "first")
		}},
		{"UpdateOfMissingRecordConflicts", func(t *testing.T, s store.Store) {
			_, err := s.Apply(t.Context(), put("item", "ghost", 3, "x"))
			requireConflict(t, err, "item", "ghost", 3, 0)
			assertMissing(t, s, "item", "ghost")
		}},
		{"StaleVersionConflicts", func(t *testing.T, s store.Store) {
			mustApply(t, s, put("item", "a", 0, "v1"))
			mustApply(t, s, put("item", "a", 1, "v2"))
			_, err := s.Apply(t.Context(), put("item", "a", 1, "lost"))
			requireConflict(t, err, "item", "a", 1, 2)
			_, err = s.Apply(t.Context(), put("item", "a", 7, "ahead"))
			requireConflict(t, err, "item", "a", 7, 2)
			assertRecord(t, mustGet(t, s, "item", "a"), "item", "a", 2, "v2")
		}},
		{"GetMissingIsNotFound", func(t *testing.T, s store.Store) {
			assertMissing(t, s, "item", "nope")
			mustApply(t, s, put("task", "a", 0, "x"))
			assertMissing(t, s, "item", "a")
			assertMissing(t, s, "", "")
		}},
		{"Delete", func(t *testing.T, s store.Store) {
			mustApply(t, s, put("item", "a", 0, "v1"), put("item", "b", 0, "keep"))
			mustApply(t, s, put("item", "a", 1, "v2"))
			recs := mustApply(t, s, del("item", "a", 2))
			assert.Equal(t, "item", recs[0].Kind)
			assert.Equal(t, "a", recs[0].ID)
			assert.Zero(t, recs[0].Version, "a deleted record is returned with version 0")
			assertMissing(t, s, "item", "a")
			list, err := s.List(t.Context(), "item")
			require.NoError(t, err)
			require.Len(t, list, 1)
			assert.Equal(t, "b", list[0].ID)

			recs = mustApply(t, s, put("item", "a", 0, "reborn"))
			assertRecord(t, recs[0], "item", "a", 3, "reborn")
		}},
		{"DeleteChecksVersion", func(t *testing.T, s store.Store) {
			mustApply(t, s, put("item", "a", 0, "v1"))
			mustApply(t, s, put("item", "a", 1, "v2"))
			_, err := s.Apply(t.Context(), del("item", "a", 1))
			requireConflict(t, err, "item", "a", 1, 2)
			assertRecord(t, mustGet(t, s, "item", "a"), "item", "a", 2, "v2")

			_, err = s.Apply(t.Context(), del("item", "ghost", 1))
			requireConflict(t, err, "item", "ghost", 1, 0)
		}},
		{"UpdatedAtMatchesBetweenApplyAndReads", func(t *testing.T, s store.Store) {
			recs := mustApply(t, s, put("item", "a", 0, "v1"), put("item", "b", 0, "v1"))
			assert.True(t, recs[0].UpdatedAt.Equal(recs[1].UpdatedAt), "one Apply, one time")
			list, err := s.List(t.Context(), "item")
			require.NoError(t, err)
			require.Len(t, list, 2)
			assertSameRecord(t, recs[0], list[0])
			assertSameRecord(t, recs[1], list[1])
		}},
	}
}

func batchCases() []testCase {
	return []testCase{
		{"BatchReturnsRecordsInOpOrder", func(t *testing.T, s store.Store) {
			mustApply(t, s, put("item", "m", 0, "m1"), put("item", "z", 0, "z1"))
			recs := mustApply(t, s,
				put("item", "z", 1, "z2"),
				put("task", "a", 0, "t1"),
				del("item", "m", 1),
				put("item", "b", 0, "b1"),
			)
			assertRecord(t, recs[0], "item", "z", 2, "z2")
			assertRecord(t, recs[1], "task", "a", 1, "t1")
			assert.Equal(t, "m", recs[2].ID)
			assert.Zero(t, recs[2].Version)
			assertRecord(t, recs[3], "item", "b", 1, "b1")
			assertMissing(t, s, "item", "m")
		}},
		{"EmptyApplyWritesNothing", func(t *testing.T, s store.Store) {
			recs, err := s.Apply(t.Context())
			require.NoError(t, err)
			assert.Empty(t, recs)
			list, err := s.List(t.Context(), "item")
			require.NoError(t, err)
			assert.Empty(t, list)
		}},
		{"ConflictWritesNothingOfTheBatch", func(t *testing.T, s store.Store) {
			mustApply(t, s, put("item", "b", 0, "b1"), put("item", "c", 0, "c1"), put("item", "d", 0, "d1"))
			mustApply(t, s, put("item", "c", 1, "c2"))
			valid := []store.Op{put("item", "new", 0, "n"), put("item", "b", 1, "b2"), del("item", "d", 1), put("task", "t", 0, "t")}
			for conflictAt := 0; conflictAt <= len(valid); conflictAt++ {
				ops := slices.Insert(slices.Clone(valid), conflictAt, put("item", "c", 1, "stale"))
				recs, err := s.Apply(t.Context(), ops...)
				requireConflict(t, err, "item", "c", 1, 2)
				assert.Nil(t, recs)
				assertMissing(t, s, "item", "new")
				assertMissing(t, s, "task", "t")
				assertRecord(t, mustGet(t, s, "item", "b"), "item", "b", 1, "b1")
				assertRecord(t, mustGet(t, s, "item", "c"), "item", "c", 2, "c2")
				assertRecord(t, mustGet(t, s, "item", "d"), "item", "d", 1, "d1")
			}
		}},
		{"FirstConflictInOpOrderIsReported", func(t *testing.T, s store.Store) {
			mustApply(t, s, put("item", "a", 0, "a1"), put("item", "b", 0, "b1"))
			_, err := s.Apply(t.Context(), put("item", "b", 5, "x"), put("item", "a", 9, "y"))
			requireConflict(t, err, "item", "b", 5, 1)
		}},
		{"InvalidOpsWriteNothing", func(t *testing.T, s store.Store) {
			mustApply(t, s, put("item", "a", 0, "a1"))
			tests := []struct {
				name string
				ops  []store.Op
			}{
				{"empty kind", []store.Op{put("", "x", 0, "d")}},
				{"empty id", []store.Op{put("item", "", 0, "d")}},
				{"negative version", []store.Op{put("item", "x", -1, "d")}},
				{"delete without version", []store.Op{del("item", "a", 0)}},
				{"create then update", []store.Op{put("item", "x", 0, "d"), put("item", "x", 1, "e")}},
				{"update then delete", []store.Op{put("item", "a", 1, "d"), del("item", "a", 2)}},
				{"same op twice", []store.Op{put("item", "a", 1, "d"), put("item", "a", 1, "d")}},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					ops := append([]store.Op{put("item", "valid", 0, "v")}, tc.ops...)
					recs, err := s.Apply(t.Context(), ops...)
					assert.ErrorIs(t, err, store.ErrInvalidOp)
					assert.NotErrorIs(t, err, store.ErrConflict)
					assert.Nil(t, recs)
					assertMissing(t, s, "item", "valid")
					assertMissing(t, s, "item", "x")
					assertRecord(t, mustGet(t, s, "item", "a"), "item", "a", 1, "a1")
				})
			}
		}},
	}
}
