package worker

import "sync"

// maxIdleGoroutines bounds the goroutines a Runtime keeps waiting for
// work between runs.
const maxIdleGoroutines = 256

// spawner runs tasks on goroutines that it keeps for the next one: a
// run takes two goroutines (its supervisor and its agent's execution), and
// a goroutine created for each would be created and then grow its stack
// by copying, since an agent's execution and a message's delivery need
// more than a new goroutine's first few kilobytes (a fifth to a third of
// the Runtime's CPU per no-op run, measured). Up to maxIdleGoroutines
// wait for work once theirs is done, the last to finish first served (its
// stack is the warmest); close ends them.
type spawner struct {
	mu      sync.Mutex
	idle    []chan task // each waiting goroutine's own channel (capacity 1)
	stopped bool
}

// A task is what a spawner runs. A run's tasks are pointer-shaped values
// (a *run, a runExecution), which an interface holds without an
// allocation, where a closure over the run would take one.
type task interface{ do() }

// taskFunc runs a function as a task.
type taskFunc func()

func (f taskFunc) do() { f() }

// spawn runs f on a waiting goroutine, or on a new one.
func (s *spawner) spawn(f task) {
	s.mu.Lock()
	if n := len(s.idle); n > 0 {
		ch := s.idle[n-1]
		s.idle[n-1] = nil
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		ch <- f // capacity 1: never blocks
		return
	}
	s.mu.Unlock()
	go s.loop(f)
}

func (s *spawner) loop(f task) {
	var ch chan task
	for f != nil {
		f.do()
		s.mu.Lock()
		if s.stopped || len(s.idle) >= maxIdleGoroutines {
			s.mu.Unlock()
			return
		}
		if ch == nil {
			ch = make(chan task, 1)
		}
		s.idle = append(s.idle, ch)
		s.mu.Unlock()
		f = <-ch // nil once closed
	}
}

// close ends the waiting goroutines; later spawns still run, each on a
// goroutine of its own that ends with it.
func (s *spawner) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	for _, ch := range s.idle {
		close(ch)
	}
	s.idle = nil
}
