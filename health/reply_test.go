package health_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
)

func TestParseStatusReply(t *testing.T) {
	ok := []struct {
		name, text string
		want       health.StatusReply
	}{
		{"canonical", "Status for PROJ-1: Stage 2 EXECUTING. Current step: running go test.",
			health.StatusReply{Item: "PROJ-1", Stage: 2, Status: health.StatusExecuting, Step: "running go test"}},
		{"chatter around it", "sure!\n  Status for PROJ-1: Stage 0 WAITING. Current step: idle  \nbye",
			health.StatusReply{Item: "PROJ-1", Stage: 0, Status: health.StatusWaiting, Step: "idle"}},
		{"colon after the id", "Status for PROJ-1:: Stage 3 ERROR. Current step: gate failed.",
			health.StatusReply{Item: "PROJ-1", Stage: 3, Status: health.StatusError, Step: "gate failed"}},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			got, err := health.ParseStatusReply(tc.text)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}

	bad := []struct {
		name, text string
		cause      error // matched with errors.Is besides ErrUnparseableReply; nil for none
	}{
		{"no status line", "I am working on it", nil},
		{"unknown status", "Status for PROJ-1: Stage 2 SLEEPING. Current step: x.", nil},
		{"invalid item id", "Status for ../x: Stage 2 EXECUTING. Current step: x.", foreman.ErrInvalidID},
		{"stage out of range", "Status for PROJ-1: Stage 99999999999999999999 EXECUTING. Current step: x.", nil},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := health.ParseStatusReply(tc.text)
			var re *health.ReplyError
			require.ErrorAs(t, err, &re)
			assert.ErrorIs(t, err, health.ErrUnparseableReply)
			assert.Equal(t, tc.text, re.Text)
			if tc.cause != nil {
				assert.ErrorIs(t, err, tc.cause)
			} else {
				assert.False(t, errors.Is(err, foreman.ErrInvalidID))
			}
		})
	}
}
