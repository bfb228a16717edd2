package teamsim_test

import (
	"context"
	"testing"

	"github.com/agentforeman/foreman/pipeline/team/teamsim"
	"github.com/stretchr/testify/assert"
)

// mutants are the deliberate bugs, each with the invariant that must catch
// it and the first seed that did (docs/simulation.md keeps the table).
var mutants = []struct {
	m         teamsim.Mutant
	invariant string
	seed      uint64
}{
	{teamsim.MutantFenceByName, teamsim.InvStaleNoChange, 1000},
	{teamsim.MutantMergeBeforePersist, teamsim.InvMergeOnce, 96},
	{teamsim.MutantNoReAck, teamsim.InvDuplicateReAcked, 2},
	{teamsim.MutantStallIsProgress, teamsim.InvStallStopped, 4},
	{teamsim.MutantCompleteOnPause, teamsim.InvPausedDependents, 2},
	{teamsim.MutantSpawnTwice, teamsim.InvSpawnOnce, 2},
	{teamsim.MutantNoBudget, teamsim.InvBudget, 20},
}

// TestMutantsAreCaught: every deliberate bug breaks its invariant at its
// recorded seed, and the same seed without the bug breaks none. A mutant
// recorded with seed 0 is searched for: the test logs the first seed
// that catches it (and fails, so that the seed gets recorded).
func TestMutantsAreCaught(t *testing.T) {
	ctx := context.Background()
	for _, mu := range mutants {
		t.Run(string(mu.m), func(t *testing.T) {
			if mu.seed == 0 {
				for seed := uint64(1); seed <= 3000; seed++ {
					res, _ := teamsim.Run(ctx, teamsim.WithMutant(teamsim.Config{Seed: seed}, mu.m))
					for _, v := range res.Violations {
						t.Logf("seed %d: %s", seed, v)
					}
					if len(res.Violations) > 0 {
						t.Fatalf("first seed %d", seed)
					}
				}
				t.Fatal("not caught in 3000 seeds")
			}
			res, err := teamsim.Run(ctx, teamsim.WithMutant(teamsim.Config{Seed: mu.seed}, mu.m))
			assert.NoError(t, err)
			var caught []string
			for _, v := range res.Violations {
				caught = append(caught, v.Invariant)
			}
			assert.Contains(t, caught, mu.invariant, "seed %d: %v", mu.seed, res.Violations)
			clean, err := teamsim.Run(ctx, teamsim.Config{Seed: mu.seed})
			assert.NoError(t, err)
			assert.NoError(t, clean.Err(), "the seed without the bug")
		})
	}
}
