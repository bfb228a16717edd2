package store_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/store"
)

// Two writers read the same version; the second one to write loses with a
// conflict, rereads and tries again.
func ExampleMemory() {
	ctx := context.Background()
	s := store.NewMemory(store.MemoryOptions{})
	defer s.Close()

	created, _ := s.Apply(ctx, store.Op{Kind: "item", ID: "story-1", Data: []byte(`{"stage":0}`)})
	fmt.Println("created at version", created[0].Version)

	_, _ = s.Apply(ctx, store.Op{Kind: "item", ID: "story-1", ExpectVersion: 1, Data: []byte(`{"stage":1}`)})
	_, err := s.Apply(ctx, store.Op{Kind: "item", ID: "story-1", ExpectVersion: 1, Data: []byte(`{"stage":9}`)})
	var conflict *store.ConflictError
	if errors.As(err, &conflict) {
		fmt.Printf("conflict: expected %d, found %d\n", conflict.Expected, conflict.Actual)
	}

	current, _ := s.Get(ctx, "item", "story-1")
	fmt.Println(current.Version, string(current.Data))
	// Output:
	// created at version 1
	// conflict: expected 1, found 2
	// 2 {"stage":1}
}

// An Apply writes all of its ops or none: here the stale update of one
// record keeps the other record from being created.
func ExampleStore_Apply() {
	ctx := context.Background()
	s := store.NewMemory(store.MemoryOptions{})
	defer s.Close()

	_, _ = s.Apply(ctx, store.Op{Kind: "item", ID: "a", Data: []byte("a1")})
	_, err := s.Apply(ctx,
		store.Op{Kind: "task", ID: "a-1", Data: []byte("new task")},
		store.Op{Kind: "item", ID: "a", ExpectVersion: 7, Data: []byte("a2")},
	)
	fmt.Println(errors.Is(err, store.ErrConflict))

	_, err = s.Get(ctx, "task", "a-1")
	fmt.Println(errors.Is(err, store.ErrNotFound))

	recs, _ := s.Apply(ctx,
		store.Op{Kind: "task", ID: "a-1", Data: []byte("new task")},
		store.Op{Kind: "item", ID: "a", ExpectVersion: 1, Data: []byte("a2")},
	)
	for _, r := range recs {
		fmt.Println(r.Kind, r.ID, r.Version)
	}
	// Output:
	// true
	// true
	// task a-1 1
	// item a 2
}

// Versions never repeat for a record: a writer that read it before it was
// deleted and created again cannot overwrite the new one.
func ExampleStore_Apply_deleteAndCreateAgain() {
	ctx := context.Background()
	s := store.NewMemory(store.MemoryOptions{})
	defer s.Close()

	stale, _ := s.Apply(ctx, store.Op{Kind: "item", ID: "a", Data: []byte("first life")})
	deleted, _ := s.Apply(ctx, store.Op{Kind: "item", ID: "a", ExpectVersion: 1, Delete: true})
	fmt.Println("deleted, returned with version", deleted[0].Version)

	reborn, _ := s.Apply(ctx, store.Op{Kind: "item", ID: "a", Data: []byte("second life")})
	fmt.Println("created again at version", reborn[0].Version)

	_, err := s.Apply(ctx, store.Op{Kind: "item", ID: "a", ExpectVersion: stale[0].Version, Data: []byte("stale")})
	fmt.Println(err)
	// Output:
	// deleted, returned with version 0
	// created again at version 2
	// store: version conflict on item/a: expected 1, found 2
}

// Tombstones of records deleted long ago can be forgotten; a record created
// again after that starts over at 1.
func ExampleMemory_PurgeTombstones() {
	ctx := context.Background()
	clk := foreman.NewFakeClock(time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC))
	s := store.NewMemory(store.MemoryOptions{Clock: clk})
	defer s.Close()

	_, _ = s.Apply(ctx, store.Op{Kind: "item", ID: "old"}, store.Op{Kind: "item", ID: "recent"})
	_, _ = s.Apply(ctx, store.Op{Kind: "item", ID: "old", ExpectVersion: 1, Delete: true})
	clk.Advance(48 * time.Hour)
	_, _ = s.Apply(ctx, store.Op{Kind: "item", ID: "recent", ExpectVersion: 1, Delete: true})

	purged, _ := s.PurgeTombstones(ctx, clk.Now().Add(-24*time.Hour))
	fmt.Println("purged", purged)

	old, _ := s.Apply(ctx, store.Op{Kind: "item", ID: "old"})
	recent, _ := s.Apply(ctx, store.Op{Kind: "item", ID: "recent"})
	fmt.Println("old at", old[0].Version, "recent at", recent[0].Version)
	// Output:
	// purged 1
	// old at 1 recent at 2
}
