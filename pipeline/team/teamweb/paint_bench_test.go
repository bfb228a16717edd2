package teamweb_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teamweb"
)

// The page's first paint at scale (issue 23), in Chromium: a plan of
// 10,000 stories (FOREMAN_PAINT_STORIES), every tenth after the one before
// it (so the graph has edges and blocked stories), on an idle team with
// the memory store, served by the handler with its default Config. One op
// is a new tab opening the page: paint-ms is from the navigation's start
// to the frame after the one whose DOM first holds stories' rows (a
// MutationObserver installed before the page's own script, then two
// animation frames: the rows are on screen), all-rows-ms the same for
// every story's row (the page draws a long table a part a frame); fcp-ms is Chromium's
// first-contentful-paint (the page's frame, before the status arrives);
// status-ms is when the status's last byte arrived (resource timing),
// rendered-ms when the page's script had built the page from it (its
// render sets body[data-seq] last). FOREMAN_PAINT_REFUSED=N gives every
// N-th story's status refusals (3, of 2 kinds, 200-byte details: a badge
// in its row, a mark on its node), added to what the handler serves.
// Without Chromium it skips.
//
//	go test -run '^$' -bench PageFirstPaint -benchtime 5x ./pipeline/team/teamweb/
func BenchmarkPageFirstPaint(b *testing.B) {
	browser := chromiumPath(b)
	n := 10_000
	if v := os.Getenv("FOREMAN_PAINT_STORIES"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(b, err, "FOREMAN_PAINT_STORIES")
	}
	repo := filepath.Join(b.TempDir(), "repo")
	require.NoError(b, os.MkdirAll(repo, 0o755))
	git(b, repo, "init", "-q", "-b", "main")
	git(b, repo, "commit", "-q", "--allow-empty", "-m", "an empty project")
	tm, err := team.New(context.Background(), team.Config{
		Repo: repo, Agent: noopAgent{}, Snapshotter: changedSnapshot{}, Verifier: passingVerifier{}, Workers: 4,
		Store: store.NewMemory(store.MemoryOptions{}),
		Gates: phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: []phases.GateCheck{{Name: "none", Argv: []string{"true"}}}}}},
		Merge: merge.Config{GitEnv: gitEnv()[:2], Author: merge.Identity{Name: "Paint Test", Email: "paint@foreman.invalid"}},
	})
	require.NoError(b, err)
	b.Cleanup(func() { _ = tm.Close() })
	stories := make([]team.Story, n)
	for i := range stories {
		stories[i] = team.Story{ID: foreman.ItemID(fmt.Sprintf("S-%05d", i)), Title: fmt.Sprintf("story %d", i)}
		if i%10 == 9 {
			stories[i].After = []foreman.ItemID{stories[i-1].ID}
		}
	}
	require.NoError(b, tm.Add(context.Background(), stories...))
	h, err := teamweb.New(tm, teamweb.Config{Token: testToken})
	require.NoError(b, err)
	var served http.Handler = h
	if v := os.Getenv("FOREMAN_PAINT_REFUSED"); v != "" {
		every, err := strconv.Atoi(v)
		require.NoError(b, err, "FOREMAN_PAINT_REFUSED")
		served = withRefusals(h, every)
	}
	srv := httptest.NewServer(served)
	b.Cleanup(srv.Close)

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.WindowSize(1400, 900))...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	require.NoError(b, chromedp.Do(bctx)) // the browser starts before the clock
	watch := `(() => {
		const want = ` + strconv.Itoa(n) + `;
		const painted = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now()))));
		let first;
		window.__foremanRendered = new Promise((resolve) => {
			const seen = () => {
				if (!document.body || !document.body.dataset.seq) return false;
				resolve(performance.now());
				return true;
			};
			const o = new MutationObserver(() => { if (seen()) o.disconnect(); });
			o.observe(document, { attributes: true, subtree: true, attributeFilter: ["data-seq"] });
		});
		window.__foremanPainted = new Promise((resolve) => {
			let obs;
			const check = () => {
				const body = document.querySelector("#stories tbody");
				if (!body || !body.querySelector("tr[data-story]")) return false;
				if (!first) first = painted();
				if (body.children.length < want) return false;
				if (obs) obs.disconnect();
				painted().then((all) => first.then((f) => resolve([f, all])));
				return true;
			};
			const start = () => {
				if (check()) return;
				obs = new MutationObserver(check);
				obs.observe(document.documentElement, { childList: true, subtree: true });
			};
			if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();
		});
	})()`
	var paint, all, fcp, status, rendered float64
	for b.Loop() {
		tab, closeTab := chromedp.NewContext(bctx)
		require.NoError(b, chromedp.Do(tab))
		_, err := chromedp.Call(tab, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: watch})
		require.NoError(b, err)
		require.NoError(b, chromedp.Do(tab, chromedp.Navigate(srv.URL+"/#token="+testToken)))
		p, err := chromedp.Run(tab, chromedp.Evaluate[[]float64](`window.__foremanPainted`, chromedp.EvalAwaitPromise))
		require.NoError(b, err)
		require.Len(b, p, 2)
		f, err := chromedp.Run(tab, chromedp.Evaluate[float64](
			`(performance.getEntriesByName("first-contentful-paint")[0] || {startTime: 0}).startTime`))
		require.NoError(b, err)
		nodes, err := chromedp.Run(tab, chromedp.Evaluate[int](`document.querySelectorAll("#graph g.node").length`))
		require.NoError(b, err)
		require.LessOrEqual(b, nodes, 200, "a long plan's graph draws the stories that need a look, 200 at most")
		rd, err := chromedp.Run(tab, chromedp.Evaluate[float64](`window.__foremanRendered`, chromedp.EvalAwaitPromise))
		require.NoError(b, err)
		rendered += rd
		st, err := chromedp.Run(tab, chromedp.Evaluate[float64](
			`(performance.getEntriesByType("resource").find((e) => e.name.includes("api/status")) || {responseEnd: 0}).responseEnd`))
		require.NoError(b, err)
		paint, all, fcp, status = paint+p[0], all+p[1], fcp+f, status+st
		closeTab()
	}
	b.ReportMetric(paint/float64(b.N), "paint-ms")
	b.ReportMetric(all/float64(b.N), "all-rows-ms")
	b.ReportMetric(fcp/float64(b.N), "fcp-ms")
	b.ReportMetric(status/float64(b.N), "status-ms")
	b.ReportMetric(rendered/float64(b.N), "rendered-ms")
}

// withRefusals serves h with every every-th story's status given refusals
// (3, of 2 kinds, with details as long as the team keeps): what the page
// draws for a plan whose agents were refused (no idle plan has any).
func withRefusals(h http.Handler, every int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/status" {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		var st teamweb.StatusResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		detail := "the OS sandbox: wrote \"" + strings.Repeat("x", 200) + "\" into the hidden main checkout"
		at := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
		for i := range st.Stories {
			if i%every == 0 {
				s := &st.Stories[i]
				s.Refused, s.RefusedLast = 3, detail
				s.RefusedKinds = []team.RefusalKind{{Detail: detail, Count: 2, First: at, Last: at.Add(time.Minute)}, {Detail: detail[:100], Count: 1, First: at, Last: at}}
				st.Refused += 3
			}
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		_ = json.NewEncoder(w).Encode(st)
	})
}

// chromiumPath finds a Chromium or Chrome binary, or skips.
func chromiumPath(b *testing.B) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	b.Skip("no Chromium (apt-get install chromium)")
	return ""
}
