package clock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestFakeTimersFireInDeadlineOrder(t *testing.T) {
	f := NewFake(epoch)
	var order []string
	f.AfterFunc(3*time.Second, func() { order = append(order, "c") })
	f.AfterFunc(1*time.Second, func() { order = append(order, "a") })
	f.AfterFunc(2*time.Second, func() { order = append(order, "b1") })
	f.AfterFunc(2*time.Second, func() { order = append(order, "b2") })

	f.Advance(2 * time.Second)
	assert.Equal(t, []string{"a", "b1", "b2"}, order)
	assert.Equal(t, 1, f.Pending())
	f.Advance(time.Second)
	assert.Equal(t, []string{"a", "b1", "b2", "c"}, order)
	assert.Equal(t, epoch.Add(3*time.Second), f.Now())
}

func TestFakeCallbackSeesDeadlineTimeAndMayRearm(t *testing.T) {
	f := NewFake(epoch)
	var seen []time.Time
	var tm Timer
	tm = f.AfterFunc(time.Second, func() {
		seen = append(seen, f.Now())
		if len(seen) < 3 {
			tm.Reset(time.Second)
		}
	})
	f.Advance(10 * time.Second)
	require.Len(t, seen, 3)
	assert.Equal(t, epoch.Add(time.Second), seen[0])
	assert.Equal(t, epoch.Add(3*time.Second), seen[2])
	assert.Equal(t, epoch.Add(10*time.Second), f.Now())
}

func TestFakeTimerChannelStopAndReset(t *testing.T) {
	f := NewFake(epoch)
	tm := f.NewTimer(time.Minute)
	f.Advance(59 * time.Second)
	select {
	case <-tm.C():
		t.Fatal("fired early")
	default:
	}
	assert.True(t, tm.Stop())
	assert.False(t, tm.Stop())
	f.Advance(time.Hour)
	select {
	case <-tm.C():
		t.Fatal("stopped timer fired")
	default:
	}
	assert.False(t, tm.Reset(time.Second))
	f.Advance(time.Second)
	assert.Equal(t, epoch.Add(time.Hour+60*time.Second), <-tm.C())
}

func TestFakeTickerDropsTicksForSlowReceiver(t *testing.T) {
	f := NewFake(epoch)
	tk := f.NewTicker(10 * time.Second)
	f.Advance(35 * time.Second)
	assert.Equal(t, epoch.Add(10*time.Second), <-tk.C(), "first tick kept, later ones dropped")
	select {
	case <-tk.C():
		t.Fatal("buffer holds one tick only")
	default:
	}
	f.Advance(5 * time.Second)
	assert.Equal(t, epoch.Add(40*time.Second), <-tk.C())
	tk.Stop()
	assert.Equal(t, 0, f.Pending())
}

func TestFakeBlockUntilAndSleep(t *testing.T) {
	f := NewFake(epoch)
	done := make(chan error, 1)
	go func() { done <- Sleep(context.Background(), f, time.Minute) }()
	require.NoError(t, f.BlockUntil(context.Background(), 1))
	f.Advance(time.Minute)
	require.NoError(t, <-done)

	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- Sleep(ctx, f, time.Minute) }()
	require.NoError(t, f.BlockUntil(context.Background(), 1))
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)

	short, cancel2 := context.WithCancel(context.Background())
	cancel2()
	assert.ErrorIs(t, f.BlockUntil(short, 5), context.Canceled)
}

func TestFakeSetNeverGoesBackwards(t *testing.T) {
	f := NewFake(epoch)
	f.Set(epoch.Add(-time.Hour))
	assert.Equal(t, epoch, f.Now())
	_, ok := f.NextDeadline()
	assert.False(t, ok)
	f.NewTimer(time.Second)
	next, ok := f.NextDeadline()
	assert.True(t, ok)
	assert.Equal(t, epoch.Add(time.Second), next)
}

func TestRealClockAndOrReal(t *testing.T) {
	c := OrReal(nil)
	assert.WithinDuration(t, time.Now(), c.Now(), time.Minute)
	f := NewFake(epoch)
	assert.Same(t, f, OrReal(f))
	tm := c.AfterFunc(time.Hour, func() {})
	assert.True(t, tm.Stop())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, Sleep(ctx, c, time.Hour), context.Canceled)
	assert.ErrorIs(t, Sleep(ctx, c, 0), context.Canceled)
}
