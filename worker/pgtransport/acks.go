package pgtransport

// maxAcks caps the finished rows one write deletes.
const maxAcks = 500

// ackState is where a delivered finished row's deletion is: taken by a
// write under way (busy), or done in deletion number goneAt.
type ackState struct {
	busy   bool
	goneAt uint64
}

// takeAcks returns up to maxAcks delivered finished rows to delete (every
// one not deleted yet, under way or not, with all), marking them under
// way.
func (c *Coordinator) takeAcks(all bool) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	for id, st := range c.unacked {
		if st.goneAt != 0 || (st.busy && !all) {
			continue
		}
		if len(ids) == maxAcks && !all {
			break
		}
		c.unacked[id] = ackState{busy: true}
		ids = append(ids, id)
	}
	return ids
}

// ackedFinished records the rows of done as deleted and makes those of
// failed takeable again.
func (c *Coordinator) ackedFinished(done, failed []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ackEpoch++
	for _, id := range done {
		if _, ok := c.unacked[id]; ok {
			c.unacked[id] = ackState{goneAt: c.ackEpoch}
		}
	}
	for _, id := range failed {
		if st, ok := c.unacked[id]; ok && st.goneAt == 0 {
			c.unacked[id] = ackState{}
		}
	}
}

// readDone records wt_done rows read (doneLog), to delete with the next
// write.
func (c *Coordinator) readDone(seqs []int64) {
	if len(seqs) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range seqs {
		if _, ok := c.dones[s]; !ok {
			c.dones[s] = false
		}
	}
}

// doneKnown is every wt_done row read and not known to be deleted: reads
// pass them over.
func (c *Coordinator) doneKnown() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	seqs := make([]int64, 0, len(c.dones))
	for s := range c.dones {
		seqs = append(seqs, s)
	}
	return seqs
}

// takeDone returns the wt_done rows read whose deletion is not under way,
// marking it under way.
func (c *Coordinator) takeDone() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var seqs []int64
	for s, busy := range c.dones {
		if !busy {
			c.dones[s] = true
			seqs = append(seqs, s)
		}
	}
	return seqs
}

// ackedDone forgets the wt_done rows of done, deleted, and makes those of
// failed takeable again.
func (c *Coordinator) ackedDone(done, failed []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range done {
		delete(c.dones, s)
	}
	for _, s := range failed {
		if _, ok := c.dones[s]; ok {
			c.dones[s] = false
		}
	}
}
