package health

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// expiryLog collects expiries delivered by a Deadlines.
type expiryLog struct {
	mu  sync.Mutex
	got []Expiry
}

func (l *expiryLog) record(e Expiry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, e)
}

func (l *expiryLog) take() []Expiry {
	l.mu.Lock()
	defer l.mu.Unlock()
	got := l.got
	l.got = nil
	return got
}

func newTestDeadlines(t *testing.T, cfg DeadlineConfig) (*Deadlines, *foreman.FakeClock, *expiryLog) {
	t.Helper()
	clk := foreman.NewFakeClock(t0)
	log := &expiryLog{}
	cfg.Clock = clk
	cfg.OnExpiry = log.record
	d := NewDeadlines(cfg)
	t.Cleanup(func() { _ = d.Close() })
	return d, clk, log
}

func TestDeadlineConfigDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   DeadlineConfig
		want DeadlineConfig
	}{
		{"zero value", DeadlineConfig{}, DeadlineConfig{
			HeartbeatInterval: 10 * time.Second, LivenessTimeout: 45 * time.Second,
			ProgressTimeout: 15 * time.Minute, AttemptTimeout: 0,
		}},
		{"explicit values kept", DeadlineConfig{
			HeartbeatInterval: time.Second, LivenessTimeout: 5 * time.Second,
			ProgressTimeout: time.Minute, AttemptTimeout: time.Hour, Jitter: time.Second,
		}, DeadlineConfig{
			HeartbeatInterval: time.Second, LivenessTimeout: 5 * time.Second,
			ProgressTimeout: time.Minute, AttemptTimeout: time.Hour, Jitter: time.Second,
		}},
		{"negative disables", DeadlineConfig{LivenessTimeout: -1, ProgressTimeout: -1, AttemptTimeout: -1, Jitter: -1},
			DeadlineConfig{HeartbeatInterval: 10 * time.Second, LivenessTimeout: -1, ProgressTimeout: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.withDefaults()
			assert.NotNil(t, got.Clock)
			assert.NotNil(t, got.Logger)
			assert.Equal(t, tt.want.HeartbeatInterval, got.HeartbeatInterval)
			assert.Equal(t, tt.want.LivenessTimeout, got.LivenessTimeout)
			assert.Equal(t, tt.want.ProgressTimeout, got.ProgressTimeout)
			assert.Equal(t, tt.want.AttemptTimeout, got.AttemptTimeout)
			assert.Equal(t, tt.want.Jitter, got.Jitter)
		})
	}
}

func TestDeadlinesLivenessExpiresOnceWithoutHeartbeats(t *testing.T) {
	d, clk, log := newTestDeadlines(t, DeadlineConfig{})
	require.NoError(t, d.Add("a1"))

	clk.Advance(44 * time.Second)
	assert.Empty(t, log.take())
	clk.Advance(2 * time.Second)
	got := log.take()
	require.Len(t, got, 1)
	assert.Equal(t, Expiry{Subject: "a1", Kind: Liveness, Deadline: t0.Add(45 * time.Second),
		At: t0.Add(45 * time.Second), Late: 0}, got[0])

	clk.Advance(10 * time.Minute)
	assert.Empty(t, log.take(), "liveness is reported once")
	clk.Advance(5 * time.Minute)
	got = log.take()
	require.Len(t, got, 1)
	assert.Equal(t, Progress, got[0].Kind)
}

func TestDeadlinesHeartbeatMovesOnlyLiveness(t *testing.T) {
	d, clk, log := newTestDeadlines(t, DeadlineConfig{})
	require.NoError(t, d.Add("a1"))
	// Heartbeat every 10 s for 20 minutes: alive, but no progress.
	for i := 0; i < 120; i++ {
		clk.Advance(10 * time.Second)
		require.NoError(t, d.Heartbeat("a1"))
	}
	got := log.take()
	require.Len(t, got, 1, "only the progress deadline expires")
	assert.Equal(t, Progress, got[0].Kind)
	assert.Equal(t, t0.Add(15*time.Minute), got[0].Deadline)
}

func TestDeadlinesProgressMovesProgressAndLiveness(t *testing.T) {
	d, clk, log := newTestDeadlines(t, DeadlineConfig{})
	require.NoError(t, d.Add("a1"))
	for i := 0; i < 30; i++ {
		clk.Advance(40 * time.Second)
		require.NoError(t, d.Progress("a1"))
	}
	assert.Empty(t, log.take())
	clk.Advance(45 * time.Second)
	got := log.take()
	require.Len(t, got, 1)
	assert.Equal(t, Liveness, got[0].Kind)
}

func TestDeadlinesAttemptIsNeverMoved(t *testing.T) {
	d, clk, log := newTestDeadlines(t, DeadlineConfig{AttemptTimeout: time.Hour})
	require.NoError(t, d.Add("a1"))
	for i := 0; i < 360; i++ {
		clk.Advance(10 * time.Second)
		require.NoError(t, d.Progress("a1"))
	}
	got := log.take()
	require.Len(t, got, 1)
	assert.Equal(t, Attempt, got[0].Kind)
	assert.Equal(t, t0.Add(time.Hour), got[0].Deadline)
}

func TestDeadlinesExpiredDeadlineRearmsOnNextBeat(t *testing.T) {
	d, clk, log := newTestDeadlines(t, DeadlineConfig{ProgressTimeout: -1})
	require.NoError(t, d.Add("a1"))
	clk.Advance(time.Minute)
	require.Len(t, log.take(), 1)
	require.NoError(t, d.Heartbeat("a1"))
	clk.Advance(45 * time.Second)
	got := log.take()
	require.Len(t, got, 1, "a new liveness deadline, reported once")
	assert.Equal(t, t0.Add(time.Minute+45*time.Second), got[0].Deadline)
}

// lateClock is a fake clock whose timers fire a fixed delay late, as a busy
// machine's would.
type lateClock struct {
	*foreman.FakeClock
	delay time.Duration
}

func (c lateClock) AfterFunc(d time.Duration, f func()) foreman.Timer {
	return lateTimer{c.FakeClock.AfterFunc(d+c.delay, f), c.delay}
}

type lateTimer struct {
	foreman.Timer
	delay time.Duration
}

func (t lateTimer) Reset(d time.Duration) bool { return t.Timer.Reset(d + t.delay) }

func TestDeadlinesReportsHowLate(t *testing.T) {
	fake := foreman.NewFakeClock(t0)
	log := &expiryLog{}
	d := NewDeadlines(DeadlineConfig{Clock: lateClock{fake, 3 * time.Second}, OnExpiry: log.record})
	defer d.Close()
	require.NoError(t, d.Add("a1"))
	fake.Advance(time.Hour)
	got := log.take()
	require.Len(t, got, 2)
	assert.Equal(t, Expiry{Subject: "a1", Kind: Liveness, Deadline: t0.Add(45 * time.Second),
		At: t0.Add(48 * time.Second), Late: 3 * time.Second}, got[0])
	assert.Equal(t, 3*time.Second, got[1].Late)
}

// Late is measured when the hook is called: a slow hook makes the expiries
// delivered after it in the same firing later.
func TestDeadlinesLateIncludesEarlierHooks(t *testing.T) {
	clk := foreman.NewFakeClock(t0)
	var got []Expiry
	d := NewDeadlines(DeadlineConfig{Clock: clk, ProgressTimeout: -1, OnExpiry: func(e Expiry) {
		got = append(got, e)
		if len(got) == 1 {
			clk.Advance(2 * time.Second) // the first hook takes 2 s
		}
	}})
	defer d.Close()
	require.NoError(t, d.Add("a1"))
	require.NoError(t, d.Add("a2"))
	clk.Advance(45 * time.Second)
	require.Len(t, got, 2)
	assert.Equal(t, time.Duration(0), got[0].Late)
	assert.Equal(t, t0.Add(45*time.Second), got[1].Deadline)
	assert.Equal(t, t0.Add(47*time.Second), got[1].At)
	assert.Equal(t, 2*time.Second, got[1].Late)
}

func TestDeadlinesDisabledKinds(t *testing.T) {
	d, clk, log := newTestDeadlines(t, DeadlineConfig{LivenessTimeout: -1, ProgressTimeout: -1})
	require.NoError(t, d.Add("a1"))
	clk.Advance(100 * time.Hour)
	assert.Empty(t, log.take())
	assert.Zero(t, clk.Pending(), "nothing armed")
}

func TestDeadlinesManySubjectsFireInDeadlineOrder(t *testing.T) {
	d, clk, log := newTestDeadlines(t, DeadlineConfig{ProgressTimeout: -1})
	for i := 0; i < 5; i++ {
		require.NoError(t, d.Add(foreman.AssignmentID(fmt.Sprintf("a%d", i))))
		clk.Advance(time.Second)
	}
	assert.Equal(t, 1, clk.Pending(), "one timer for all subjects")
	clk.Advance(time.Hour)
	got := log.take()
	require.Len(t, got, 5)
	for i, e := range got {
		assert.Equal(t, foreman.AssignmentID(fmt.Sprintf("a%d", i)), e.Subject)
		assert.Equal(t, t0.Add(time.Duration(i)*time.Second+45*time.Second), e.Deadline)
	}
}

func TestDeadlinesRemove(t *testing.T) {
	d, clk, log := newTestDeadlines(t, DeadlineConfig{AttemptTimeout: time.Hour})
	require.NoError(t, d.Add("a1"))
	require.NoError(t, d.Add("a2"))
	assert.True(t, d.Remove("a1"))
	assert.False(t, d.Remove("a1"))
	assert.Equal(t, 1, d.Len())
	clk.Advance(2 * time.Hour)
	for _, e := range log.take() {
		assert.Equal(t, foreman.AssignmentID("a2"), e.Subject)
	}
	assert.ErrorIs(t, d.Heartbeat("a1"), ErrUnknownSubject)
	assert.ErrorIs(t, d.Progress("a1"), ErrUnknownSubject)
}

func TestDeadlinesErrors(t *testing.T) {
	d, _, _ := newTestDeadlines(t, DeadlineConfig{})
	require.NoError(t, d.Add("a1"))
	assert.ErrorIs(t, d.Add("a1"), ErrDuplicate)
	require.NoError(t, d.Close())
	require.NoError(t, d.Close(), "Close twice")
	assert.ErrorIs(t, d.Add("a2"), ErrClosed)
	assert.ErrorIs(t, d.Heartbeat("a1"), ErrClosed)
	assert.ErrorIs(t, d.Progress("a1"), ErrClosed)
}

func TestDeadlinesCloseStopsTimer(t *testing.T) {
	d, clk, log := newTestDeadlines(t, DeadlineConfig{})
	require.NoError(t, d.Add("a1"))
	require.Equal(t, 1, clk.Pending())
	require.NoError(t, d.Close())
	assert.Zero(t, clk.Pending())
	clk.Advance(time.Hour)
	assert.Empty(t, log.take())
}

func TestDeadlinesJitterIsDeterministicWithInjectedSource(t *testing.T) {
	run := func() []time.Time {
		d, clk, log := newTestDeadlines(t, DeadlineConfig{
			ProgressTimeout: -1, Jitter: 10 * time.Second, Rand: rand.New(rand.NewPCG(1, 2)),
		})
		for i := 0; i < 20; i++ {
			require.NoError(t, d.Add(foreman.AssignmentID(fmt.Sprintf("a%d", i))))
		}
		clk.Advance(time.Hour)
		var out []time.Time
		for _, e := range log.take() {
			assert.GreaterOrEqual(t, e.Deadline, t0.Add(45*time.Second))
			assert.Less(t, e.Deadline, t0.Add(55*time.Second))
			out = append(out, e.Deadline)
		}
		return out
	}
	first, second := run(), run()
	require.Len(t, first, 20)
	assert.Equal(t, first, second)
	assert.NotEqual(t, first[0], first[19], "jitter spreads deadlines")
}

func TestDeadlinesJitterCanPullADeadlineEarlier(t *testing.T) {
	// A source that yields a large jitter first and none afterwards: the
	// second beat sets a deadline earlier than the heap entry of the first.
	src := &scriptedSource{vals: []int64{int64(time.Minute) - 1, 0}}
	d, clk, log := newTestDeadlines(t, DeadlineConfig{ProgressTimeout: -1, Jitter: time.Minute, Rand: src})
	require.NoError(t, d.Add("a1"))
	clk.Advance(time.Second)
	require.NoError(t, d.Heartbeat("a1"))
	clk.Advance(45 * time.Second)
	got := log.take()
	require.Len(t, got, 1)
	assert.Equal(t, t0.Add(46*time.Second), got[0].Deadline)
	assert.Zero(t, got[0].Late)
}

type scriptedSource struct {
	vals []int64
	i    int
}

func (s *scriptedSource) Int64N(int64) int64 {
	v := s.vals[min(s.i, len(s.vals)-1)]
	s.i++
	return v
}

func TestDeadlinesOnExpiryMayCallBack(t *testing.T) {
	clk := foreman.NewFakeClock(t0)
	var d *Deadlines
	var removed []foreman.AssignmentID
	d = NewDeadlines(DeadlineConfig{Clock: clk, OnExpiry: func(e Expiry) {
		if d.Remove(e.Subject) {
			removed = append(removed, e.Subject)
		}
	}})
	defer d.Close()
	require.NoError(t, d.Add("a1"))
	clk.Advance(time.Hour)
	assert.Equal(t, []foreman.AssignmentID{"a1"}, removed)
}

func TestDeadlinesConcurrentUse(t *testing.T) {
	d, clk, _ := newTestDeadlines(t, DeadlineConfig{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				id := foreman.AssignmentID(fmt.Sprintf("g%d-%d", g, i%20))
				_ = d.Add(id)
				_ = d.Heartbeat(id)
				_ = d.Progress(id)
				if i%7 == 0 {
					d.Remove(id)
				}
			}
		}()
	}
	for i := 0; i < 50; i++ {
		clk.Advance(time.Second)
	}
	wg.Wait()
	assert.LessOrEqual(t, d.Len(), 80)
}

func TestDeadlinesExtendProgressMovesOnlyProgress(t *testing.T) {
	d, clk, log := newTestDeadlines(t, DeadlineConfig{LivenessTimeout: -1})
	require.NoError(t, d.Add("a1"))
	clk.Advance(15 * time.Minute)
	got := log.take()
	require.Len(t, got, 1)
	require.Equal(t, Progress, got[0].Kind)
	require.NoError(t, d.ExtendProgress("a1", 5*time.Minute))
	clk.Advance(5*time.Minute - time.Second)
	assert.Empty(t, log.take())
	clk.Advance(time.Second)
	got = log.take()
	require.Len(t, got, 1)
	assert.Equal(t, Progress, got[0].Kind)
	assert.Equal(t, t0.Add(20*time.Minute), got[0].Deadline)
	assert.ErrorIs(t, d.ExtendProgress("nope", time.Minute), ErrUnknownSubject)
}
