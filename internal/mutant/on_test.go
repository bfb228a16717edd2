//go:build foreman_mutants

package mutant_test

import (
	"testing"

	"github.com/agentforeman/foreman/internal/mutant"
	"github.com/stretchr/testify/assert"
)

// With the tag, FOREMAN_MUTANT switches on the one mutant it names, and
// nothing when it is unset.
func TestTaggedBuildSwitchesOnTheNamedMutant(t *testing.T) {
	assert.True(t, mutant.Enabled)
	t.Setenv(mutant.Env, "")
	for _, m := range mutant.All() {
		assert.False(t, mutant.Active(m), "%s with %s unset", m, mutant.Env)
	}
	for _, m := range mutant.All() {
		t.Setenv(mutant.Env, string(m))
		for _, other := range mutant.All() {
			assert.Equal(t, m == other, mutant.Active(other), "%s=%s: %s", mutant.Env, m, other)
		}
	}
}
