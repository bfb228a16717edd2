package pgtransport

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/worker"
)

// MigrateTo migrates the transport's tables in st's schema to version
// (older than SchemaVersion: the state an earlier build left).
func MigrateTo(ctx context.Context, pool *pgxpool.Pool, st *pgstore.Store, version int) error {
	return migrateLocked(ctx, pool, st, version)
}

// Inject queues m to be written as if one of this host's runs had sent it,
// whether or not the host holds its assignment (a late or rogue writer).
func (h *Host) Inject(m worker.Message) { h.queue(m, final(m.Kind)) }

// Round runs one round trip of a host that is not Run.
func (h *Host) Round(ctx context.Context) error { return h.round(ctx) }

// Listening is closed once the coordinator's LISTEN took effect.
func (c *Coordinator) Listening() <-chan struct{} { return c.listen.ready }

// Listening is closed once the host's LISTEN took effect.
func (h *Host) Listening() <-chan struct{} { return h.listen.ready }

// Paused says whether the host has stopped listening for now.
func Paused(h *Host) bool { return h.listen.isPaused() }
