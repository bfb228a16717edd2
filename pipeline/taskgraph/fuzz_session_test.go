package taskgraph

import (
	"bytes"
	"errors"
	"testing"

	"github.com/agentforeman/foreman/pipeline/message"
)

// sessionSeeds are sessions as the runtime stores them: new, with workers
// out, with a task completed and counters, and completed.
func sessionSeeds(f *testing.F) [][]byte {
	c := NewCore(CoreConfig{})
	s := newSession(f, c, ModeFullstack)
	var seeds [][]byte
	keep := func(s *Session) {
		data, err := s.MarshalJSON()
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, data)
	}
	keep(s)
	s, _ = handle(f, c, s, WakeUp{})
	keep(s)
	s, _ = complete(f, c, s, "PLAN-001")
	s.Counters = Counters{Stale: 2, Duplicate: 1}
	keep(s)
	custom := customSession(f, c, TaskSpec{Subject: "A-1", Role: "executor"}, TaskSpec{Subject: "B-2", Role: "tester", BlockedBy: []string{"A-1"}})
	custom, _ = handle(f, c, custom, WakeUp{})
	custom, _ = complete(f, c, custom, "A-1")
	keep(custom)
	return seeds
}

// FuzzDecodeSession feeds DecodeSession arbitrary bytes: it either returns a
// *CorruptSessionError (matching ErrCorruptSession) or a session that
// encodes again to bytes that decode to the same encoding, and that the
// core can report on and step with a routed wake-up without panicking.
func FuzzDecodeSession(f *testing.F) {
	for _, seed := range sessionSeeds(f) {
		f.Add(seed, "[executor] IMPL-001 completed: done")
		f.Add(seed, "status")
	}
	f.Add([]byte(`{"session_id":"s1","mode":"custom","status":"active","tasks":[{"subject":"A","blocked_by":["A"]}]}`), "next")
	f.Add([]byte(`{"session_id":"s1","mode":"custom","status":"active","tasks":[{"subject":"A"},{"subject":"A"}]}`), "resume")
	f.Add([]byte(`{"session_id":"s1","status":"weird","tasks":[]}`), "")
	f.Add([]byte(`{"session_id":"s2","status":"active","tasks":[]}`), "")
	f.Add([]byte(`{"session_id":"s1","status":"active","active_workers":[{"task_subject":"NOPE","role":"executor"}],"tasks":[]}`), "[executor] NOPE completed")
	f.Add([]byte(`null`), "")
	f.Fuzz(func(t *testing.T, data []byte, text string) {
		s, err := DecodeSession("s1", data)
		if err != nil {
			var ce *CorruptSessionError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorruptSession) || s != nil {
				t.Fatalf("DecodeSession(%q) = %v, %v; want nil and a *CorruptSessionError", data, s, err)
			}
			return
		}
		again, err := s.MarshalJSON()
		if err != nil {
			t.Fatalf("a session decoded from %q does not encode: %v", data, err)
		}
		back, err := DecodeSession("s1", again)
		if err != nil {
			t.Fatalf("decoded %q, encoded %q, which does not decode: %v", data, again, err)
		}
		third, err := back.MarshalJSON()
		if err != nil || !bytes.Equal(again, third) {
			t.Fatalf("encoding is not stable: %q then %q (%v)", again, third, err)
		}
		c := NewCore(CoreConfig{})
		_ = c.Status(s, t0).Text()
		env, _ := message.Open("w", "", text, t0)
		_, _, _ = c.Handle(s, RouteEnvelope(env, nil).WithTime(t0))
		_, _, _ = c.Handle(s, Route(text, nil).WithTime(t0))
	})
}
