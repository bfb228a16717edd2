package pgtransport

import (
	"github.com/jackc/pgx/v5"

	"github.com/agentforeman/foreman/worker"
)

// writeBatch is one fenced transaction: the commands, and the deletion of
// finished rows delivered since the last write (acks) and of the wt_done
// rows read (dones), which so costs no commit of its own. With promise,
// it promises to poll (pollPromise); with again (the last write failed,
// and may have landed) its inserts skip the assignments already there.
func (c *Coordinator) writeBatch(cmds []worker.Command, acks []string, dones []int64, promise, again bool) *pgx.Batch {
	cfg := c.cfg
	b := &pgx.Batch{}
	b.Queue(c.sql.fence, cfg.Lease, cfg.Term)
	if len(acks)+len(dones) > 0 {
		b.Queue(c.sql.ackFinished, textArray(acks), cfg.Queue, int8Array(dones))
	}
	if promise {
		b.Queue(c.sql.promise, cfg.Queue, (promiseCooldowns * cfg.ReadCooldown).Microseconds())
	}
	// Room for every assignment at once (most batches are all assignments).
	n := 0
	for _, cmd := range cmds {
		if cmd.Kind == worker.CommandAssign {
			n++
		}
	}
	var ids, slots, bodies []string
	if n > 0 {
		ids, slots, bodies = make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
	}
	var buf []byte // each body is encoded here, then copied once into its string
	assigned := false
	flushAssigns := func() {
		if len(ids) > 0 {
			insert := c.sql.insert
			if again {
				insert = c.sql.insertAgain
			}
			b.Queue(insert, cfg.Queue, cfg.Lease, cfg.Term, textArray(ids), textArray(slots), textArray(bodies))
			ids, slots, bodies, assigned = nil, nil, nil, true
		}
	}
	for _, cmd := range cmds {
		switch cmd.Kind {
		case worker.CommandAssign:
			ids = append(ids, string(cmd.Assign.ID))
			slots = append(slots, string(cmd.Worker))
			buf = appendAssignment(buf[:0], cmd.Assign)
			bodies = append(bodies, string(buf))
		case worker.CommandProbe:
			flushAssigns()
			b.Queue(c.sql.probe, cfg.Queue, cfg.Lease, cfg.Term, string(cmd.Assignment), int16(cmd.Kind), cmd.Reason)
		default:
			flushAssigns()
			stop := c.sql.stop
			if cmd.Assignment != "" {
				stop = c.sql.stopOne
			}
			b.Queue(stop, cfg.Queue, cfg.Lease, cfg.Term, string(cmd.Worker), string(cmd.Assignment), int16(cmd.Kind), cmd.Reason)
		}
	}
	flushAssigns()
	if assigned {
		b.Queue(c.sql.notify, channel("q", cfg.Store.Schema(), cfg.Queue))
	}
	return b
}
