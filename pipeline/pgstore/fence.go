package pgstore

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/agentforeman/foreman/pipeline/store"
)

// FencedStore is a view of a Store whose every Apply is conditional on a
// lease term: it writes only while the lease's current term is the one the
// view was made with, checked inside the transaction that writes, and
// otherwise fails with a *FencedError (errors.Is ErrFenced) having written
// nothing. Reads pass through unchanged. Leader.Store returns one; hosts
// that run their own election can make one with Store.Fenced.
type FencedStore struct {
	s      *Store
	fence  fence
	lost   func() error // non-nil error: refuse before asking the database
	closed atomic.Bool
}

var _ store.Store = (*FencedStore)(nil)

// Fenced returns a view of s whose writes succeed only while lease is at
// term. The lease must be one that TryLead or Campaign manage (the leases
// table of this schema).
func (s *Store) Fenced(lease string, term int64) (*FencedStore, error) {
	if lease == "" || !storable(lease) {
		return nil, fmt.Errorf("%w: lease name %q must be non-empty UTF-8 without NUL", ErrInvalidOptions, lease)
	}
	if term < 1 {
		return nil, fmt.Errorf("%w: term %d: terms start at 1", ErrInvalidOptions, term)
	}
	return &FencedStore{s: s, fence: fence{lease: lease, term: term}}, nil
}

// Lease and Term name the fence.
func (f *FencedStore) Lease() string { return f.fence.lease }

// Term is the lease term this view writes under.
func (f *FencedStore) Term() int64 { return f.fence.term }

// Get implements store.Store.
func (f *FencedStore) Get(ctx context.Context, kind, id string) (store.Record, error) {
	if f.closed.Load() {
		return store.Record{}, store.ErrClosed
	}
	return f.s.Get(ctx, kind, id)
}

// List implements store.Store.
func (f *FencedStore) List(ctx context.Context, kind string) ([]store.Record, error) {
	if f.closed.Load() {
		return nil, store.ErrClosed
	}
	return f.s.List(ctx, kind)
}

// Apply implements store.Store: the ops are written only if the lease is
// still at this view's term when the transaction runs. A view from a
// Leader that knows it has lost the lease refuses at once.
func (f *FencedStore) Apply(ctx context.Context, ops ...store.Op) ([]store.Record, error) {
	if f.closed.Load() {
		return nil, store.ErrClosed
	}
	if f.lost != nil {
		if err := f.lost(); err != nil {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("%w (term %d of lease %q): %w", ErrFenced, f.fence.term, f.fence.lease, err)
		}
	}
	return f.s.apply(ctx, f.fence, ops)
}

// Close closes the view only, never the Store beneath it (other views and
// the host may still use it); later calls on the view fail with
// store.ErrClosed. Safe to call twice.
func (f *FencedStore) Close() error {
	f.closed.Store(true)
	return nil
}
