package taskgraph

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNextStatusTable(t *testing.T) {
	valid := map[Status]map[Event]Status{
		Pending:    {EventStart: InProgress, EventCancel: Cancelled, EventPark: Parked},
		InProgress: {EventComplete: Completed, EventFail: Failed, EventReset: Pending, EventCancel: Cancelled, EventPark: Parked},
		Failed:     {EventReset: Pending, EventCancel: Cancelled, EventPark: Parked},
		Parked:     {EventComplete: Completed, EventCancel: Cancelled, EventUnpark: Pending},
	}
	for from := Pending; from <= Parked; from++ {
		for ev := EventStart; ev < numEvents; ev++ {
			to, err := NextStatus("T-1", from, ev)
			want, ok := valid[from][ev]
			if ok {
				require.NoError(t, err, "%s %s", from, ev)
				assert.Equal(t, want, to, "%s %s", from, ev)
				continue
			}
			var te *TransitionError
			require.ErrorAs(t, err, &te, "%s %s", from, ev)
			assert.ErrorIs(t, err, ErrInvalidTransition)
			assert.Equal(t, TransitionError{Task: "T-1", From: from, Event: ev}, *te)
			assert.Equal(t, from, to, "an invalid event leaves the status")
		}
	}
	_, err := NextStatus("T-1", Status(9), EventStart)
	assert.ErrorIs(t, err, ErrInvalidTransition)
	_, err = NextStatus("T-1", Pending, Event(9))
	assert.ErrorIs(t, err, ErrInvalidTransition)
	assert.Equal(t, "taskgraph: task T-1: cannot complete a pending task", (&TransitionError{Task: "T-1", From: Pending, Event: EventComplete}).Error())
}

func TestStatusNames(t *testing.T) {
	for s := Pending; s <= Parked; s++ {
		b, err := json.Marshal(s)
		require.NoError(t, err)
		var back Status
		require.NoError(t, json.Unmarshal(b, &back))
		assert.Equal(t, s, back)
	}
	assert.Equal(t, `"in_progress"`, mustJSON(t, InProgress))
	assert.Equal(t, `"parked"`, mustJSON(t, Parked))
	assert.Equal(t, "unpark", EventUnpark.String())
	_, err := ParseStatus("done")
	assert.ErrorIs(t, err, ErrInvalidStatus)
	_, err = Status(7).MarshalText()
	assert.Error(t, err)
	assert.Equal(t, "Status(7)", Status(7).String())
	assert.Equal(t, "reset", EventReset.String())
	assert.Equal(t, "Event(9)", Event(9).String())
	assert.True(t, errors.Is(json.Unmarshal([]byte(`"nope"`), new(Status)), ErrInvalidStatus))
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
