package teamweb_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teamweb"
)

// A paused story and one blocked behind it; every bad action is refused
// with its cause and changes nothing; a good one decides once, however
// often it is sent.
func TestActionsAreSafeAndIdempotent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.touch(t, "A.fail-stage-1")
	f.add(t, team.Story{ID: "A", Title: "first"}, team.Story{ID: "B", Title: "second", After: []foreman.ItemID{"A"}})
	res := f.run(t)
	require.Equal(t, 1, res.Paused, res.String())
	require.Equal(t, 1, res.Blocked, res.String())
	_, srv := serve(t, f, teamweb.Config{TrustedOrigins: []string{"https://dash.example.com"}})
	ctx := context.Background()
	before, err := f.team.Status(ctx)
	require.NoError(t, err)
	pause := storyOf(before, "A").Pause
	require.NotNil(t, pause)
	assert.Contains(t, pause.Message, "boom 1")

	good := url.Values{"story": {"A"}, "action": {"retry"}, "escalation": {pause.Key}}
	with := func(kv ...string) url.Values {
		v := url.Values{}
		for k, vs := range good {
			v[k] = vs
		}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	token := map[string]string{"X-Foreman-Token": testToken}
	withToken := func(kv ...string) map[string]string {
		h := map[string]string{"X-Foreman-Token": testToken}
		for i := 0; i < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}
	bad := []struct {
		name   string
		form   url.Values
		header map[string]string
		status int
		code   string
		says   string
	}{
		{"no token", good, nil, 401, "no_token", "an action needs the token"},
		{"a wrong token", good, map[string]string{"X-Foreman-Token": testToken + "x"}, 403, "bad_token", "the token is wrong"},
		{"a wrong bearer token", good, map[string]string{"Authorization": "Bearer nope"}, 403, "bad_token", "the token is wrong"},
		{"a wrong token in the form", with("token", "nope"), nil, 403, "bad_token", "the token is wrong"},
		{"a forged origin", good, withToken("Origin", "https://evil.example"), 403, "cross_origin", `Origin "https://evil.example" is not this page's`},
		{"another site says the browser", good, withToken("Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"), 403, "cross_origin", "is not this page's"},
		{"another site, no Origin", good, withToken("Sec-Fetch-Site", "cross-site"), 403, "cross_origin", "Sec-Fetch-Site cross-site"},
		{"a sibling site", good, withToken("Sec-Fetch-Site", "same-site"), 403, "cross_origin", "Sec-Fetch-Site"},
		{"an unknown story", with("story", "Z", "escalation", ""), token, 404, "unknown_story", "team: unknown story: Z"},
		{"an unknown story with a key", with("story", "Z"), token, 404, "unknown_story", "unknown story"},
		{"no story", with("story", ""), token, 400, "bad_request", "no story"},
		{"an unknown action", with("action", "merge"), token, 400, "unknown_action", `team: unknown action: "merge"`},
		{"no action", with("action", ""), token, 400, "unknown_action", "unknown action"},
		{"a story that is not paused", with("story", "B", "escalation", ""), token, 409, "not_paused", "team: story is not paused: B is NEW"},
		{"an escalation that is not the story's", with("escalation", "A/1/2/Escalate"), token, 409, "stale_escalation", "not its current one"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			status, body := post(t, srv, c.form, c.header)
			assert.Equal(t, c.status, status)
			assert.Equal(t, c.code, body["code"])
			assert.Contains(t, body["error"], c.says)
		})
	}
	t.Run("not a form", func(t *testing.T) {
		req, err := http.NewRequest("POST", srv.URL+"/api/resolve", strings.NewReader("story=A&action=retry"))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "text/plain")
		req.Header.Set("X-Foreman-Token", testToken)
		status, body := do(t, req)
		assert.Equal(t, 400, status)
		assert.Contains(t, body["error"], `Content-Type "text/plain"`)
	})
	after, err := f.team.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, before.Stories, after.Stories, "no refused request changed anything")
	assert.Empty(t, resolvedEvents(f.team))

	// A trusted origin, and the form's token: decided.
	status, body := post(t, srv, with("token", testToken), map[string]string{"Origin": "https://dash.example.com", "Sec-Fetch-Site": "cross-site"})
	require.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, "retry", body["action"])
	// The same decision again, as JSON with a bearer token (a double
	// click): decided once.
	req, err := http.NewRequest("POST", srv.URL+"/api/resolve", strings.NewReader(`{"story":"A","action":"retry","escalation":"`+pause.Key+`"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	status, body = do(t, req)
	require.Equal(t, http.StatusOK, status, body)
	assert.Len(t, resolvedEvents(f.team), 1, "one decision")
	// Another decision about the same pause: refused.
	status, body = post(t, srv, with("action", "skip"), token)
	assert.Equal(t, http.StatusConflict, status)
	assert.Contains(t, body["error"], "already resolved (retry)")

	f.remove(t, "A.fail-stage-1")
	res = f.run(t)
	require.Equal(t, 2, res.Merged, res.String())
	// A late click on the page that still shows the old escalation: done
	// already, not done twice.
	status, body = post(t, srv, good, token)
	require.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, true, body["already"])
	assert.Equal(t, "merged", body["state"])
	// Without the escalation's key, the team's own answer: not paused.
	status, body = post(t, srv, with("escalation", ""), token)
	assert.Equal(t, http.StatusConflict, status)
	assert.Equal(t, "not_paused", body["code"])
	assert.Len(t, resolvedEvents(f.team), 1, "still one decision")
	assert.Len(t, strings.Fields(git(t, f.repo, "log", "--format=%h", "main")), 3, "A and B merged once each")
}

func resolvedEvents(tm *team.Team) []team.Event {
	var out []team.Event
	for _, e := range tm.Events(0) {
		if e.Kind == team.EventStoryResolved {
			out = append(out, e)
		}
	}
	return out
}
