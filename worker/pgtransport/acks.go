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
