package teamweb_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teamweb"
)

// sandboxAgent does each stage's work at once and reports it with its
// assignment's proof; at a story's plan stage its driver first says what
// the agent's OS sandbox refused (phases.StreamSandbox, as agentcmd does
// after an agent): each note is a refusal of the story, worded by the
// agent (the names it chose).
type sandboxAgent struct {
	notes map[foreman.ItemID][]string
}

func (d sandboxAgent) Execute(ctx context.Context, req phases.AgentRequest, onEvent phases.StreamCallback) (phases.AgentResult, error) {
	a, ok := pipeline.ParseAssignment(req.TaskPrompt)
	if !ok {
		return phases.AgentResult{}, fmt.Errorf("no assignment")
	}
	if a.Stage == 0 && onEvent != nil {
		for _, n := range d.notes[a.Item] {
			onEvent(phases.StreamEvent{Kind: phases.StreamSandbox, Text: "agentcmd: sandbox: " + n})
		}
	}
	res, err := noopAgent{}.Execute(ctx, req, nil) // the stage's work and line
	if err != nil {
		return res, err
	}
	key := ""
	for _, kv := range req.Env {
		if v, ok := strings.CutPrefix(kv, team.EnvReportKey+"="); ok {
			key = v
		}
	}
	res.Result = fmt.Sprintf("%s [assignment %s key %s]", res.Result, a.Assignment, key)
	return res, nil
}

// refusalTeam runs a team of sandboxAgent on stories named by notes' keys
// (with no notes: none refused) until it stops; a story with refusals
// waits for a person (its merge is refused).
func refusalTeam(t testing.TB, notes map[foreman.ItemID][]string) *team.Team {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "repo")
	require.NoError(t, os.MkdirAll(repo, 0o755))
	git(t, repo, "init", "-q", "-b", "main")
	git(t, repo, "commit", "-q", "--allow-empty", "-m", "an empty project")
	tm, err := team.New(context.Background(), team.Config{
		Repo: repo, Agent: sandboxAgent{notes: notes}, Snapshotter: changedSnapshot{}, Verifier: passingVerifier{}, Workers: 2,
		Store: store.NewMemory(store.MemoryOptions{}),
		Gates: phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: []phases.GateCheck{{Name: "none", Argv: []string{"true"}}}}}},
		Merge: merge.Config{GitEnv: gitEnv()[:2], Author: merge.Identity{Name: "Refusal Test", Email: "refusal@foreman.invalid"}},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tm.Close() })
	var stories []team.Story
	for id := range notes {
		stories = append(stories, team.Story{ID: id, Title: "story " + string(id)})
	}
	require.NoError(t, tm.Add(context.Background(), stories...))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := tm.Run(ctx)
	require.NoError(t, err)
	for _, s := range res.Stories {
		want := team.StoryMerged
		if len(notes[s.ID]) > 0 {
			want = team.StoryPaused
		}
		require.Equal(t, want, s.State, "%s: %s", s.ID, res)
	}
	return tm
}

const hostileImg = `<img src=x onerror=alert(1)>`

// hostileFlood is a 100 KB refusal detail made of markup.
var hostileFlood = "FLOOD " + strings.Repeat(`<b>bold</b><script>alert(2)</script>`, 100<<10/35)

// The status endpoint carries each story's refusals (refused, refusedLast,
// refusedKinds) and the team's total (refused), each left out when there
// are none; what an agent chose to name is JSON-escaped (no raw markup in
// the body) and bounded however long it was.
func TestTheStatusCarriesRefusalsOmittedWhenNone(t *testing.T) {
	t.Parallel()
	write := func(name string) string {
		return fmt.Sprintf("wrote %q into the hidden main checkout: a decoy, nothing real changed", name)
	}
	for _, tc := range []struct {
		name  string
		notes map[foreman.ItemID][]string
		total int64
		// kinds: each refused story's kinds' counts, in the order first seen.
		kinds map[string][]int64
		last  map[string]string
	}{
		{name: "none", notes: map[foreman.ItemID][]string{"C": nil}},
		{name: "one", notes: map[foreman.ItemID][]string{"C": nil, "P": {write("EVIL")}}, total: 1,
			kinds: map[string][]int64{"P": {1}}, last: map[string]string{"P": "the OS sandbox: " + write("EVIL")}},
		{name: "two kinds, one of them twice", notes: map[foreman.ItemID][]string{"C": nil, "P": {write("EVIL"), `opened the canary ".env"`, write("go.mod")}},
			total: 3, kinds: map[string][]int64{"P": {2, 1}}, last: map[string]string{"P": "the OS sandbox: " + write("go.mod")}},
		{name: "two stories", notes: map[foreman.ItemID][]string{"P": {write("a")}, "Q": {write("b"), write("c")}},
			total: 3, kinds: map[string][]int64{"P": {1}, "Q": {2}}},
		{name: "hostile and long", notes: map[foreman.ItemID][]string{"C": nil, "H": {hostileImg, hostileFlood}},
			total: 2, kinds: map[string][]int64{"H": {1, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tm := refusalTeam(t, tc.notes)
			_, srv := serve(t, &fixture{team: tm}, teamweb.Config{})
			req, err := http.NewRequest("GET", srv.URL+"/api/status", nil)
			require.NoError(t, err)
			req.Header.Set("X-Foreman-Token", testToken)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			raw, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.NotContains(t, string(raw), "<", "no raw markup in the JSON")

			var body struct {
				Refused *int64                       `json:"refused"`
				Stories []map[string]json.RawMessage `json:"stories"`
			}
			require.NoError(t, json.Unmarshal(raw, &body))
			if tc.total == 0 {
				assert.Nil(t, body.Refused, "the team's total is left out when zero")
			} else if assert.NotNil(t, body.Refused) {
				assert.Equal(t, tc.total, *body.Refused)
			}
			require.Len(t, body.Stories, len(tc.notes))
			for _, s := range body.Stories {
				var id string
				require.NoError(t, json.Unmarshal(s["id"], &id))
				want, refused := tc.kinds[id]
				if !refused {
					for _, k := range []string{"refused", "refusedLast", "refusedKinds"} {
						assert.NotContains(t, s, k, "%s: left out when none", id)
					}
					continue
				}
				var n int64
				var last string
				var kinds []team.RefusalKind
				require.NoError(t, json.Unmarshal(s["refused"], &n))
				require.NoError(t, json.Unmarshal(s["refusedLast"], &last))
				require.NoError(t, json.Unmarshal(s["refusedKinds"], &kinds))
				assert.Equal(t, int64(len(tc.notes[foreman.ItemID(id)])), n, id)
				if l, ok := tc.last[id]; ok {
					assert.Equal(t, l, last, id)
				}
				assert.LessOrEqual(t, len(last), 600+len("…"), "%s: the last refusal is bounded", id)
				var counts []int64
				for _, k := range kinds {
					counts = append(counts, k.Count)
					assert.LessOrEqual(t, len(k.Detail), 240+len("…"), "%s: a kind's detail is bounded", id)
					assert.False(t, k.First.IsZero() || k.Last.Before(k.First), "%s: first %v, last %v", id, k.First, k.Last)
				}
				assert.Equal(t, want, counts, id)
				if id == "H" {
					assert.Equal(t, "the OS sandbox: "+hostileImg, kinds[0].Detail, "markup is kept as text, escaped in the JSON")
					assert.True(t, strings.HasPrefix(last, "the OS sandbox: FLOOD <b>bold</b>"), last)
				}
			}
		})
	}
}

// The page shows refusals at a glance, as text only: the team's total in
// the header, a badge in each refused story's row and on its node of the
// graph, and, in the story's detail (opened from the badge, and in its
// escalation's card), each kind with its count and the last one. An
// agent's markup in them (an <img onerror> and a 100 KB flood of tags)
// creates no element at any moment and appears as its text, clipped.
func TestRefusalsOnThePageAreTextAndBounded(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	tm := refusalTeam(t, map[foreman.ItemID][]string{
		"C": nil,
		"H": {hostileImg, hostileFlood},
		"P": {`wrote "EVIL" into the hidden main checkout: a decoy`, `wrote "go.mod" into the hidden main checkout: a decoy`},
	})
	_, srv := serve(t, &fixture{team: tm}, teamweb.Config{})

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.WindowSize(1400, 900))...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx))
	// Before the page's own script: every element the page ever creates of
	// the kinds the agent's text holds, and every alert.
	_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `
		window.__created = [];
		window.__alerts = [];
		window.alert = (m) => window.__alerts.push(String(m));
		new MutationObserver((ms) => {
			for (const m of ms) for (const n of m.addedNodes) {
				if (n.nodeType !== 1) continue;
				for (const e of [n, ...n.querySelectorAll("*")]) {
					if (/^(img|b|script)$/i.test(e.tagName) && !(e.tagName === "SCRIPT" && e.getAttribute("src") === "static/app.js")) {
						window.__created.push(e.tagName);
					}
				}
			}
		}).observe(document, { childList: true, subtree: true });`})
	require.NoError(t, err)
	badge := func(id string) string { return `#stories tr[data-story="` + id + `"] button.refused` }
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/#token="+testToken),
		chromedp.WaitVisible(chromedp.CSS(badge("H"))), chromedp.WaitVisible(chromedp.CSS(badge("P"))),
		chromedp.WaitVisible(chromedp.CSS(`.escalation[data-story="H"] .refusal-detail`))))

	// At a glance: the total, each story's count, the graph's marks.
	total, err := pageText(ctx, `#refused`)
	require.NoError(t, err)
	assert.Equal(t, "4 refused", total)
	for id, want := range map[string]string{"H": "2 refused", "P": "2 refused"} {
		got, err := pageText(ctx, badge(id))
		require.NoError(t, err)
		assert.Equal(t, want, got, id)
	}
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#stories button.refused").length`))
	require.NoError(t, err)
	assert.Equal(t, 2, n, "C has none")
	marks, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("#graph g.node .refused-mark")].map((m) => m.closest("g.node").dataset.story + "=" + m.textContent)`))
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"H=2", "P=2"}, marks)

	// The detail: opened from the badge, under the row.
	open := func(id string) {
		t.Helper()
		clicked, err := chromedp.Run(ctx, chromedp.Evaluate[bool](
			`(() => { const b = document.querySelector('`+badge(id)+`'); if (!b) return false; b.click(); return true })()`))
		require.NoError(t, err)
		require.True(t, clicked, id)
		require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#stories tr.refusals[data-story="`+id+`"]`))))
	}
	open("P")
	p, err := pageText(ctx, `#stories tr.refusals[data-story="P"]`)
	require.NoError(t, err)
	assert.Contains(t, p, "2 attempts beyond its own assignments refused")
	assert.Contains(t, p, `2× the OS sandbox: wrote "go.mod" into the hidden main checkout: a decoy`, "one kind, twice, the last one's detail")
	assert.Contains(t, p, `the last: the OS sandbox: wrote "go.mod"`)
	open("H")
	type shown struct {
		Text string `json:"text"`
		Len  int    `json:"len"`
	}
	details, err := chromedp.Run(ctx, chromedp.Evaluate[[]shown](`[...document.querySelectorAll('#stories tr.refusals[data-story="H"] .detail')]
		.map((e) => ({ text: e.textContent, len: Array.from(e.textContent).length }))`))
	require.NoError(t, err)
	require.Len(t, details, 3, "two kinds and the last")
	assert.Equal(t, "the OS sandbox: "+hostileImg, details[0].Text, "the markup as its text")
	for _, d := range details[1:] {
		assert.True(t, strings.HasPrefix(d.Text, "the OS sandbox: FLOOD <b>bold</b><script>alert(2)</script>"), d.Text)
		assert.LessOrEqual(t, d.Len, 300, "clipped")
		assert.True(t, strings.HasSuffix(d.Text, "…"), "says it was clipped: %q", d.Text)
	}
	esc, err := pageText(ctx, `.escalation[data-story="H"] .refusal-detail`)
	require.NoError(t, err)
	assert.Contains(t, esc, "1× the OS sandbox: "+hostileImg, "the escalation's card lists the kinds too")
	events, err := chromedp.Run(ctx, chromedp.Evaluate[int](
		`Math.max(...[...document.querySelectorAll("#events li")].map((e) => e.textContent.length))`))
	require.NoError(t, err)
	assert.Less(t, events, 400, "the events list clips a refusal's detail too")

	// A redraw (an event: a story added) keeps the opened detail open.
	require.NoError(t, tm.Add(context.Background(), team.Story{ID: "Z", Title: "later"}))
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitReady(chromedp.CSS(`#stories tr[data-story="Z"]`))))
	still, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#stories tr.refusals").length`))
	require.NoError(t, err)
	assert.Equal(t, 2, still, "H's and P's details stay open across a redraw")
	screenshot(t, ctx, "teamweb-refusals.png")

	// Nothing the agent wrote became an element, at any moment.
	created, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.__created`))
	require.NoError(t, err)
	assert.Empty(t, created)
	alerts, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.__alerts`))
	require.NoError(t, err)
	assert.Empty(t, alerts)
	imgs, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("img, b, script:not([src])").length`))
	require.NoError(t, err)
	assert.Zero(t, imgs)
}
