package phases_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentforeman/foreman/phases"
)

func TestCommandsAndValidate(t *testing.T) {
	p := phases.Commands(phases.L1Tests, "go vet ./...", "  go test -count=1 ./... ")
	assert.Equal(t, phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: []phases.GateCheck{
		{Name: "go vet ./...", Argv: []string{"go", "vet", "./..."}},
		{Name: "go test -count=1 ./...", Argv: []string{"go", "test", "-count=1", "./..."}},
	}}}}, p)
	assert.NoError(t, p.Validate())

	bad := []struct {
		plan phases.GatePlan
		says string
	}{
		{phases.Commands(phases.L1Tests, "go test", " "), `check 1 of level L1 ("") has no command`},
		{phases.Commands("L9", "true"), `level 0 is "L9"`},
		{phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L0Contracts}, {Level: phases.L0Contracts}}}, "level L0 appears twice"},
	}
	for _, b := range bad {
		err := b.plan.Validate()
		assert.ErrorIs(t, err, phases.ErrInvalidGatePlan)
		assert.ErrorContains(t, err, b.says)
	}
}

func ExampleCommands() {
	plan := phases.Commands(phases.L1Tests, "go vet ./...", "go test ./...")
	for _, c := range plan.Levels[0].Checks {
		fmt.Printf("%s: %q\n", plan.Levels[0].Level, c.Argv)
	}
	// Output:
	// L1: ["go" "vet" "./..."]
	// L1: ["go" "test" "./..."]
}
