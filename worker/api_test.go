package worker_test

import (
	"context"
	"testing"

	"github.com/agentforeman/foreman/worker"
	"github.com/stretchr/testify/assert"
)

func TestNoCommitsReadsNothing(t *testing.T) {
	var r worker.CommitReader = worker.NoCommits
	head, err := r.Head(context.Background(), t.TempDir())
	assert.NoError(t, err)
	assert.Empty(t, head)
}
