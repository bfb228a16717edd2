package pgstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/store/storetest"
)

func TestConformance(t *testing.T) {
	databaseURL(t) // skip once, not once per case
	storetest.Run(t, func(t *testing.T) store.Store {
		return openStore(t, pgstore.Options{})
	})
}

// Every Apply alone, one at a time: the path a store without group commit
// takes must keep the contract too.
func TestConformanceWithoutGroupCommit(t *testing.T) {
	databaseURL(t) // skip once, not once per case
	storetest.Run(t, func(t *testing.T) store.Store {
		return openStore(t, pgstore.Options{MaxBatch: 1, Writers: 1})
	})
}

// A leader's fenced view is a whole store as long as its term is current.
func TestConformanceFencedView(t *testing.T) {
	databaseURL(t) // skip once, not once per case
	storetest.Run(t, func(t *testing.T) store.Store {
		s := openStore(t, pgstore.Options{})
		// A fake clock that never moves: the leader neither renews nor
		// expires while the suite runs.
		l, err := s.TryLead(t.Context(), pgstore.LeaseOptions{Clock: foreman.NewFakeClock(time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC))})
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Resign(t.Context()) })
		return l.Store()
	})
}
