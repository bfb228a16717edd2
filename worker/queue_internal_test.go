package worker

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// The ready queue hands items out by priority (higher first), then FIFO by
// sequence number, through any mix of pushes, pops and removals: checked
// against a sorted list of what is queued.
func TestTheReadyQueueHandsOutByPriorityThenSequence(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q readyQueue
	var want []*itemRec // what is queued, in no particular order
	order := func(a, b *itemRec) int {
		if a.item.Priority != b.item.Priority {
			return b.item.Priority - a.item.Priority
		}
		return int(a.seq) - int(b.seq)
	}
	seq := uint64(0)
	for step := range 20000 {
		switch op := rng.IntN(10); {
		case op < 5 || len(want) == 0:
			seq++
			r := &itemRec{item: Item{Priority: rng.IntN(4)}, seq: seq, qIndex: -1}
			q.push(r)
			q.push(r) // a second push of a queued item does nothing
			want = append(want, r)
		case op < 8:
			slices.SortFunc(want, order)
			got := q.pop()
			require.Same(t, want[0], got, "step %d", step)
			require.Equal(t, -1, got.qIndex)
			want = want[1:]
		default:
			i := rng.IntN(len(want))
			r := want[i]
			q.remove(r)
			q.remove(r) // a second removal does nothing
			require.Equal(t, -1, r.qIndex)
			want = slices.Delete(want, i, i+1)
		}
		require.Equal(t, len(want), q.Len())
		for i := range q.h {
			require.Equal(t, i, q.h[i].r.qIndex, "step %d", step)
		}
	}
	slices.SortFunc(want, order)
	for _, r := range want {
		require.Same(t, r, q.pop())
	}
	require.Nil(t, q.pop())
}
