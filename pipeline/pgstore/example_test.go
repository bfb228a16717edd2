package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/pipeline/store"
)

// Opening the store and writing an item's state. The examples need a
// PostgreSQL server, so they have no Output and are compiled, not run;
// the package's tests run the same calls against a real server.
func Example() {
	ctx := context.Background()
	s, err := pgstore.Open(ctx, os.Getenv("DATABASE_URL"), pgstore.Options{Schema: "foreman"})
	if err != nil {
		log.Fatal(err) // unreachable server, newer schema (*SchemaVersionError), foreign schema
	}
	defer s.Close()

	recs, err := s.Apply(ctx, store.Op{Kind: "item", ID: "story-1", Data: []byte(`{"stage":0}`)})
	var conflict *store.ConflictError
	if errors.As(err, &conflict) {
		fmt.Println("story-1 exists already, at version", conflict.Actual)
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	_, err = s.Apply(ctx, store.Op{Kind: "item", ID: "story-1", ExpectVersion: recs[0].Version, Data: []byte(`{"stage":1}`)})
	if err != nil {
		log.Fatal(err)
	}
	got, err := s.Get(ctx, "item", "story-1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(got.ID, got.Version, string(got.Data))
}

// A coordinator process: every coordinator on every host runs this loop;
// one leads at a time. The leader hands its fenced store (Leader.Store) to
// whatever writes the pipeline's state, for example
// pipeline.RuntimeConfig.Store, so that once another coordinator has taken
// the lease over, every write of this one fails with ErrFenced and it stops
// acting, however long it was paused.
func ExampleStore_Campaign() {
	ctx := context.Background()
	s, err := pgstore.Open(ctx, os.Getenv("DATABASE_URL"), pgstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	for ctx.Err() == nil {
		leader, err := s.Campaign(ctx, pgstore.LeaseOptions{}) // waits while another coordinator leads
		if err != nil {
			log.Fatal(err)
		}
		log.Printf("leading at term %d", leader.Term())
		err = coordinate(ctx, leader.Store(), leader.Lost())
		if errors.Is(err, pgstore.ErrFenced) {
			log.Printf("term %d is over: %v", leader.Term(), err)
		}
		_ = leader.Resign(ctx) // release at once, unless already lost
	}
}

// coordinate stands for the host's work as leader (a pipeline.Runtime on
// db, say): every write goes through db, and it returns when leadership is
// lost or a write was fenced.
func coordinate(ctx context.Context, db store.Store, lost <-chan struct{}) error {
	prev, err := db.Get(ctx, "coordinator", "status")
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	_, err = db.Apply(ctx, store.Op{Kind: "coordinator", ID: "status", ExpectVersion: prev.Version, Data: []byte("leading")})
	if err != nil {
		return err // a *pgstore.FencedError once another coordinator leads
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-lost:
		return pgstore.ErrLeadershipLost
	}
}
