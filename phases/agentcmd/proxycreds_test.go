package agentcmd

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envValue is key's last value in env.
func envValue(env []string, key string) string { return lookupEnv(env, key) }

// A proxy variable with credentials names a local proxy, one per upstream;
// offline it loses them and no proxy starts; everything else passes as it
// is (NO_PROXY, GOPROXY, a proxy without credentials, any other variable).
func TestProxyVariablesWithCredentialsNameALocalProxy(t *testing.T) {
	secretURL := "http://" + proxyUser + ":" + proxyPassInURL + "@proxy.corp:3128"
	tests := []struct {
		name    string
		env     []string
		offline bool
		// want: the variable's value, "local" for a local proxy's URL.
		want map[string]string
	}{
		{"without credentials, unchanged",
			[]string{"HTTPS_PROXY=http://proxy.corp:3128", "ALL_PROXY=socks5://proxy.corp:1080", "http_proxy=proxy.corp:3128", "NO_PROXY=localhost,.corp", "HTTP_PROXY="},
			false, map[string]string{"HTTPS_PROXY": "http://proxy.corp:3128", "ALL_PROXY": "socks5://proxy.corp:1080",
				"http_proxy": "proxy.corp:3128", "NO_PROXY": "localhost,.corp", "HTTP_PROXY": ""}},
		{"GOPROXY and other variables, unchanged (GOPROXY names module proxies, not HTTP proxies)",
			[]string{"GOPROXY=https://u:" + proxyPassInURL + "@goproxy.corp,direct", "PATH=/usr/bin", "NO_PROXY=" + secretURL},
			false, map[string]string{"GOPROXY": "https://u:" + proxyPassInURL + "@goproxy.corp,direct", "PATH": "/usr/bin", "NO_PROXY": secretURL}},
		{"with credentials, every case and form: a local proxy",
			[]string{"HTTPS_PROXY=" + secretURL, "https_proxy=" + secretURL, "Http_Proxy=" + proxyUser + ":" + proxyPassInURL + "@proxy.corp:3128",
				"all_proxy=https://" + proxyUser + ":" + proxyPassInURL + "@proxy.corp"},
			false, map[string]string{"HTTPS_PROXY": "local", "https_proxy": "local", "Http_Proxy": "local", "all_proxy": "local"}},
		{"offline: without its credentials, no proxy",
			[]string{"HTTPS_PROXY=" + secretURL, "all_proxy=" + proxyUser + ":" + proxyPassInURL + "@proxy.corp:3128", "NO_PROXY=.corp"},
			true, map[string]string{"HTTPS_PROXY": "http://proxy.corp:3128", "all_proxy": "http://proxy.corp:3128", "NO_PROXY": ".corp"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, stop, err := New(Config{}).proxyEnv(context.Background(), tt.env, tt.offline)
			require.NoError(t, err)
			defer stop()
			require.Len(t, env, len(tt.env), "one entry for each, in order")
			locals := map[string]bool{}
			for k, want := range tt.want {
				got := envValue(env, k)
				if want != "local" {
					assert.Equal(t, want, got, k)
					continue
				}
				addr, ok := strings.CutPrefix(got, "http://127.0.0.1:")
				require.True(t, ok, "%s=%s", k, got)
				locals[addr] = true
			}
			if len(locals) > 0 {
				// proxy.corp:3128 (three spellings) and https://proxy.corp.
				assert.Len(t, locals, 2, "one local proxy per upstream")
			}
			for _, kv := range env {
				if k, _, _ := strings.Cut(kv, "="); isProxyVar(k) {
					requireNoSecret(t, k, kv)
				}
			}
		})
	}
}

// A proxy variable the driver cannot read is a typed error that quotes
// nothing of its value.
func TestAProxyURLTheDriverCannotReadIsATypedError(t *testing.T) {
	for value, reason := range map[string]string{
		"http://" + proxyUser + ":" + proxyPassword + "%zz@proxy.corp:3128": "percent-encode", // a bad escape (and an @) in the password
		"http://" + proxyUser + ":" + proxyPassInURL + "@":                  "names no host",
		"http://" + proxyUser + ":" + proxyPassInURL + "@proxy.corp:port":   "percent-encode", // the parser's cause may quote a piece of a password
		"socks5://" + proxyUser + ":" + proxyPassInURL + "@proxy.corp:1080": `credentials for a "socks5" proxy`,
		"http://[::1" + proxyPassInURL:                                      "missing ']' in host",
	} {
		t.Run(value, func(t *testing.T) {
			_, stop, err := New(Config{}).proxyEnv(context.Background(), []string{"PATH=/bin", "https_proxy=" + value}, false)
			defer stop()
			var pe *ProxyURLError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, "https_proxy", pe.Name)
			assert.Contains(t, err.Error(), "https_proxy")
			requireNoSecret(t, "the error", err.Error())
			assert.NotContains(t, err.Error(), "proxy.corp")
			assert.Contains(t, pe.Reason, reason, "the cause is named")
		})
	}
}

// startLocalProxy serves the driver's local proxy for upstream url and
// returns its address and stop.
func startLocalProxy(t *testing.T, upstream string) (addr string, stop func()) {
	t.Helper()
	env, stop, err := New(Config{}).proxyEnv(context.Background(), []string{"HTTPS_PROXY=" + upstream}, false)
	require.NoError(t, err)
	t.Cleanup(stop)
	addr, ok := strings.CutPrefix(envValue(env, "HTTPS_PROXY"), "http://")
	require.True(t, ok)
	return addr, stop
}

// rawConnect sends a CONNECT with extra header lines to the proxy at addr
// and returns the connection, its reader and the answer.
func rawConnect(t *testing.T, addr, target, extra string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n"+extra+"\r\n")
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second))) // a guard, not a wait
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	require.NoError(t, err)
	return c, br, resp
}

// The local proxy tunnels and forwards with the upstream's credentials,
// the client's own Proxy-Authorization never passing, and refuses what is
// not a proxy request or is too large.
func TestTheLocalProxyAddsTheCredentialsAndNothingElse(t *testing.T) {
	target, _ := tlsTarget(t)
	up := newUpstreamProxy(t, target.Listener.Addr().String())
	addr, _ := startLocalProxy(t, up.url())
	_, port, err := net.SplitHostPort(target.Listener.Addr().String())
	require.NoError(t, err)
	evil := "Basic ZXZpbDpldmls" // evil:evil

	tlsConf := target.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	client := &http.Client{Transport: &http.Transport{
		Proxy:              http.ProxyURL(&url.URL{Scheme: "http", Host: addr}),
		ProxyConnectHeader: http.Header{"Proxy-Authorization": {evil}},
		TLSClientConfig:    tlsConf,
	}}
	t.Cleanup(client.CloseIdleConnections)

	resp, err := client.Get("https://example.com:" + port + "/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, "hello through the tunnel\n", string(body), "a tunnel through both proxies")

	req, err := http.NewRequest(http.MethodGet, "http://plain.example/x?y=1", nil)
	require.NoError(t, err)
	req.Header.Set("Proxy-Authorization", evil)
	resp, err = client.Do(req)
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, "plain via upstream: http://plain.example/x?y=1\n", string(body))

	seen := up.seen()
	require.Len(t, seen, 2)
	for _, auth := range seen {
		assert.Equal(t, wantProxyAuth(), auth, "the upstream's credentials, never the client's")
	}

	// Not a proxy request: refused, the upstream never asked.
	resp, err = http.Get("http://" + addr + "/")
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	// Headers past the bound: refused.
	_, _, resp = rawConnect(t, addr, "example.com:"+port, "X-Big: "+strings.Repeat("a", 2*proxyMaxHeaderBytes)+"\r\n")
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
	// A CONNECT without a port: refused.
	_, _, resp = rawConnect(t, addr, "example.com", "")
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Len(t, up.seen(), 2)
}

// The upstream's refusal passes on without its Proxy-Authenticate: the
// credentials are the driver's to give.
func TestTheUpstreamsRefusalPassesWithoutItsChallenge(t *testing.T) {
	up := newUpstreamProxy(t, "127.0.0.1:1")
	addr, _ := startLocalProxy(t, "http://"+proxyUser+":wrong@"+up.addr)
	_, _, resp := rawConnect(t, addr, "example.com:443", "")
	assert.Equal(t, http.StatusProxyAuthRequired, resp.StatusCode)
	assert.Empty(t, resp.Header.Get("Proxy-Authenticate"))
}

// Stopped, the local proxy closes its open tunnels and takes no new
// connection; a tunnel quiet for its idle time is closed.
func TestTheLocalProxyEndsItsTunnels(t *testing.T) {
	target, _ := tlsTarget(t)
	up := newUpstreamProxy(t, target.Listener.Addr().String())

	t.Run("stopped", func(t *testing.T) {
		addr, stop := startLocalProxy(t, up.url())
		c, br, resp := rawConnect(t, addr, "example.com:443", "")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		stop()
		_, err := br.ReadByte()
		require.Error(t, err)
		var ne net.Error
		assert.False(t, errors.As(err, &ne) && ne.Timeout(), "closed, not timed out: %v", err)
		_ = c.Close()
		_, err = net.Dial("tcp", addr)
		assert.Error(t, err, "nothing listens any more")
	})
	t.Run("a plain request in flight", func(t *testing.T) {
		addr, stop := startLocalProxy(t, up.url())
		client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: addr})}}
		errc := make(chan error, 1)
		go func() {
			resp, err := client.Get("http://plain.example/hang")
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				_ = resp.Body.Close()
			}
			errc <- err
		}()
		<-up.hung
		stop()
		assert.Error(t, <-errc, "cut when the run ends")
	})
	t.Run("its context ended", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		env, stop, err := New(Config{}).proxyEnv(ctx, []string{"HTTPS_PROXY=" + up.url()}, false)
		require.NoError(t, err)
		defer stop()
		addr := strings.TrimPrefix(envValue(env, "HTTPS_PROXY"), "http://")
		_, br, resp := rawConnect(t, addr, "example.com:443", "")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		cancel()
		_, err = br.ReadByte()
		require.Error(t, err)
	})
	t.Run("quiet", func(t *testing.T) {
		u, err := url.Parse(up.url())
		require.NoError(t, err)
		p, err := startCredProxy(u, 50*time.Millisecond, New(Config{}).cfg.Logger)
		require.NoError(t, err)
		defer p.close()
		_, br, resp := rawConnect(t, p.addr(), "example.com:443", "")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		_, err = br.ReadByte()
		require.Error(t, err)
		var ne net.Error
		assert.False(t, errors.As(err, &ne) && ne.Timeout(), "the proxy closed it, the test's guard did not expire: %v", err)
	})
	t.Run("a TLS session through a tunnel", func(t *testing.T) {
		addr, _ := startLocalProxy(t, up.url())
		c, br, resp := rawConnect(t, addr, "example.com:443", "")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Zero(t, br.Buffered())
		conf := target.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
		conf.ServerName = "example.com"
		tc := tls.Client(c, conf)
		require.NoError(t, tc.Handshake())
		_ = tc.Close()
	})
}
