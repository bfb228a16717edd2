package store_test

import (
	"context"
	"errors"
	"fmt"

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
