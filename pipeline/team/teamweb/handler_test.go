package teamweb_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teamweb"
)

func TestNewRefusesABadConfig(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cases := map[string]struct {
		team *team.Team
		cfg  teamweb.Config
		want string
	}{
		"no team":            {nil, teamweb.Config{Token: testToken}, "no team"},
		"no token":           {f.team, teamweb.Config{}, "Token is 0 characters"},
		"short token":        {f.team, teamweb.Config{Token: "secret"}, "Token is 6 characters; at least 16"},
		"negative timeout":   {f.team, teamweb.Config{Token: testToken, WriteTimeout: -1}, "cannot be negative"},
		"bad trusted origin": {f.team, teamweb.Config{Token: testToken, TrustedOrigins: []string{"not an origin"}}, "TrustedOrigins"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h, err := teamweb.New(c.team, c.cfg)
			assert.Nil(t, h)
			require.ErrorIs(t, err, teamweb.ErrInvalidConfig)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	assert.Len(t, teamweb.NewToken(), 32)
	assert.NotEqual(t, teamweb.NewToken(), teamweb.NewToken())
}

func TestThePageAndItsFilesAreServedFromTheBinary(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, srv := serve(t, f, teamweb.Config{})
	cases := []struct{ path, contentType, contains string }{
		{"/", "text/html; charset=utf-8", `<svg id="graph"`},
		{"/static/app.js", "text/javascript; charset=utf-8", "new EventSource("},
		{"/static/style.css", "text/css; charset=utf-8", "--running"},
	}
	for _, c := range cases {
		resp, err := http.Get(srv.URL + c.path)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode, c.path)
		assert.Equal(t, c.contentType, resp.Header.Get("Content-Type"), c.path)
		assert.Contains(t, string(body), c.contains, c.path)
		assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"), "no CORS")
		// Nothing is loaded from another origin (the SVG namespace is a
		// name, not a fetch).
		elsewhere := regexp.MustCompile(`(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`).FindAllString(strings.ReplaceAll(string(body), "http://www.w3.org/2000/svg", ""), -1)
		assert.Empty(t, elsewhere, "%s loads nothing from elsewhere", c.path)
	}
	resp, err := http.Get(srv.URL + "/")
	require.NoError(t, err)
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	assert.Contains(t, csp, "script-src 'self'")
	assert.Contains(t, csp, "frame-ancestors 'none'")
}

func TestStatusAndEventsAsJSON(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.add(t, team.Story{ID: "A", Title: "first"}, team.Story{ID: "B", Title: "second", After: []foreman.ItemID{"A"}})
	res := f.run(t)
	require.Equal(t, 2, res.Merged, res.String())
	_, srv := serve(t, f, teamweb.Config{})
	last := lastSeq(f.team)

	var st teamweb.StatusResponse
	require.Equal(t, http.StatusOK, getJSON(t, srv.URL+"/api/status", &st))
	assert.Equal(t, last, st.Seq)
	require.Len(t, st.Stories, 2)
	b := storyOf(st.Status, "B")
	assert.Equal(t, team.StoryMerged, b.State)
	assert.Equal(t, []foreman.ItemID{"A"}, b.After)
	assert.NotEmpty(t, b.Commit)
	assert.Equal(t, strings.TrimSpace(git(t, f.repo, "rev-parse", "main")), b.Commit)
	assert.Equal(t, team.Actions(), st.Actions)

	var evs teamweb.EventsResponse
	require.Equal(t, http.StatusOK, getJSON(t, srv.URL+"/api/events", &evs))
	assert.Equal(t, asReceived(t, f.team.Events(0)), evs.Events)
	assert.Equal(t, last, evs.Last)

	require.Equal(t, http.StatusOK, getJSON(t, srv.URL+"/api/events?after=3&limit=2", &evs))
	require.Len(t, evs.Events, 2)
	assert.Equal(t, uint64(4), evs.Events[0].Seq)
	assert.Equal(t, last, evs.Last)

	require.Equal(t, http.StatusOK, getJSON(t, srv.URL+"/api/events?after="+u(last), &evs))
	assert.Empty(t, evs.Events, "nothing after the last one")
	assert.NotNil(t, evs.Events, "an empty list, not null")
}

// Bad reads get a 4xx with a JSON error naming the cause.
func TestBadReadsAreRefusedWithTheirCause(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.add(t, team.Story{ID: "A", Title: "first"})
	_, srv := serve(t, f, teamweb.Config{})
	last := lastSeq(f.team)
	require.Equal(t, uint64(1), last)
	cases := []struct {
		name, method, path string
		header             map[string]string
		status             int
		code, says         string
	}{
		{"events after a future seq", "GET", "/api/events?after=2", nil, 400, "future_sequence", "after 2 is past the last event (1)"},
		{"stream after a future seq", "GET", "/api/stream?after=99", nil, 400, "future_sequence", "after 99 is past the last event (1)"},
		{"stream from a future Last-Event-ID", "GET", "/api/stream", map[string]string{"Last-Event-ID": "7"}, 400, "future_sequence", "Last-Event-ID 7 is past"},
		{"events after no number", "GET", "/api/events?after=x", nil, 400, "bad_sequence", `after "x" is not a sequence number`},
		{"a negative seq", "GET", "/api/events?after=-1", nil, 400, "bad_sequence", "not a sequence number"},
		{"a bad limit", "GET", "/api/events?limit=0", nil, 400, "bad_limit", "want 1 to 10000"},
		{"no such endpoint", "GET", "/api/nothing", nil, 404, "not_found", "/api/nothing"},
		{"POST to status", "POST", "/api/status", nil, 405, "method_not_allowed", "use GET"},
		{"GET the action", "GET", "/api/resolve", nil, 405, "method_not_allowed", "use POST"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(context.Background(), c.method, srv.URL+c.path, nil)
			require.NoError(t, err)
			req.Header.Set("X-Foreman-Token", testToken)
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			status, body := do(t, req)
			assert.Equal(t, c.status, status)
			assert.Equal(t, c.code, body["code"])
			assert.Contains(t, body["error"], c.says)
		})
	}
}

// Pages that ask together share one read of the status until an event is
// recorded or StatusMaxAge passes.
func TestOneStatusReadAnswersThePagesThatAskTogether(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.add(t, team.Story{ID: "A", Title: "first"})
	clk := foreman.NewFakeClock(time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC))
	_, srv := serve(t, f, teamweb.Config{Clock: clk, StatusMaxAge: time.Second})
	read := func() (teamweb.StatusResponse, string) {
		resp := get(t, srv.URL+"/api/status")
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var st teamweb.StatusResponse
		require.NoError(t, json.Unmarshal(body, &st))
		return st, string(body)
	}
	first, body1 := read()
	_, body2 := read()
	assert.Equal(t, body1, body2, "the same read (Status.At has nanoseconds: a second read differs)")

	f.add(t, team.Story{ID: "B", Title: "second"})
	st, body3 := read()
	assert.NotEqual(t, body1, body3)
	assert.Equal(t, first.Seq+1, st.Seq)
	assert.Len(t, st.Stories, 2, "an event makes the next read fresh")

	clk.Advance(time.Second)
	_, body4 := read()
	assert.NotEqual(t, body3, body4, "StatusMaxAge passed: read again")
}
