package teamweb_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teamweb"
)

// request is one request to srv: method, path, the Host header to send
// ("" for the server's own), more headers, and a form body for a POST.
type request struct {
	method, path, host string
	header             map[string]string
}

func send(t *testing.T, srv *httptest.Server, r request) (int, string, string) {
	t.Helper()
	var body io.Reader
	if r.method == "POST" {
		body = strings.NewReader("story=A&action=retry")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.method, srv.URL+r.path, body)
	require.NoError(t, err)
	if r.method == "POST" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if r.host != "" {
		req.Host = r.host
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		return resp.StatusCode, "", "" // an open stream: its headers say enough
	}
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	code := ""
	if m := strings.SplitN(string(data), `"code":"`, 2); len(m) == 2 {
		code, _, _ = strings.Cut(m[1], `"`)
	}
	return resp.StatusCode, code, string(data)
}

// every endpoint, with the token where it needs one.
var endpoints = []request{
	{method: "GET", path: "/"},
	{method: "GET", path: "/static/app.js"},
	{method: "GET", path: "/api/status"},
	{method: "GET", path: "/api/events"},
	{method: "GET", path: "/api/stream"},
	{method: "POST", path: "/api/resolve"},
	{method: "GET", path: "/metrics"}, // a host's endpoint behind Guard
}

// serveGuarded serves the page with a host's own endpoint beside it,
// behind Guard, as the reference binary serves /metrics.
func serveGuarded(t *testing.T, f *fixture, cfg teamweb.Config) *httptest.Server {
	t.Helper()
	cfg.Token = testToken
	srv := httptest.NewUnstartedServer(nil)
	if cfg.Addr == "-" {
		cfg.Addr = srv.Listener.Addr().String()
	}
	h, err := teamweb.New(f.team, cfg)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.Handle("GET /metrics", h.Guard(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "foreman_team_running 1\n")
	})))
	srv.Config.Handler = mux
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func withHeaders(r request, kv ...string) request {
	r.header = map[string]string{"X-Foreman-Token": testToken}
	for i := 0; i+1 < len(kv); i += 2 {
		r.header[kv[i]] = kv[i+1]
	}
	return r
}

// A DNS-rebinding page (its own name, now resolving to this machine,
// in the Host header) is refused at every endpoint, the token
// notwithstanding; the names the page is served as are answered.
func TestAWrongHostIsRefusedEverywhere(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.add(t, team.Story{ID: "A", Title: "first"})
	srv := serveGuarded(t, f, teamweb.Config{Addr: "-", AllowedHosts: []string{"foreman.lan", "dash.example:8443"}})
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	for _, e := range endpoints {
		for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1.evil.example:" + port,
			"127.0.0.1:1" + port, "localhost:1", "dash.example:8444", "0.0.0.0:" + port} {
			t.Run(e.method+e.path+" "+host, func(t *testing.T) {
				r := withHeaders(e)
				r.host = host
				status, code, body := send(t, srv, r)
				assert.Equal(t, http.StatusForbidden, status, body)
				assert.Equal(t, "bad_host", code)
				assert.Contains(t, body, "DNS rebinding")
				assert.NotContains(t, body, `"stories"`)
			})
		}
		for _, host := range []string{"127.0.0.1:" + port, "LOCALHOST:" + port, "[::1]:" + port, "foreman.lan:9999", "dash.example:8443"} {
			t.Run(e.method+e.path+" "+host+" answered", func(t *testing.T) {
				r := withHeaders(e)
				r.host = host
				status, code, body := send(t, srv, r)
				assert.NotEqual(t, http.StatusForbidden, status, body)
				assert.NotEqual(t, "bad_host", code)
			})
		}
	}
}

// Another site's script (its Origin), a sandboxed frame or a file ("null"),
// or a request the browser marks as another site's is refused at every
// endpoint; the page's own origin, a trusted one and a plain navigation
// from a link are answered.
func TestAnotherOriginIsRefusedEverywhere(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.add(t, team.Story{ID: "A", Title: "first"})
	srv := serveGuarded(t, f, teamweb.Config{TrustedOrigins: []string{"https://dash.example.com"}})
	for _, e := range endpoints {
		for name, kv := range map[string][]string{
			"another site":               {"Origin", "https://evil.example"},
			"another port of localhost":  {"Origin", "http://localhost:3000"},
			"the page's name, no port":   {"Origin", "http://127.0.0.1"},
			"a sandboxed frame":          {"Origin", "null"},
			"cross-site, no Origin":      {"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "no-cors"},
			"same-site, no Origin":       {"Sec-Fetch-Site", "same-site", "Sec-Fetch-Mode", "cors"},
			"trusted scheme, wrong host": {"Origin", "http://dash.example.com"},
		} {
			t.Run(e.method+e.path+" "+name, func(t *testing.T) {
				status, code, body := send(t, srv, withHeaders(e, kv...))
				assert.Equal(t, http.StatusForbidden, status, body)
				assert.Equal(t, "cross_origin", code)
			})
		}
		for name, kv := range map[string][]string{
			"its own origin":      {"Origin", srv.URL, "Sec-Fetch-Site", "same-origin"},
			"a trusted origin":    {"Origin", "https://dash.example.com"},
			"typed in, no Origin": {"Sec-Fetch-Site", "none", "Sec-Fetch-Mode", "navigate"},
			"no browser at all":   nil,
		} {
			t.Run(e.method+e.path+" "+name+" answered", func(t *testing.T) {
				status, code, body := send(t, srv, withHeaders(e, kv...))
				assert.NotEqual(t, http.StatusForbidden, status, body)
				assert.NotEqual(t, "cross_origin", code)
			})
		}
	}
	// A link from another site opens the page (the person sees it; the
	// other site never does), and the page alone: its reads need the token.
	status, _, body := send(t, srv, request{method: "GET", path: "/", header: map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}})
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `<svg id="graph"`)
	status, code, _ := send(t, srv, request{method: "GET", path: "/api/status", header: map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}})
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Equal(t, "no_token", code)
}

// Every read that carries the team's stories needs the token: in a
// header, as a bearer token, or (for a browser's EventSource) in the
// query. The page and its files do not: they hold no story.
func TestReadsNeedTheToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.add(t, team.Story{ID: "A", Title: "a secret title"})
	srv := serveGuarded(t, f, teamweb.Config{})
	for _, path := range []string{"/api/status", "/api/events", "/api/stream", "/api/events?after=0&limit=5", "/api/stream?after=0"} {
		t.Run(path, func(t *testing.T) {
			status, code, body := send(t, srv, request{method: "GET", path: path})
			assert.Equal(t, http.StatusUnauthorized, status)
			assert.Equal(t, "no_token", code)
			assert.Contains(t, body, "needs the token")
			assert.NotContains(t, body, "a secret title")

			sep := "?"
			if strings.Contains(path, "?") {
				sep = "&"
			}
			for name, r := range map[string]request{
				"a wrong header": {method: "GET", path: path, header: map[string]string{"X-Foreman-Token": testToken + "x"}},
				"a wrong bearer": {method: "GET", path: path, header: map[string]string{"Authorization": "Bearer " + testToken[1:]}},
				"a wrong query":  {method: "GET", path: path + sep + "token=nope"},
			} {
				status, code, body = send(t, srv, r)
				assert.Equal(t, http.StatusForbidden, status, name)
				assert.Equal(t, "bad_token", code, name)
				assert.NotContains(t, body, "a secret title", name)
			}
			for name, r := range map[string]request{
				"the header": {method: "GET", path: path, header: map[string]string{"X-Foreman-Token": testToken}},
				"a bearer":   {method: "GET", path: path, header: map[string]string{"Authorization": "Bearer " + testToken}},
				"the query":  {method: "GET", path: path + sep + "token=" + testToken},
			} {
				status, _, _ = send(t, srv, r)
				assert.Equal(t, http.StatusOK, status, name)
			}
		})
	}
	for _, path := range []string{"/", "/static/app.js", "/static/style.css", "/metrics"} {
		status, _, _ := send(t, srv, request{method: "GET", path: path})
		assert.Equal(t, http.StatusOK, status, "%s holds no story: no token", path)
	}
}

// Stream slots cannot be held without the token: requests without it are
// refused before they count, and the one slot is still there for the page.
func TestStreamSlotsNeedTheToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := serveGuarded(t, f, teamweb.Config{MaxStreams: 1})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	for range 5 {
		req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/stream", nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		resp.Body.Close()
		status, code, _ := send(t, srv, request{method: "GET", path: "/api/stream", host: "evil.example", header: map[string]string{"X-Foreman-Token": testToken}})
		assert.Equal(t, http.StatusForbidden, status)
		assert.Equal(t, "bad_host", code)
	}
	_ = openStream(t, ctx, srv.URL+"/api/stream", nil) // the slot is free
	status, code, _ := send(t, srv, withHeaders(request{method: "GET", path: "/api/stream"}))
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Equal(t, "too_many_streams", code)
}

func TestNewRefusesABadAddress(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for name, c := range map[string]struct {
		cfg  teamweb.Config
		want string
	}{
		"no port":              {teamweb.Config{Addr: "127.0.0.1"}, "Addr"},
		"port 0":               {teamweb.Config{Addr: "127.0.0.1:0"}, "listener's address"},
		"a URL for a host":     {teamweb.Config{AllowedHosts: []string{"http://foreman.lan"}}, "AllowedHosts"},
		"a path for an origin": {teamweb.Config{TrustedOrigins: []string{"https://dash.example.com/team"}}, "TrustedOrigins"},
	} {
		t.Run(name, func(t *testing.T) {
			c.cfg.Token = testToken
			_, err := teamweb.New(f.team, c.cfg)
			require.ErrorIs(t, err, teamweb.ErrInvalidConfig)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}
