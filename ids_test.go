package foreman_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentforeman/foreman"
)

func TestIDTypesValidate(t *testing.T) {
	assert.NoError(t, foreman.ItemID("US-001").Validate())
	assert.NoError(t, foreman.WorkerID("worker-1").Validate())
	assert.NoError(t, foreman.AssignmentID("a1.2").Validate())
	for _, err := range []error{
		foreman.ItemID("../x").Validate(),
		foreman.WorkerID("-w").Validate(),
		foreman.AssignmentID("").Validate(),
	} {
		assert.ErrorIs(t, err, foreman.ErrInvalidID)
	}
	assert.ErrorContains(t, foreman.WorkerID("-w").Validate(), "invalid worker id")
}

func ExampleItemID_Validate() {
	for _, id := range []foreman.ItemID{"US-042", "../../etc/passwd", "--force"} {
		err := id.Validate()
		fmt.Println(id, errors.Is(err, foreman.ErrInvalidID))
	}
	// Output:
	// US-042 false
	// ../../etc/passwd true
	// --force true
}

func TestGitErrorIsMatchableOutsideTheModule(t *testing.T) {
	var err error = fmt.Errorf("merge: %w", &foreman.GitError{Args: []string{"merge-tree"}, ExitCode: 1, Stderr: "conflict"})
	var gerr *foreman.GitError
	if assert.ErrorAs(t, err, &gerr) {
		assert.Equal(t, 1, gerr.ExitCode)
		assert.Equal(t, "conflict", gerr.Stderr)
	}
}
