package worker

// readyQueue orders queued items by priority (higher first), then by the
// sequence number they were first submitted with (FIFO). A requeued item
// keeps its sequence number, so it goes ahead of work submitted after it.
//
// A binary heap written out for its one element type (container/heap
// calls Less and Swap through an interface) whose entries carry their
// order's keys: a comparison reads two entries of the slice, not two
// items elsewhere in memory (with a backlog of 100,000 items, each
// comparison was two cache misses). An item's priority and sequence
// number do not change while it is queued.
type readyQueue struct{ h []queueEntry }

type queueEntry struct {
	priority int
	seq      uint64
	r        *itemRec
}

// before says whether a goes out before b.
func (a *queueEntry) before(b *queueEntry) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	return a.seq < b.seq
}

func (q *readyQueue) Len() int { return len(q.h) }

func (q *readyQueue) push(r *itemRec) {
	if r.qIndex >= 0 {
		return
	}
	q.h = append(q.h, queueEntry{priority: r.item.Priority, seq: r.seq, r: r})
	r.qIndex = len(q.h) - 1
	q.up(r.qIndex)
}

func (q *readyQueue) pop() *itemRec {
	n := len(q.h) - 1
	if n < 0 {
		return nil
	}
	q.swap(0, n)
	q.down(0, n)
	return q.drop(n)
}

func (q *readyQueue) remove(r *itemRec) {
	i := r.qIndex
	if i < 0 {
		return
	}
	n := len(q.h) - 1
	if i != n {
		q.swap(i, n)
		if !q.down(i, n) {
			q.up(i)
		}
	}
	q.drop(n)
}

// drop takes the last entry, n, out of the heap.
func (q *readyQueue) drop(n int) *itemRec {
	r := q.h[n].r
	q.h[n] = queueEntry{}
	q.h = q.h[:n]
	r.qIndex = -1
	return r
}

func (q *readyQueue) swap(i, j int) {
	h := q.h
	h[i], h[j] = h[j], h[i]
	h[i].r.qIndex = i
	h[j].r.qIndex = j
}

func (q *readyQueue) up(j int) {
	for j > 0 {
		i := (j - 1) / 2 // parent
		if !q.h[j].before(&q.h[i]) {
			break
		}
		q.swap(i, j)
		j = i
	}
}

// down sifts the entry at i0 down among the first n; it says whether the
// entry moved.
func (q *readyQueue) down(i0, n int) bool {
	i := i0
	for {
		j := 2*i + 1
		if j >= n || j < 0 { // j < 0: overflow
			break
		}
		if j2 := j + 1; j2 < n && q.h[j2].before(&q.h[j]) {
			j = j2 // the right child goes first
		}
		if !q.h[j].before(&q.h[i]) {
			break
		}
		q.swap(i, j)
		i = j
	}
	return i > i0
}
