package teamweb_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teamweb"
)

func openStream(t *testing.T, ctx context.Context, url string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	require.NoError(t, err)
	req.Header.Set("X-Foreman-Token", testToken)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// The stream follows a real team live; a client that drops out while the
// team goes on and reconnects with Last-Event-ID gets every event it
// missed, in order, none twice.
func TestTheStreamFollowsLiveAndAReconnectMissesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.touch(t, "A.wait")
	f.add(t, team.Story{ID: "A", Title: "first"}, team.Story{ID: "B", Title: "second", After: []foreman.ItemID{"A"}},
		team.Story{ID: "C", Title: "beside"})
	_, srv := serve(t, f, teamweb.Config{})

	ctx1, drop := context.WithCancel(context.Background())
	defer drop()
	first := readSSE(bufio.NewReader(openStream(t, ctx1, srv.URL+"/api/stream", nil).Body))
	done := make(chan team.Result, 1)
	go func() { done <- f.run(t) }()

	var got []team.Event
	for e := range first {
		ev := decodeEvent(t, e)
		got = append(got, ev)
		if ev.Kind == team.EventStageStarted && ev.Story == "A" && ev.Stage == 2 {
			break // A builds, and waits for A.go
		}
	}
	drop()
	for range first { // what was already on its way is not counted
	}
	seen := got[len(got)-1].Seq
	// The rest of the plan happens while the client is away.
	f.touch(t, "A.go")
	waitFor(t, f.team, seen, func(e team.Event) bool { return e.Kind == team.EventRunFinished })
	res := <-done
	require.Equal(t, 3, res.Merged, res.String())

	// The browser reconnects to the same URL (after=0) with Last-Event-ID,
	// which wins.
	ctx2, stop := context.WithCancel(context.Background())
	defer stop()
	second := readSSE(bufio.NewReader(openStream(t, ctx2, srv.URL+"/api/stream?after=0", map[string]string{"Last-Event-ID": u(seen)}).Body))
	all := f.team.Events(0)
	for e := range second {
		got = append(got, decodeEvent(t, e))
		if len(got) >= len(all) {
			break
		}
	}
	stop()
	require.Equal(t, asReceived(t, all), asReceived(t, got), "every event once, in order: none missed across the reconnect")
	for i, e := range got {
		assert.Equal(t, uint64(i+1), e.Seq)
	}
}

// smallBuffers makes the server's socket send buffers small, so a client
// that does not read fills them after a few kilobytes.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// A client that stops reading is disconnected once a write waits longer
// than WriteTimeout; meanwhile the team goes on, and the stream's buffer
// on this side never grows past a batch.
func TestASlowClientIsDisconnectedAndNeverHoldsUpTheTeam(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// Enough events (about 90 KB of them) to fill both sides' socket
	// buffers and the stream's batch.
	stories := make([]team.Story, 600)
	for i := range stories {
		stories[i] = team.Story{ID: foreman.ItemID(fmt.Sprintf("S-%04d-%s", i, strings.Repeat("x", 40))), Title: "a story"}
	}
	f.add(t, stories...)
	h, err := teamweb.New(f.team, teamweb.Config{Token: testToken, WriteTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	ended := make(chan error, 4)
	h.OnStreamEnd(func(err error) { ended <- err })
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)

	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "GET /api/stream HTTP/1.1\r\nHost: %s\r\nX-Foreman-Token: %s\r\n\r\n", srv.Listener.Addr(), testToken)
	require.NoError(t, err)
	// The client never reads. The team is not held up meanwhile.
	f.add(t, team.Story{ID: "late", Title: "added while a client is stuck"})
	_, err = f.team.Status(context.Background())
	require.NoError(t, err)

	select {
	case err := <-ended:
		assert.ErrorIs(t, err, teamweb.ErrSlowClient)
	case <-time.After(time.Minute):
		t.Fatal("the stuck stream was never ended")
	}
	// A client that reads gets everything, the late story included.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	evs := readSSE(bufio.NewReader(openStream(t, ctx, srv.URL+"/api/stream", nil).Body))
	n := 0
	for e := range evs {
		n++
		if decodeEvent(t, e).Story == "late" {
			break
		}
	}
	assert.Equal(t, len(stories)+1, n)
}

// An idle stream sends a heartbeat comment every Heartbeat of the
// handler's clock.
func TestAnIdleStreamSendsHeartbeats(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	clk := foreman.NewFakeClock(time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC))
	_, srv := serve(t, f, teamweb.Config{Clock: clk, Heartbeat: 15 * time.Second})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	r := bufio.NewReader(openStream(t, ctx, srv.URL+"/api/stream", nil).Body)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "retry: 2000\n", line)
	_, _ = r.ReadString('\n')
	for range 2 {
		require.NoError(t, clk.BlockUntil(ctx, 1))
		clk.Advance(15 * time.Second)
		line, err = r.ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, ": heartbeat\n", line)
		_, _ = r.ReadString('\n')
	}
}

func TestStreamsAreBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, srv := serve(t, f, teamweb.Config{MaxStreams: 1})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	_ = openStream(t, ctx, srv.URL+"/api/stream", nil)
	req, err := http.NewRequest("GET", srv.URL+"/api/stream", nil)
	require.NoError(t, err)
	req.Header.Set("X-Foreman-Token", testToken)
	status, body := do(t, req)
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Equal(t, "too_many_streams", body["code"])
}
