package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/agentforeman/foreman/pipeline/sqlitestore"
	"github.com/agentforeman/foreman/pipeline/store"
)

// A coordinator writes item state; a status command, possibly another
// process, reads the same file read-only while it runs.
func Example() {
	dir, err := os.MkdirTemp("", "sqlitestore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "state.db")
	ctx := context.Background()

	coordinator, err := sqlitestore.Open(ctx, path, sqlitestore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer coordinator.Close()
	recs, err := coordinator.Apply(ctx, store.Op{Kind: "item", ID: "story-1", Data: []byte(`{"stage":0}`)})
	if err != nil {
		log.Fatal(err)
	}
	_, err = coordinator.Apply(ctx, store.Op{Kind: "item", ID: "story-1", ExpectVersion: recs[0].Version, Data: []byte(`{"stage":1}`)})
	if err != nil {
		log.Fatal(err)
	}

	status, err := sqlitestore.Open(ctx, path, sqlitestore.Options{ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	defer status.Close()
	items, err := status.List(ctx, "item")
	if err != nil {
		log.Fatal(err)
	}
	for _, it := range items {
		fmt.Println(it.ID, it.Version, string(it.Data))
	}
	_, err = status.Apply(ctx, store.Op{Kind: "item", ID: "story-2"})
	fmt.Println(errors.Is(err, sqlitestore.ErrReadOnly))
	// Output:
	// story-1 2 {"stage":1}
	// true
}

// A damaged file is reported, never replaced: the host decides what to do
// with it, here moving it aside and starting over.
func ExampleCorruptError() {
	dir, err := os.MkdirTemp("", "sqlitestore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "state.db")
	if err := os.WriteFile(path, []byte("definitely not a database, but long enough to have a header"), 0o600); err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	_, err = sqlitestore.Open(ctx, path, sqlitestore.Options{})
	var corrupt *sqlitestore.CorruptError
	if errors.As(err, &corrupt) {
		fmt.Println("corrupt:", filepath.Base(corrupt.Path))
		if err := os.Rename(corrupt.Path, corrupt.Path+".corrupt"); err != nil {
			log.Fatal(err)
		}
	}
	s, err := sqlitestore.Open(ctx, path, sqlitestore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	kept, _ := os.ReadFile(path + ".corrupt")
	fmt.Println("fresh store opened; old file kept with", len(kept), "bytes")
	// Output:
	// corrupt: state.db
	// fresh store opened; old file kept with 59 bytes
}
