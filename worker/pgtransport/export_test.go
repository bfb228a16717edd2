package pgtransport

import (
	"context"

	"github.com/agentforeman/foreman/worker"
)

// Inject queues m to be written as if one of this host's runs had sent it,
// whether or not the host holds its assignment (a late or rogue writer).
func (h *Host) Inject(m worker.Message) { h.queue(m, final(m.Kind)) }

// Round runs one round trip of a host that is not Run.
func (h *Host) Round(ctx context.Context) error { return h.round(ctx) }

// Listening is closed once the coordinator's LISTEN took effect.
func (c *Coordinator) Listening() <-chan struct{} { return c.listen.ready }

// Listening is closed once the host's LISTEN took effect.
func (h *Host) Listening() <-chan struct{} { return h.listen.ready }
