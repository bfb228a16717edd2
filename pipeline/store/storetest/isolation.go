package storetest

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline/store"
)

func isolationCases() []testCase {
	return []testCase{
		{"DataIsCopiedInAndOut", func(t *testing.T, s store.Store) {
			in := []byte("original")
			recs := mustApply(t, s, store.Op{Kind: "item", ID: "a", Data: in})
			copy(in, "XXXXXXXX")
			copy(recs[0].Data, "YYYYYYYY")

			got := mustGet(t, s, "item", "a")
			assert.Equal(t, "original", string(got.Data))
			copy(got.Data, "ZZZZZZZZ")

			list, err := s.List(t.Context(), "item")
			require.NoError(t, err)
			require.Len(t, list, 1)
			assert.Equal(t, "original", string(list[0].Data))
			copy(list[0].Data, "WWWWWWWW")

			assert.Equal(t, "original", string(mustGet(t, s, "item", "a").Data))
		}},
		{"ListIsOrderedByIDWithinOneKind", func(t *testing.T, s store.Store) {
			ids := []string{"m", "a", "z", "B", "a1", "a.b", "a_b", "0"}
			var ops []store.Op
			for _, id := range ids {
				ops = append(ops, put("item", id, 0, "item "+id))
			}
			// Kinds that share a prefix, or would match "item" as a pattern,
			// must stay apart.
			for _, kind := range []string{"task", "items", "ite_", "ite%", "Item"} {
				ops = append(ops, put(kind, "a", 0, kind))
			}
			mustApply(t, s, ops...)

			list, err := s.List(t.Context(), "item")
			require.NoError(t, err)
			var gotIDs []string
			for _, r := range list {
				assert.Equal(t, "item", r.Kind)
				assert.Equal(t, "item "+r.ID, string(r.Data))
				gotIDs = append(gotIDs, r.ID)
			}
			assert.Equal(t, []string{"0", "B", "a", "a.b", "a1", "a_b", "m", "z"}, gotIDs, "byte-wise order of IDs")

			list, err = s.List(t.Context(), "ite_")
			require.NoError(t, err)
			require.Len(t, list, 1)
			assert.Equal(t, "ite_", string(list[0].Data))

			list, err = s.List(t.Context(), "nothing")
			require.NoError(t, err)
			assert.Empty(t, list)
		}},
		{"SameIDInTwoKindsIsTwoRecords", func(t *testing.T, s store.Store) {
			mustApply(t, s, put("item", "x", 0, "item"), put("task", "x", 0, "task"))
			mustApply(t, s, put("item", "x", 1, "item2"))
			assertRecord(t, mustGet(t, s, "item", "x"), "item", "x", 2, "item2")
			assertRecord(t, mustGet(t, s, "task", "x"), "task", "x", 1, "task")
			mustApply(t, s, del("task", "x", 1))
			assertRecord(t, mustGet(t, s, "item", "x"), "item", "x", 2, "item2")
		}},
		{"EmptyData", func(t *testing.T, s store.Store) {
			mustApply(t, s, store.Op{Kind: "item", ID: "nil"}, store.Op{Kind: "item", ID: "empty", Data: []byte{}})
			for _, id := range []string{"nil", "empty"} {
				r := mustGet(t, s, "item", id)
				assert.Equal(t, int64(1), r.Version)
				assert.Empty(t, r.Data)
			}
			mustApply(t, s, put("item", "x", 0, "something"))
			recs := mustApply(t, s, store.Op{Kind: "item", ID: "x", ExpectVersion: 1})
			assert.Empty(t, recs[0].Data)
			assert.Empty(t, mustGet(t, s, "item", "x").Data)
		}},
		{"BinaryAndUnicodeRoundTrip", func(t *testing.T, s store.Store) {
			data := []byte{0, 1, 2, 0xff, 0xfe, 0, 'a', 0xc3, 0x28, 0}
			id := "étape-✓ 'quoted' \"double\" ; DROP TABLE x; --"
			mustApply(t, s, store.Op{Kind: "kind with spaces", ID: id, Data: data})
			got := mustGet(t, s, "kind with spaces", id)
			assert.Equal(t, data, got.Data)
			assert.Equal(t, id, got.ID)
		}},
		{"LargeDocument", func(t *testing.T, s store.Store) {
			const size = 4 << 20
			data := make([]byte, size)
			for i := range data {
				data[i] = byte(i*7 + i>>11)
			}
			mustApply(t, s, store.Op{Kind: "item", ID: "big", Data: data})
			got := mustGet(t, s, "item", "big")
			assert.True(t, bytes.Equal(data, got.Data), "4 MiB document round trips")
			data[0]++
			recs := mustApply(t, s, store.Op{Kind: "item", ID: "big", ExpectVersion: 1, Data: data})
			assert.Equal(t, int64(2), recs[0].Version)
			list, err := s.List(t.Context(), "item")
			require.NoError(t, err)
			require.Len(t, list, 1)
			assert.True(t, bytes.Equal(data, list[0].Data))
		}},
	}
}

func lifecycleCases() []testCase {
	return []testCase{
		{"CancelledContextFails", func(t *testing.T, s store.Store) {
			mustApply(t, s, put("item", "a", 0, "a1"))
			ctx := cancelledContext(t)
			_, err := s.Get(ctx, "item", "a")
			assert.ErrorIs(t, err, context.Canceled)
			_, err = s.List(ctx, "item")
			assert.ErrorIs(t, err, context.Canceled)
			_, err = s.Apply(ctx, put("item", "a", 1, "a2"), put("item", "b", 0, "b1"))
			assert.ErrorIs(t, err, context.Canceled)
			assertRecord(t, mustGet(t, s, "item", "a"), "item", "a", 1, "a1")
			assertMissing(t, s, "item", "b")
		}},
		{"CloseTwiceThenErrClosed", func(t *testing.T, s store.Store) {
			mustApply(t, s, put("item", "a", 0, "a1"))
			require.NoError(t, s.Close())
			require.NoError(t, s.Close(), "a second Close is fine")
			_, err := s.Get(t.Context(), "item", "a")
			assert.ErrorIs(t, err, store.ErrClosed)
			_, err = s.List(t.Context(), "item")
			assert.ErrorIs(t, err, store.ErrClosed)
			_, err = s.Apply(t.Context(), put("item", "b", 0, "b1"))
			assert.ErrorIs(t, err, store.ErrClosed)
		}},
	}
}
