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
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teamweb"
)

// agentScript plays every stage of the story flow: it reports through the
// result file and, in the build stage, writes <story>.txt and commits; it
// ends as Claude Code does, with a result line saying it spent 1,000
// tokens and $0.02.
// Files in the control directory steer it per story:
//
//	<id>.fail-stage-N  exit 3 at stage N with "boom N" on stderr (the story pauses)
//	<id>.wait          the build waits until <id>.go exists (the story stays
//	                   running while a test looks at it)
const agentScript = `#!/bin/sh
set -eu
ctl=%CTL%
id=$FOREMAN_ITEM
stage=$FOREMAN_STAGE
if [ -e "$ctl/$id.fail-stage-$stage" ]; then echo "boom $stage" >&2; exit 3; fi
outcome=complete
case "$stage" in
1) outcome=go ;;
2) if [ -e "$ctl/$id.wait" ]; then
     n=0
     while [ ! -e "$ctl/$id.go" ]; do n=$((n+1)); [ $n -lt 1200 ] || exit 4; sleep 0.05; done
   fi
   echo "$id was here" > "$id.txt"
   git add "$id.txt" && git commit -qm "$id: its file" ;;
esac
printf '{"assignment":"%s","outcome":"%s","summary":"stage %s done"}\n' "$FOREMAN_ASSIGNMENT" "$outcome" "$stage" > "$FOREMAN_RESULT"
echo '{"type":"result","subtype":"success","is_error":false,"result":"done","total_cost_usd":0.02,"usage":{"input_tokens":900,"output_tokens":100}}'
`

// gitEnv keeps the machine's git config out and commits as a fixed identity.
func gitEnv() []string {
	return []string{"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Teamweb Test", "GIT_AUTHOR_EMAIL=teamweb@foreman.invalid",
		"GIT_COMMITTER_NAME=Teamweb Test", "GIT_COMMITTER_EMAIL=teamweb@foreman.invalid"}
}

func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), gitEnv()...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return string(out)
}

const testToken = "0123456789abcdef-test-token"

type fixture struct {
	repo, ctl string
	cfg       team.Config
	team      *team.Team
}

// newFixture makes a real git repository and a team of the scripted agent
// on it (not running).
func newFixture(t testing.TB) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), ctl: filepath.Join(dir, "ctl")}
	for _, d := range []string{f.repo, f.ctl} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	git(t, f.repo, "init", "-q", "-b", "main")
	git(t, f.repo, "commit", "-q", "--allow-empty", "-m", "an empty project")
	script := filepath.Join(dir, "agent.sh")
	require.NoError(t, os.WriteFile(script, []byte(strings.ReplaceAll(agentScript, "%CTL%", "'"+f.ctl+"'")), 0o755))
	f.cfg = team.Config{
		Repo:  f.repo,
		Agent: agentcmd.New(agentcmd.Config{Argv: []string{script, "{prompt}"}, Format: agentcmd.FormatClaude, Env: gitEnv()}),
		Gates: phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: []phases.GateCheck{
			{Name: "files", Argv: []string{"sh", "-c", "ls *.txt"}},
		}}}},
		Workers: 4,
		Merge:   merge.Config{GitEnv: gitEnv()[:2], Author: merge.Identity{Name: "Teamweb Test", Email: "teamweb@foreman.invalid"}},
	}
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
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
	return resp.StatusCode
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
