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
// conflicts that write nothing of their batch, invalid batches, data
// isolation, List ordering and kind isolation, cancelled contexts, Close,
// concurrent writers racing on one record (exactly one wins per version,
// no lost update), readers that never see half a batch, large, binary and
// empty documents. It uses only the Store interface, so a store that passes
// it can replace another one.
package storetest
