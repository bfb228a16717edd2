package pgstore_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/store/storetest"
)

// killSchemaEnv tells the writer process of TestKillWriter which schema to
// write (the database is FOREMAN_TEST_POSTGRES, inherited).
const killSchemaEnv = "FOREMAN_PGSTORE_KILL_SCHEMA"

// TestKillWriter SIGKILLs a process whose concurrent callers write through
// group commit, opens the schema again from this process and finds every
// acknowledged Apply, and every batch whole or absent (storetest.KillWriter).
func TestKillWriter(t *testing.T) {
	schema := newSchema(t)
	storetest.KillWriter(t, storetest.KillConfig{
		HelperTest: "TestKillWriterProcess",
		Env:        []string{killSchemaEnv + "=" + schema},
		Reopen: func(t *testing.T) store.Store {
			s, err := pgstore.Open(t.Context(), databaseURL(t), pgstore.Options{Schema: schema})
			require.NoError(t, err, "the killed writer's schema opens again")
			return s
		},
	})
}

// TestKillWriterProcess is the writer side of TestKillWriter; run on its
// own it does nothing.
func TestKillWriterProcess(t *testing.T) {
	storetest.WriterProcess(t, func(t *testing.T) store.Store {
		s, err := pgstore.Open(t.Context(), databaseURL(t), pgstore.Options{Schema: os.Getenv(killSchemaEnv)})
		require.NoError(t, err)
		return s
	})
}
