//go:build !foreman_mutants

package mutant_test

import (
	"testing"

	"github.com/agentforeman/foreman/internal/mutant"
	"github.com/stretchr/testify/assert"
)

// Without the foreman_mutants tag no mutant can be switched on, not even
// with FOREMAN_MUTANT naming it.
func TestPlainBuildSwitchesNothingOn(t *testing.T) {
	assert.False(t, mutant.Enabled)
	for _, m := range mutant.All() {
		t.Setenv(mutant.Env, string(m))
		assert.False(t, mutant.Active(m), "%s", m)
	}
}
