package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The README's first command: the demo run succeeds in two iterations.
func TestDemoRunSucceedsAfterFeedback(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go vet and go test in a real repository")
	}
	var out bytes.Buffer
	ok, err := run(context.Background(), options{prompt: "Add an Add function with a test.", format: "text", maxIterations: 3, timeout: 0, quiet: true}, &out)
	require.NoError(t, err, out.String())
	assert.True(t, ok, out.String())
	assert.Contains(t, out.String(), "iteration 1")
	assert.Contains(t, out.String(), "failed: L1/test")
	assert.Contains(t, out.String(), "outcome   SUCCEEDED (verified) after 2 iterations")
}

func TestDirWithoutAgentIsAnError(t *testing.T) {
	var out bytes.Buffer
	_, err := run(context.Background(), options{dir: t.TempDir(), format: "text"}, &out)
	assert.ErrorContains(t, err, "-dir needs -agent")
}
