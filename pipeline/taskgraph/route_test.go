package taskgraph

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline/message"
)

func TestRoute(t *testing.T) {
	cases := []struct {
		text string
		want Handler
		role string
	}{
		{"[tester] TEST-001 completed", HandleCallback, "tester"},
		{"[fe-qa] done, check the report and resume", HandleCallback, "fe-qa"}, // priority 1 beats 2 and 3
		{"[discussant] progress", HandleCallback, "discussant"},
		{"[coordinator] check", HandleCheck, ""}, // not a worker role
		{"[poet] resume", HandleResume, ""},      // unknown role: not a callback
		{"check", HandleCheck, ""},
		{"status please", HandleCheck, ""},
		{"STATUS", HandleCheck, ""},
		{"check then resume", HandleCheck, ""}, // priority 2 beats 3
		{"resume", HandleResume, ""},
		{"continue", HandleResume, ""},
		{"next", HandleResume, ""},
		{"", HandleSpawnNext, ""},
		{"go ahead", HandleSpawnNext, ""},
	}
	for _, tc := range cases {
		w := Route(tc.text, nil)
		assert.Equal(t, tc.want, w.Handler, "%q", tc.text)
		assert.Equal(t, tc.role, w.Role, "%q", tc.text)
		assert.Equal(t, tc.text, w.Text)
		assert.Equal(t, OutcomeNone, w.Outcome, "a bare text is never fenced, so it reports no outcome")
	}
	w := Route("[tester] TEST-001 completed", nil)
	assert.Equal(t, "TEST-001", w.Task)
	assert.Equal(t, HandleCheck, Route("[tester] check", []string{"poet"}).Handler, "configured roles replace the default")
	assert.Equal(t, HandleCallback, Route("[poet] x", []string{"poet"}).Handler)
}

func TestRouteEnvelope(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for status, want := range map[string]Outcome{"completed": OutcomeCompleted, "failed": OutcomeFailed, "in_progress": OutcomeNone} {
		env, err := message.Open("w1", "TEST-001.4", "[tester] TEST-001 "+status, at)
		require.NoError(t, err)
		w := RouteEnvelope(env, nil)
		assert.Equal(t, WakeUp{Handler: HandleCallback, Role: "tester", Assignment: "TEST-001.4", Task: "TEST-001", Outcome: want, Text: env.Raw, At: at}, w)
	}
	env, _ := message.Open("w1", "TEST-001.4", "[tester] all good", at)
	w := RouteEnvelope(env, nil)
	assert.Equal(t, HandleCallback, w.Handler)
	assert.Equal(t, OutcomeNone, w.Outcome, "a non-canonical callback only wakes")
	env, _ = message.Open("w1", "TEST-001.4", "status", at)
	assert.Equal(t, HandleCheck, RouteEnvelope(env, nil).Handler)
	assert.Equal(t, "handleCheck", HandleCheck.String())
}
