package sqlitestore_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/agentforeman/foreman/pipeline/sqlitestore"
	"github.com/agentforeman/foreman/pipeline/store"
)

// FuzzRecordRoundTrip writes arbitrary kinds, ids and data (NUL bytes,
// invalid UTF-8, empty and large values) and reads them back: a record's
// data comes back byte for byte from Get and List, never nil, with the
// version Apply returned; an update moves the version by one; a delete
// leaves nothing to read; and a batch the store refuses is one that
// store.ValidateOps refuses.
func FuzzRecordRoundTrip(f *testing.F) {
	f.Add("item", "PROJ-7", []byte(`{"format":1,"state":{"item":"PROJ-7"}}`), []byte(`{"format":1}`))
	f.Add("item", "PROJ-7", []byte{}, []byte{0})
	f.Add("k", "\xff\xfe", []byte("\x00\x01\x02"), []byte("\xc3\x28"))
	f.Add("kind with space", "id'; DROP TABLE records; --", bytes.Repeat([]byte("x"), 70000), []byte(nil))
	f.Add("", "id", []byte("x"), []byte("y"))
	f.Add("k", "", []byte("x"), []byte("y"))
	f.Add("k\x00", "i\x00d", []byte("a"), []byte("b"))
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, filepath.Join(f.TempDir(), "fuzz.db"), sqlitestore.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = s.Close() })

	f.Fuzz(func(t *testing.T, kind, id string, data, data2 []byte) {
		create := store.Op{Kind: kind, ID: id, Data: data}
		if cur, err := s.Get(ctx, kind, id); err == nil {
			create.ExpectVersion = cur.Version // left by an earlier input: overwrite it
		}
		recs, err := s.Apply(ctx, create)
		if invalid := store.ValidateOps([]store.Op{create}); invalid != nil {
			if !errors.Is(err, store.ErrInvalidOp) {
				t.Fatalf("Apply(%q/%q) = %v; ValidateOps refuses it: %v", kind, id, err, invalid)
			}
			return
		}
		if err != nil {
			t.Fatalf("Apply(%q/%q, %d bytes): %v", kind, id, len(data), err)
		}
		readBack(t, s, kind, id, data, recs[0].Version)

		recs, err = s.Apply(ctx, store.Op{Kind: kind, ID: id, ExpectVersion: recs[0].Version, Data: data2})
		if err != nil {
			t.Fatalf("update %q/%q: %v", kind, id, err)
		}
		readBack(t, s, kind, id, data2, recs[0].Version)

		if _, err := s.Apply(ctx, store.Op{Kind: kind, ID: id, ExpectVersion: recs[0].Version, Delete: true}); err != nil {
			t.Fatalf("delete %q/%q: %v", kind, id, err)
		}
		if _, err := s.Get(ctx, kind, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Get of deleted %q/%q: %v, want ErrNotFound", kind, id, err)
		}
	})
}

// readBack checks that kind/id reads back as data at version, from Get and
// from List.
func readBack(t *testing.T, s store.Store, kind, id string, data []byte, version int64) {
	t.Helper()
	ctx := context.Background()
	got, err := s.Get(ctx, kind, id)
	if err != nil {
		t.Fatalf("Get(%q/%q): %v", kind, id, err)
	}
	if got.Data == nil || !bytes.Equal(got.Data, data) || got.Version != version || got.Kind != kind || got.ID != id {
		t.Fatalf("Get(%q/%q) = %q/%q v%d %q (nil: %v), want v%d %q", kind, id, got.Kind, got.ID, got.Version, got.Data, got.Data == nil, version, data)
	}
	list, err := s.List(ctx, kind)
	if err != nil {
		t.Fatalf("List(%q): %v", kind, err)
	}
	for _, r := range list {
		if r.ID == id {
			if r.Data == nil || !bytes.Equal(r.Data, data) || r.Version != version || r.Kind != kind {
				t.Fatalf("List(%q) has %q/%q v%d %q, want v%d %q", kind, r.Kind, r.ID, r.Version, r.Data, version, data)
			}
			return
		}
	}
	t.Fatalf("List(%q) has no %q among %d records", kind, id, len(list))
}
