package pgtransport_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/worker"
)

// guard bounds every wait for a message: a hang guard, never a timing
// assertion.
const guard = 30 * time.Second

// inbox records delivered messages.
type inbox struct {
	mu      sync.Mutex
	msgs    []worker.Message
	arrived chan struct{}
}

func newInbox() *inbox { return &inbox{arrived: make(chan struct{}, 1)} }

func (in *inbox) Deliver(_ context.Context, m worker.Message) (worker.Disposition, error) {
	in.mu.Lock()
	in.msgs = append(in.msgs, m)
	in.mu.Unlock()
	select {
	case in.arrived <- struct{}{}:
	default:
	}
	return worker.Applied, nil
}

func (in *inbox) all() []worker.Message {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]worker.Message(nil), in.msgs...)
}

func (in *inbox) await(t *testing.T, what string, ok func(worker.Message) bool) worker.Message {
	t.Helper()
	deadline := time.NewTimer(guard)
	defer deadline.Stop()
	for {
		for _, m := range in.all() {
			if ok(m) {
				return m
			}
		}
		select {
		case <-in.arrived:
		case <-deadline.C:
			t.Fatalf("no %s within %v; messages: %+v", what, guard, in.all())
		}
	}
}

// claimedBy is the host holding a claim on the assignment, "" if none
// does (open, finished or gone).
func claimedBy(t *testing.T, e *env, id foreman.AssignmentID) string {
	t.Helper()
	var host *string
	err := e.pool.QueryRow(context.Background(),
		"SELECT host FROM "+pgx.Identifier{e.schema}.Sanitize()+".wt_assignments WHERE id = $1 AND state = 1", string(id)).Scan(&host)
	if errors.Is(err, pgx.ErrNoRows) {
		return ""
	}
	require.NoError(t, err)
	if host == nil {
		return ""
	}
	return *host
}
