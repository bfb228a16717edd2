package worker

import "container/heap"

// readyQueue orders queued items by priority (higher first), then by the
// sequence number they were first submitted with (FIFO). A requeued item
// keeps its sequence number, so it goes ahead of work submitted after it.
type readyQueue struct{ h recHeap }

func (q *readyQueue) Len() int { return len(q.h) }

func (q *readyQueue) push(r *itemRec) {
	if r.qIndex >= 0 {
		return
	}
	heap.Push(&q.h, r)
}

func (q *readyQueue) pop() *itemRec {
	if len(q.h) == 0 {
		return nil
	}
	return heap.Pop(&q.h).(*itemRec)
}

func (q *readyQueue) remove(r *itemRec) {
	if r.qIndex >= 0 {
		heap.Remove(&q.h, r.qIndex)
	}
}

type recHeap []*itemRec

func (h recHeap) Len() int { return len(h) }
func (h recHeap) Less(i, j int) bool {
	if h[i].item.Priority != h[j].item.Priority {
		return h[i].item.Priority > h[j].item.Priority
	}
	return h[i].seq < h[j].seq
}
func (h recHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].qIndex = i
	h[j].qIndex = j
}
func (h *recHeap) Push(x any) {
	r := x.(*itemRec)
	r.qIndex = len(*h)
	*h = append(*h, r)
}
func (h *recHeap) Pop() any {
	old := *h
	n := len(old)
	r := old[n-1]
	old[n-1] = nil
	r.qIndex = -1
	*h = old[:n-1]
	return r
}
