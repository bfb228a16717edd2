package pipeline

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deepCopy copies everything of s that Step could reach through a pointer
// or a slice.
func deepCopy(s State) State {
	s.Stages = slices.Clone(s.Stages)
	if s.Pause != nil {
		p := *s.Pause
		p.Files = slices.Clone(p.Files)
		s.Pause = &p
	}
	return s
}

// walkStep applies ev to s at now for randomWalks and returns the next
// state and Step's error; where names the step in failure messages.
type walkStep func(f *Flow, s State, ev Event, now time.Time, where string) (State, error)

// randomWalks walks items through random events (every kind, from the
// current, the last and a stranger's assignment, with valid and invalid
// stages, outcomes, scores and boards, and details too long for a
// transition's text buffer) with two StoryFlows, continuing from each
// state step applied without error. It returns how many applied.
func randomWalks(t *testing.T, step walkStep) int {
	t.Helper()
	outcomes := []Outcome{Complete, Error, Go, NoGo, Pass, Concerns, Waived, Fail}
	scores := []string{"", "0", "4", "9", "92", "x"}
	details := []string{"", "the reason", strings.Repeat("a long detail ", 20)}
	flows := []*Flow{StoryFlow(StoryConfig{}), StoryFlow(StoryConfig{ValidationRetries: 2, QualityCycles: 3, CrashBudget: 2})}
	steps := 0
	for fi, f := range flows {
		for seed := range uint64(50) {
			r := rand.New(rand.NewPCG(uint64(fi), seed))
			s := State{Item: item}
			now := t0
			for range 60 {
				now = now.Add(time.Duration(r.IntN(100)) * time.Second)
				ev := Event{Kind: EventKind(1 + r.IntN(int(numEventKinds)-1)), Stage: s.Stage,
					Outcome: outcomes[r.IntN(len(outcomes))], Score: scores[r.IntN(len(scores))],
					Detail: details[r.IntN(len(details))], Tasks: 3, Title: "Login", Commit: "c0ffee"}
				if s.Status == StatusActive && r.IntN(2) == 0 {
					ev.Kind = EventReport
				}
				switch r.IntN(4) {
				case 0:
					ev.Worker, ev.Assignment = s.Last.Worker, s.Last.Assignment
				case 1:
					ev.Worker, ev.Assignment = "someone", "x"
				default:
					ev.Worker, ev.Assignment = s.Worker, s.Assignment
				}
				if r.IntN(5) == 0 {
					ev.Stage = r.IntN(len(f.Stages))
				}
				if r.IntN(4) > 0 {
					ev.Board = boardOK(r.IntN(4))
				}
				if ev.Kind == EventMergeConflict {
					ev.Files = []string{"a.go", "b.go"}
				}
				next, err := step(f, s, ev, now, fmt.Sprintf("flow %d seed %d: %s", fi, seed, ev.Kind))
				if err == nil {
					s = next
					steps++
				}
			}
		}
	}
	return steps
}

// TestStepLeavesItsInputUntouched checks after every Step of randomWalks
// that the state it was given is as it was. Step copies only the stage
// records it changes and shares the rest, so this guards the
// copy-on-write.
func TestStepLeavesItsInputUntouched(t *testing.T) {
	steps := randomWalks(t, func(f *Flow, s State, ev Event, now time.Time, where string) (State, error) {
		before := deepCopy(s)
		next, _, err := f.Step(s, ev, now)
		require.Equal(t, before, s, where+" changed its input")
		return next, err
	})
	assert.Greater(t, steps, 1000, "most events applied")
}
