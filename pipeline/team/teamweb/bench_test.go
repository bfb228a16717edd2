package teamweb_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teamweb"
)

// BenchmarkStatus reads the status of a plan of 1,000 stories (a chain of
// ten columns) through the handler, the page's first request, against
// Team.Status itself in the same run (the handler's shared read off).
func BenchmarkStatus(b *testing.B) {
	f := newFixture(b)
	stories := make([]team.Story, 1000)
	for i := range stories {
		stories[i] = team.Story{ID: foreman.ItemID(fmt.Sprintf("S-%04d", i)), Title: fmt.Sprintf("story %d", i)}
		if i >= 100 {
			stories[i].After = []foreman.ItemID{stories[i-100].ID}
		}
	}
	f.add(b, stories...)
	_, srv := serve(b, f, teamweb.Config{StatusMaxAge: -1}) // a fresh read every time: a first paint
	ctx := context.Background()
	b.Run("team.Status", func(b *testing.B) {
		for b.Loop() {
			_, err := f.team.Status(ctx)
			require.NoError(b, err)
		}
	})
	b.Run("GET api/status", func(b *testing.B) {
		var n int64
		for b.Loop() {
			resp := get(b, srv.URL+"/api/status")
			var err error
			n, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			require.NoError(b, err)
		}
		b.ReportMetric(float64(n)/1024, "KiB/response")
	})
}

// BenchmarkStatusForPages: one event, then 50 open pages read the status
// at once (what each does when an event arrives), on a plan of 1,000
// stories: with the handler's shared read (StatusMaxAge default) and
// without (StatusMaxAge < 0), in the same run.
func BenchmarkStatusForPages(b *testing.B) {
	const pages = 50
	f := newFixture(b)
	stories := make([]team.Story, 1000)
	for i := range stories {
		stories[i] = team.Story{ID: foreman.ItemID(fmt.Sprintf("S-%04d", i)), Title: fmt.Sprintf("story %d", i)}
	}
	f.add(b, stories...)
	for _, c := range []struct {
		name   string
		maxAge time.Duration
	}{{"a read per page", -1}, {"one shared read", 0}} {
		b.Run(c.name, func(b *testing.B) {
			_, srv := serve(b, f, teamweb.Config{StatusMaxAge: c.maxAge})
			i := 0
			for b.Loop() {
				f.add(b, team.Story{ID: foreman.ItemID(fmt.Sprintf("N-%s-%d", c.name[:1], i)), Title: "new"})
				i++
				var wg sync.WaitGroup
				for range pages {
					wg.Go(func() {
						resp, err := http.Get(srv.URL + "/api/status?token=" + testToken)
						if err == nil {
							_, _ = io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
						}
					})
				}
				wg.Wait()
			}
		})
	}
}

// BenchmarkStreamFanOut records events (one story added per iteration)
// while 0, 1 or 50 clients follow the event stream, and waits until every
// client has the event: ns/op is recording plus delivery to all; lag-p50
// and lag-p99 are from an event's time to a client's reading it.
func BenchmarkStreamFanOut(b *testing.B) {
	for _, clients := range []int{0, 1, 50} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			f := newFixture(b)
			_, srv := serve(b, f, teamweb.Config{MaxStreams: 64})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			got := make(chan time.Duration, clients*64)
			var wg sync.WaitGroup
			for range clients {
				req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/stream?token="+testToken, nil)
				require.NoError(b, err)
				resp, err := http.DefaultClient.Do(req)
				require.NoError(b, err)
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer resp.Body.Close()
					for e := range readSSE(bufio.NewReader(resp.Body)) {
						var ev team.Event
						if json.Unmarshal([]byte(e.Data), &ev) == nil {
							got <- time.Since(ev.At)
						}
					}
				}()
			}
			var lags []time.Duration
			i := 0
			for b.Loop() {
				f.add(b, team.Story{ID: foreman.ItemID(fmt.Sprintf("S-%06d", i)), Title: "a story"})
				i++
				for range clients {
					lags = append(lags, <-got)
				}
			}
			cancel()
			wg.Wait()
			if len(lags) > 0 {
				slices.Sort(lags)
				b.ReportMetric(float64(lags[len(lags)/2].Microseconds())/1000, "lag-p50-ms")
				b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds())/1000, "lag-p99-ms")
			}
		})
	}
}
