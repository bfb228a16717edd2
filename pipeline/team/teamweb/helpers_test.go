package teamweb_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/teamtest"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teamweb"
)

// gitEnv keeps the machine's git config out and commits as a fixed identity.
func gitEnv() []string { return teamtest.GitEnv("Teamweb Test") }

func git(t testing.TB, dir string, args ...string) string {
	return teamtest.Git(t, dir, gitEnv(), args...)
}

const testToken = "0123456789abcdef-test-token"

type fixture struct {
	repo, ctl string
	cfg       team.Config
	team      *team.Team
}

// newFixture makes a real git repository and a team of the scripted agent
// (teamtest.AgentScript) on it (not running).
func newFixture(t testing.TB) *fixture {
	t.Helper()
	tf := teamtest.New(t, "Teamweb Test")
	f := &fixture{repo: tf.Repo, ctl: tf.Ctl, cfg: tf.Config}
	tm, err := team.New(context.Background(), f.cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tm.Close() })
	f.team = tm
	return f
}

func (f *fixture) touch(t testing.TB, name string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(f.ctl, name), nil, 0o644))
}

func (f *fixture) remove(t testing.TB, name string) {
	t.Helper()
	require.NoError(t, os.Remove(filepath.Join(f.ctl, name)))
}

func (f *fixture) add(t testing.TB, stories ...team.Story) {
	t.Helper()
	require.NoError(t, f.team.Add(context.Background(), stories...))
}

// run runs the team once, with a bound that fails a hang.
func (f *fixture) run(t testing.TB) team.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := f.team.Run(ctx)
	require.NoError(t, err)
	return res
}

// keepRunning is what a host serving the page does: Run, and when the
// plan waits for a person, Run again once a person decided. It stops at
// the test's end.
func (f *fixture) keepRunning(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			start := lastSeq(f.team)
			if _, err := f.team.Run(ctx); err != nil {
				if ctx.Err() == nil {
					t.Errorf("Run: %v", err)
				}
				return
			}
			waitCtx, stop := context.WithCancel(ctx)
			for e := range f.team.Subscribe(waitCtx, start) {
				if e.Kind == team.EventStoryResolved {
					break
				}
			}
			stop()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func lastSeq(tm *team.Team) uint64 {
	evs := tm.Events(0)
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].Seq
}

// waitFor returns the first event after seq that matches, from the team
// itself (not the handler under test).
func waitFor(t testing.TB, tm *team.Team, after uint64, match func(team.Event) bool) team.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for e := range tm.Subscribe(ctx, after) {
		if match(e) {
			return e
		}
	}
	t.Fatalf("no matching event after %d", after)
	return team.Event{}
}

func storyOf(st team.Status, id string) team.StoryStatus {
	for _, s := range st.Stories {
		if string(s.ID) == id {
			return s
		}
	}
	return team.StoryStatus{}
}

// serve mounts a handler for f's team on a test server.
func serve(t testing.TB, f *fixture, cfg teamweb.Config) (*teamweb.Handler, *httptest.Server) {
	t.Helper()
	if cfg.Token == "" {
		cfg.Token = testToken
	}
	h, err := teamweb.New(f.team, cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv
}

func getJSON(t testing.TB, url string, v any) int {
	t.Helper()
	resp := get(t, url)
	defer resp.Body.Close()
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
	return resp.StatusCode
}

// get reads url with the token, as the page does.
func get(t testing.TB, url string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	req.Header.Set("X-Foreman-Token", testToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return resp
}

// post sends a form to api/resolve with the given headers.
func post(t testing.TB, srv *httptest.Server, form url.Values, header map[string]string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("POST", srv.URL+"/api/resolve", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return do(t, req)
}

func do(t testing.TB, req *http.Request) (int, map[string]any) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body), "a JSON body")
	return resp.StatusCode, body
}

// sseEvent is one server-sent event as a client parses it.
type sseEvent struct {
	ID   string
	Data string
}

// readSSE parses server-sent events from r onto the returned channel until
// r ends.
func readSSE(r *bufio.Reader) <-chan sseEvent {
	out := make(chan sseEvent)
	go func() {
		defer close(out)
		var ev sseEvent
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case line == "":
				if ev.Data != "" {
					out <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.ID = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				ev.Data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return out
}

func decodeEvent(t testing.TB, e sseEvent) team.Event {
	t.Helper()
	var ev team.Event
	require.NoError(t, json.Unmarshal([]byte(e.Data), &ev))
	require.Equal(t, fmt.Sprint(ev.Seq), e.ID, "the SSE id is the event's Seq")
	return ev
}

func u(n uint64) string { return strconv.FormatUint(n, 10) }

// asReceived is what events look like after a trip through JSON (times
// lose their monotonic reading and location).
func asReceived(t testing.TB, evs []team.Event) []team.Event {
	t.Helper()
	data, err := json.Marshal(evs)
	require.NoError(t, err)
	var out []team.Event
	require.NoError(t, json.Unmarshal(data, &out))
	return out
}
