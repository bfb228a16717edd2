package teamweb_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teamweb"
)

// The page under load: a plan of 1,000 stories on a no-op team (agents,
// snapshots and gates that do nothing; the worktrees, squash merges and
// the SQLite store are real), followed by 50 pages. Each page is what the
// browser's script does: it follows api/stream and re-reads api/status
// after an event (one read at a time, again if events came meanwhile).
//
//	go test -run '^$' -bench 'Load' -benchtime 20x ./pipeline/team/teamweb/
//
// BenchmarkLoadFirstPaint: what a browser opening the page fetches before
// it can draw it (the page, its script and style, the status), one op per
// page load: on the idle team without pages with a fresh status read (the
// baseline), and on the running team while 50 pages follow it, with a
// fresh status read (the first page to ask after an event) and with the
// handler's default shared read. BenchmarkLoadEventLag: one op
// per story merged while 0 (the team's own pace, the baseline), 1 or 50
// pages follow the team; lag is from an event's time to a page reading it
// off the stream.

const (
	loadStories = 1000
	loadPages   = 50
)

// noopAgent reports each stage's canonical line at once; the build writes
// a file (the merge commits it).
type noopAgent struct{}

func (noopAgent) Execute(_ context.Context, req phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
	a, ok := pipeline.ParseAssignment(req.TaskPrompt)
	if !ok {
		return phases.AgentResult{}, fmt.Errorf("no assignment")
	}
	var line string
	switch a.Stage {
	case 0:
		line = message.Format(message.Stage0Complete{Item: a.Item, Tasks: 1, PlanScore: 4})
	case 1:
		line = message.Format(message.Stage1Complete{Item: a.Item, Verdict: message.VerdictGo, Readiness: 9})
	default:
		if err := os.WriteFile(filepath.Join(req.WorkspacePath, string(a.Item)+".txt"), []byte("x\n"), 0o644); err != nil {
			return phases.AgentResult{}, err
		}
		line = message.Format(message.Stage2Complete{Item: a.Item})
	}
	return phases.AgentResult{Success: true, Result: line}, nil
}

type changedSnapshot struct{}

func (changedSnapshot) Before(context.Context, string) (phases.BeforeState, error) {
	return phases.BeforeState{BaseCommit: "0000000000000000000000000000000000000000"}, nil
}

func (changedSnapshot) Capture(_ context.Context, dir string, _ phases.BeforeState, _ phases.SnapshotMeta) (phases.Snapshot, error) {
	return phases.Snapshot{WorkspacePath: dir, Files: []phases.FileDiff{{Path: "x"}}, DiffHash: "x"}, nil
}

type passingVerifier struct{}

func (passingVerifier) Verify(context.Context, phases.Snapshot, phases.GatePlan, phases.VerifyOptions) (phases.VerificationReport, error) {
	return phases.VerificationReport{Passed: true}, nil
}

// loadTeam is a no-op team on a real repository with a plan of 1,000
// independent stories, served by the handler with its default Config (the
// URL returned) and by one that reads the status afresh for every request
// (fresh: what the first page to ask after an event gets).
func loadTeam(b *testing.B) (tm *team.Team, url, fresh string) {
	b.Helper()
	repo := filepath.Join(b.TempDir(), "repo")
	require.NoError(b, os.MkdirAll(repo, 0o755))
	git(b, repo, "init", "-q", "-b", "main")
	git(b, repo, "commit", "-q", "--allow-empty", "-m", "an empty project")
	tm, err := team.New(context.Background(), team.Config{
		Repo: repo, Agent: noopAgent{}, Snapshotter: changedSnapshot{}, Verifier: passingVerifier{}, Workers: 4,
		Gates: phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: []phases.GateCheck{{Name: "none", Argv: []string{"true"}}}}}},
		Merge: merge.Config{GitEnv: gitEnv()[:2], Author: merge.Identity{Name: "Load Test", Email: "load@foreman.invalid"}},
	})
	require.NoError(b, err)
	b.Cleanup(func() { _ = tm.Close() })
	stories := make([]team.Story, loadStories)
	for i := range stories {
		stories[i] = team.Story{ID: foreman.ItemID(fmt.Sprintf("S-%04d", i)), Title: fmt.Sprintf("story %d", i)}
	}
	require.NoError(b, tm.Add(context.Background(), stories...))
	var urls []string
	for _, maxAge := range []time.Duration{0, -1} {
		h, err := teamweb.New(tm, teamweb.Config{Token: testToken, MaxStreams: loadPages + 8, StatusMaxAge: maxAge})
		require.NoError(b, err)
		srv := httptest.NewServer(h)
		b.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	return tm, urls[0], urls[1]
}

func lastSeqOf(tm *team.Team) uint64 {
	evs := tm.Events(0)
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].Seq
}

// openPage follows the stream from after, like the page's script: every
// event read is timed (sent to lags, if any), and the status is re-read
// after events, one read at a time. It stops when ctx ends.
func openPage(ctx context.Context, b *testing.B, url string, after uint64, wg *sync.WaitGroup, lags chan<- time.Duration) {
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/api/stream?after="+u(after)+"&token="+testToken, nil)
	require.NoError(b, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(b, err)
	require.Equal(b, http.StatusOK, resp.StatusCode)
	dirty := make(chan struct{}, 1)
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer resp.Body.Close()
		defer close(dirty)
		for e := range readSSE(bufio.NewReader(resp.Body)) {
			var ev team.Event
			if json.Unmarshal([]byte(e.Data), &ev) == nil {
				if lags != nil {
					lags <- time.Since(ev.At)
				}
			}
			select {
			case dirty <- struct{}{}:
			default:
			}
		}
	}()
	go func() {
		defer wg.Done()
		for range dirty {
			_, _ = getWith(ctx, url+"/api/status")
		}
	}()
}

func getWith(ctx context.Context, url string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-Foreman-Token", testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return io.Copy(io.Discard, resp.Body)
}

// firstPaint fetches what the browser needs to draw the page.
func firstPaint(b *testing.B, url string) int64 {
	var n int64
	for _, p := range []string{"/", "/static/app.js", "/static/style.css", "/api/status"} {
		m, err := getWith(context.Background(), url+p)
		require.NoError(b, err)
		n += m
	}
	return n
}

func BenchmarkLoadFirstPaint(b *testing.B) {
	tm, url, fresh := loadTeam(b)
	paint := func(url string) func(b *testing.B) {
		return func(b *testing.B) {
			var n int64
			for b.Loop() {
				n = firstPaint(b, url)
			}
			b.ReportMetric(float64(n)/1024, "KiB/paint")
		}
	}
	b.Run("idle team, no pages, fresh status", paint(fresh))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	after := lastSeqOf(tm)
	for range loadPages {
		openPage(ctx, b, url, after, &wg, nil)
	}
	ran := make(chan error, 1)
	go func() { _, err := tm.Run(ctx); ran <- err }()
	waitFor(b, tm, 0, func(e team.Event) bool { return e.Kind == team.EventStoryMerged }) // in full swing
	b.Run(fmt.Sprintf("running team, %d pages, fresh status", loadPages), paint(fresh))
	b.Run(fmt.Sprintf("running team, %d pages, shared status", loadPages), paint(url))
	cancel()
	<-ran
	wg.Wait()
}

func BenchmarkLoadEventLag(b *testing.B) {
	for _, pages := range []int{0, 1, loadPages} {
		b.Run(fmt.Sprintf("pages=%d", pages), func(b *testing.B) {
			tm, url, _ := loadTeam(b)
			ctx, cancel := context.WithCancel(context.Background())
			lags := make(chan time.Duration, 1<<16)
			var wg sync.WaitGroup
			after := lastSeqOf(tm)
			for range pages {
				openPage(ctx, b, url, after, &wg, lags)
			}
			var all []time.Duration
			collected := make(chan struct{})
			go func() {
				defer close(collected)
				for l := range lags {
					all = append(all, l)
				}
			}()
			ran := make(chan error, 1)
			b.ResetTimer()
			go func() { _, err := tm.Run(ctx); ran <- err }()
			merged := 0
			for e := range tm.Subscribe(ctx, after) {
				if e.Kind == team.EventStoryMerged {
					if merged++; merged == b.N {
						break
					}
				}
			}
			b.StopTimer()
			elapsed := b.Elapsed()
			events := len(tm.Events(after))
			cancel()
			<-ran
			wg.Wait()
			close(lags)
			<-collected
			b.ReportMetric(float64(events)/elapsed.Seconds(), "events/s")
			if pages == 0 {
				return // the team's own pace: the baseline
			}
			require.NotEmpty(b, all)
			slices.Sort(all)
			b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "lag-p50-ms")
			b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "lag-p99-ms")
			b.ReportMetric(float64(all[len(all)-1].Microseconds())/1000, "lag-max-ms")
		})
	}
}
