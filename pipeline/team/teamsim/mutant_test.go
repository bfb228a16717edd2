//go:build foreman_mutants

package teamsim_test

import (
	"context"
	"testing"

	"github.com/agentforeman/foreman/internal/mutant"
	"github.com/agentforeman/foreman/pipeline/team/teamsim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mutants are the deliberate bugs, each with the invariant that must catch
// it and the first seed that did (docs/simulation.md keeps the table).
// Every one sits in shipped code (the worker pool, the pipeline's core and
// runtime, the team's coordinator) behind internal/mutant.
var mutants = []struct {
	m         mutant.Name
	invariant string
	seed      uint64
}{
	{mutant.FenceByName, teamsim.InvStaleNoChange, 413},
	{mutant.MergeBeforePersist, teamsim.InvMergeOnce, 35},
	{mutant.NoReAck, teamsim.InvDuplicateReAcked, 2},
	{mutant.StallIsProgress, teamsim.InvStallStopped, 2},
	{mutant.CompleteOnPause, teamsim.InvPausedDependents, 2},
	{mutant.SpawnTwice, teamsim.InvSpawnOnce, 2},
	{mutant.NoBudget, teamsim.InvBudget, 20},
}

// config is the simulation of seed; the mutant is switched on through
// FOREMAN_MUTANT (set by the caller), in the shipped code or the team's
// coordinator.
func config(seed uint64, _ mutant.Name) teamsim.Config { return teamsim.Config{Seed: seed} }

// TestMutantsAreCaught (go test -tags foreman_mutants): every deliberate
// bug breaks its invariant at its recorded seed, and the same seed
// without the bug breaks none. A mutant recorded with seed 0 is searched
// for: the test logs the first seed that catches it (and fails, so that
// the seed gets recorded).
func TestMutantsAreCaught(t *testing.T) {
	require.True(t, mutant.Enabled, "built without the foreman_mutants tag")
	require.Len(t, mutants, len(mutant.All()), "every mutant has a row")
	ctx := context.Background()
	for _, mu := range mutants {
		t.Run(string(mu.m), func(t *testing.T) {
			t.Setenv(mutant.Env, string(mu.m))
			if mu.seed == 0 {
				for seed := uint64(1); seed <= 3000; seed++ {
					res, _ := teamsim.Run(ctx, config(seed, mu.m))
					for _, v := range res.Violations {
						t.Logf("seed %d: %s", seed, v)
					}
					if len(res.Violations) > 0 {
						t.Fatalf("first seed %d", seed)
					}
				}
				t.Fatal("not caught in 3000 seeds")
			}
			res, err := teamsim.Run(ctx, config(mu.seed, mu.m))
			assert.NoError(t, err)
			var caught []string
			for _, v := range res.Violations {
				caught = append(caught, v.Invariant)
			}
			assert.Contains(t, caught, mu.invariant, "seed %d: %v", mu.seed, res.Violations)
			t.Setenv(mutant.Env, "")
			clean, err := teamsim.Run(ctx, teamsim.Config{Seed: mu.seed})
			assert.NoError(t, err)
			assert.NoError(t, clean.Err(), "the seed without the bug")
		})
	}
}
