// Package storetest is the conformance suite for store.Store. Every
// implementation runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s, err := mystore.Open(t.Context(), ...)
//			require.NoError(t, err)
//			return s
//		})
//	}
//
// The suite checks the whole contract documented in package store: reads
// and writes, versions, create-only and version-checked writes and deletes,
// versions that continue across delete and create (a stale writer from
// before the delete conflicts; tombstones are hidden from Get and List and
// survive a conflicting batch), conflicts that write nothing of their
// batch, invalid batches, data isolation, List ordering and kind isolation,
// cancelled contexts, Close, concurrent writers racing on one record
// (exactly one wins per version, no lost update, one creator wins after a
// delete, no version ever returned twice under create/update/delete churn),
// readers that never see half a batch, large, binary and empty documents,
// and what a store that shares commits between callers (group commit)
// must keep: concurrent callers each get their own outcome, a conflict
// undoes only the conflicting caller's ops, and a caller cancelled
// mid-batch has all of its ops written or none.
// A store that implements store.TombstonePurger is checked for it too; the
// others skip that case. It uses only the Store interface, so a store that
// passes it can replace another one.
//
// A durable store also runs KillWriter: a writer process (the test binary
// again, in a test that calls WriterProcess) is killed with SIGKILL while
// concurrent callers write; reopened, the store must hold every
// acknowledged Apply, and every batch whole or not at all:
//
//	func TestKillWriter(t *testing.T) {
//		path := filepath.Join(t.TempDir(), "state.db")
//		storetest.KillWriter(t, storetest.KillConfig{
//			HelperTest: "TestWriterProcess",
//			Env:        []string{"STATE_DB=" + path},
//			Reopen:     func(t *testing.T) store.Store { return open(t, path) },
//		})
//	}
//
//	func TestWriterProcess(t *testing.T) {
//		storetest.WriterProcess(t, func(t *testing.T) store.Store { return open(t, os.Getenv("STATE_DB")) })
//	}
package storetest
