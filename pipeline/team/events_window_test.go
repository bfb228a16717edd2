package team

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/store"
)

// windowLog is an event log on db that keeps a window of w events.
func windowLog(t *testing.T, db store.Store, w int) *eventLog {
	t.Helper()
	l, err := newEventLog(context.Background(), db, nil, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	l.window = w
	return l
}

func addEvents(l *eventLog, from, to int) {
	for i := from; i <= to; i++ {
		l.add(Event{Kind: EventStageStarted, Story: foreman.ItemID(fmt.Sprintf("S%d", i)), Detail: fmt.Sprint(i)})
	}
}

// checkSeqs checks that evs are the events numbered from to to, in order,
// each the one added under its number.
func checkSeqs(t *testing.T, evs []Event, from, to uint64) {
	t.Helper()
	require.Equal(t, int(to-from+1), len(evs), "how many events")
	for i, e := range evs {
		want := from + uint64(i)
		require.Equal(t, want, e.Seq)
		require.Equal(t, fmt.Sprint(want), e.Detail, "event %d is not the one recorded under its number", want)
	}
}

// With a store, memory keeps a window of the latest events; reading from
// before it (every event, or just behind the window) reads them back from
// the store, in order, and a log opened again numbers on.
func TestTheEventLogKeepsAWindowAndReadsOlderEventsFromTheStore(t *testing.T) {
	db := store.NewMemory(store.MemoryOptions{})
	l := windowLog(t, db, 8)
	const n = 600
	addEvents(l, 1, n)
	l.mu.Lock()
	held, base := len(l.evs), l.base
	l.mu.Unlock()
	assert.GreaterOrEqual(t, held, 8)
	assert.Less(t, held, 16, "memory holds the window, not every event")
	assert.Equal(t, uint64(n), base+uint64(held))
	assert.Equal(t, uint64(n), l.last())

	for _, after := range []uint64{0, 1, 300, base - 200, base - 1, base, n - 3, n} {
		evs, _ := l.since(after)
		if after == n {
			assert.Empty(t, evs)
			continue
		}
		checkSeqs(t, evs, after+1, n)
	}

	again := windowLog(t, db, 8)
	addEvents(again, n+1, n+3)
	evs, _ := again.since(0)
	checkSeqs(t, evs, 1, n+3)
}

// A subscriber from 0 that comes after the window moved on gets every
// event, in order, and then the ones that follow.
func TestSubscribeFromZeroAfterTheWindowGetsEveryEvent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := windowLog(t, store.NewMemory(store.MemoryOptions{}), 4)
	tm := &Team{events: l}
	addEvents(l, 1, 100)
	ch := tm.Subscribe(ctx, 0)
	var got []Event
	for len(got) < 100 {
		select {
		case e := <-ch:
			got = append(got, e)
		case <-ctx.Done():
			t.Fatalf("got %d events of 100", len(got))
		}
	}
	addEvents(l, 101, 150) // the window moves on while the subscriber reads
	for len(got) < 150 {
		select {
		case e := <-ch:
			got = append(got, e)
		case <-ctx.Done():
			t.Fatalf("got %d events of 150", len(got))
		}
	}
	checkSeqs(t, got, 1, 150)
	checkSeqs(t, tm.Events(0), 1, 150)
}

// Without a store every event stays in memory; once the store refused an
// event, every event from then on does (the store cannot give it back),
// and every event is still read back in order.
func TestTheEventLogKeepsWhatTheStoreDoesNotHold(t *testing.T) {
	mem := windowLog(t, nil, 4)
	addEvents(mem, 1, 50)
	assert.Len(t, mem.evs, 50)
	evs, _ := mem.since(0)
	checkSeqs(t, evs, 1, 50)

	db := &failingStore{Store: store.NewMemory(store.MemoryOptions{})}
	l := windowLog(t, db, 4)
	addEvents(l, 1, 30)
	db.fail.Store(true)
	addEvents(l, 31, 33)
	db.fail.Store(false)
	addEvents(l, 34, 80)
	l.mu.Lock()
	held, base := len(l.evs), l.base
	l.mu.Unlock()
	assert.LessOrEqual(t, base, uint64(30), "an event the store refused was dropped from memory")
	assert.Equal(t, uint64(80), base+uint64(held))
	evs, _ = l.since(0)
	checkSeqs(t, evs, 1, 80)
}

// failingStore refuses every Apply while fail is set.
type failingStore struct {
	store.Store
	fail atomic.Bool
}

func (f *failingStore) Apply(ctx context.Context, ops ...store.Op) ([]store.Record, error) {
	if f.fail.Load() {
		return nil, errors.New("disk full")
	}
	return f.Store.Apply(ctx, ops...)
}
