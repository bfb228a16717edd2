package worker

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goroutineID is the running goroutine's number, from its stack's header.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	return string(bytes.Fields(buf)[1])
}

// waitFor spins (no sleep) until cond holds; a hang guard fails the test.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "condition never held")
		runtime.Gosched()
	}
}

func (s *spawner) idleCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.idle)
}

// A finished function's goroutine runs the next one; close ends the
// waiting goroutines, and later spawns still run.
func TestTheSpawnerReusesGoroutinesAndCloseEndsThem(t *testing.T) {
	s := &spawner{}
	ids := make(chan string, 1)
	s.spawn(taskFunc(func() { ids <- goroutineID() }))
	first := <-ids
	waitFor(t, func() bool { return s.idleCount() == 1 })
	s.spawn(taskFunc(func() { ids <- goroutineID() }))
	assert.Equal(t, first, <-ids, "the waiting goroutine ran the second function")
	waitFor(t, func() bool { return s.idleCount() == 1 })

	before := runtime.NumGoroutine()
	s.close()
	assert.Zero(t, s.idleCount())
	waitFor(t, func() bool { return runtime.NumGoroutine() < before })

	s.spawn(taskFunc(func() { ids <- goroutineID() }))
	assert.NotEqual(t, first, <-ids)
	waitFor(t, func() bool { return runtime.NumGoroutine() < before })
	assert.Zero(t, s.idleCount(), "a stopped spawner keeps no goroutine")
}

// At most maxIdleGoroutines wait.
func TestTheSpawnerKeepsAtMostMaxIdleGoroutines(t *testing.T) {
	s := &spawner{}
	defer s.close()
	release := make(chan struct{})
	for range maxIdleGoroutines + 10 {
		s.spawn(taskFunc(func() { <-release }))
	}
	close(release)
	waitFor(t, func() bool { return s.idleCount() == maxIdleGoroutines })
	assert.Equal(t, maxIdleGoroutines, s.idleCount())
}
