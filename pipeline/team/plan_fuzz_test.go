package team_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/agentforeman/foreman/pipeline/team"
)

// FuzzParsePlan checks that any input either parses into a plan Add would
// take (every story valid, ids unique, every after known) or is refused as
// a *PlanError; never a panic, never another error.
func FuzzParsePlan(f *testing.F) {
	for _, seed := range []string{
		team.PlanExample,
		"stories:\n  - {id: A, title: a}\n",
		"stories:\n  - {id: A, title: a, after: [B]}\n  - {id: B, title: b, after: [A]}\n",
		"gates:\n  - {argv: [x], level: L9, timeout: 5m}\nstories: []\n",
		"a: &a [*a, *a]\nstories: *a\n",
		"stories:\n  - id: A\n    title: a\n    title: b\n",
		"---\n...\n---\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := team.ParsePlan(bytes.NewReader(data))
		if err != nil {
			var pe *team.PlanError
			if !errors.As(err, &pe) || !errors.Is(err, team.ErrInvalidPlan) {
				t.Fatalf("error is not a *PlanError: %T %v", err, err)
			}
			if pe.Line < 0 {
				t.Fatalf("negative line %d", pe.Line)
			}
			return
		}
		if len(p.Stories) == 0 {
			t.Fatal("a plan without stories was accepted")
		}
		seen := map[string]bool{}
		for _, s := range p.Stories {
			if err := s.ID.Validate(); err != nil || s.Title == "" {
				t.Fatalf("invalid story accepted: %+v (%v)", s, err)
			}
			if seen[string(s.ID)] {
				t.Fatalf("duplicate id %s accepted", s.ID)
			}
			seen[string(s.ID)] = true
		}
		for _, s := range p.Stories {
			for _, a := range s.After {
				if !seen[string(a)] || a == s.ID {
					t.Fatalf("story %s after %s accepted", s.ID, a)
				}
			}
		}
		for _, l := range p.UntrustedGates.Levels {
			for _, c := range l.Checks {
				if len(c.Argv) == 0 {
					t.Fatalf("gate %q without argv accepted", c.Name)
				}
			}
		}
	})
}
