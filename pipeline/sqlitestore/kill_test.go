package sqlitestore_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline/sqlitestore"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/store/storetest"
)

// killDBEnv tells the writer process of TestKillWriter where the store is.
const killDBEnv = "FOREMAN_SQLITESTORE_KILL_DB"

// TestKillWriter SIGKILLs a process whose concurrent callers write through
// group commit, reopens the file and finds every acknowledged Apply, and
// every batch whole or absent (storetest.KillWriter).
func TestKillWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	storetest.KillWriter(t, storetest.KillConfig{
		HelperTest: "TestKillWriterProcess",
		Env:        []string{killDBEnv + "=" + path},
		Reopen: func(t *testing.T) store.Store {
			s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{})
			require.NoError(t, err, "the killed writer's file opens again")
			return s
		},
	})
}

// TestKillWriterProcess is the writer side of TestKillWriter; run on its
// own it does nothing.
func TestKillWriterProcess(t *testing.T) {
	storetest.WriterProcess(t, func(t *testing.T) store.Store {
		s, err := sqlitestore.Open(t.Context(), os.Getenv(killDBEnv), sqlitestore.Options{})
		require.NoError(t, err)
		return s
	})
}
