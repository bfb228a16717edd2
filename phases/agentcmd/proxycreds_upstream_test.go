package agentcmd

import (
	"bufio"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// The credentials of the tests' upstream proxy: the password holds a
// percent-escaped "@", which the driver decodes.
const (
	proxyUser      = "corp-user"
	proxyPassword  = "s3cr@t-Pw" // as decoded
	proxyPassInURL = "s3cr%40t-Pw"
)

// proxySecrets are the forms in which the credentials must appear nowhere
// an agent can reach.
func proxySecrets() []string {
	return []string{proxyPassword, proxyPassInURL, base64.StdEncoding.EncodeToString([]byte(proxyUser + ":" + proxyPassword))}
}

// wantProxyAuth is what the upstream requires.
func wantProxyAuth() string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(proxyUser+":"+proxyPassword))
}

// upstreamProxy is a corporate proxy as a test sees it: on 127.0.0.1, it
// answers 407 without the right Proxy-Authorization, tunnels every CONNECT
// to one target whatever host it names, and answers a plain-HTTP proxy
// request itself ("plain via upstream: <url>").
type upstreamProxy struct {
	addr   string
	target string // the address every CONNECT reaches
	mu     sync.Mutex
	auths  []string // the Proxy-Authorization of every request, in order
	conns  []net.Conn
	// hung gets a value for each plain request for /hang, which is never
	// answered.
	hung chan struct{}
}

func newUpstreamProxy(t *testing.T, target string) *upstreamProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	u := &upstreamProxy{addr: ln.Addr().String(), target: target, hung: make(chan struct{}, 8)}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		u.mu.Lock()
		for _, c := range u.conns {
			_ = c.Close()
		}
		u.mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.mu.Lock()
			u.conns = append(u.conns, c)
			u.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { _ = c.Close() }()
				u.serve(c)
			}()
		}
	}()
	return u
}

// url is the upstream's proxy URL with the test's credentials.
func (u *upstreamProxy) url() string {
	return "http://" + proxyUser + ":" + proxyPassInURL + "@" + u.addr
}

func (u *upstreamProxy) serve(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		auth := req.Header.Get("Proxy-Authorization")
		u.mu.Lock()
		u.auths = append(u.auths, auth)
		u.mu.Unlock()
		if auth != wantProxyAuth() {
			_, _ = io.WriteString(c, "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"corp\"\r\nContent-Length: 7\r\n\r\ndenied\n")
			if req.Method == http.MethodConnect {
				return
			}
			continue
		}
		if req.Method == http.MethodConnect {
			t, err := net.Dial("tcp", u.target)
			if err != nil {
				_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
				return
			}
			defer func() { _ = t.Close() }()
			u.mu.Lock()
			u.conns = append(u.conns, t) // closed with the upstream
			u.mu.Unlock()
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n")
			// Each way ends as it ends: a half-close is passed on
			// as a half-close, as a real proxy's tunnel does.
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(t, br)
				_ = t.(*net.TCPConn).CloseWrite()
				close(done)
			}()
			_, _ = io.Copy(c, t)
			_ = c.(*net.TCPConn).CloseWrite()
			<-done
			_ = c.Close()
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		if req.URL.Path == "/hang" {
			u.hung <- struct{}{}
			_, _ = io.Copy(io.Discard, br) // until the connection ends
			return
		}
		body := "plain via upstream: " + req.URL.String() + "\n"
		_, _ = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
}

// seen returns the Proxy-Authorization values the upstream saw.
func (u *upstreamProxy) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.auths...)
}

// tlsTarget is an HTTPS server on 127.0.0.1 (its certificate names
// example.com) and the path of its certificate in a directory a sandboxed
// agent sees.
func tlsTarget(t *testing.T) (srv *httptest.Server, caFile string) {
	t.Helper()
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello through the tunnel\n")
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // tunnels closed mid-handshake, on purpose
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caFile = filepath.Join(visibleTempDir(t), "ca.pem")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644))
	return srv, caFile
}

// setProxyEnv points the host's proxy variables at u with its credentials
// (NO_PROXY empty: nothing bypasses it).
func setProxyEnv(t *testing.T, value string) {
	t.Helper()
	for _, k := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"} {
		t.Setenv(k, value)
	}
	for _, k := range []string{"ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"} {
		t.Setenv(k, "")
	}
}

// requireCurl skips where curl is missing (fails in CI, which has it).
func requireCurl(t *testing.T) {
	t.Helper()
	for _, dir := range []string{"/usr/bin", "/bin", "/usr/local/bin"} {
		if _, err := os.Stat(filepath.Join(dir, "curl")); err == nil {
			return
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI needs curl for the proxy tests")
	}
	t.Skip("no curl here")
}

// requireNoSecret asserts that none of the proxy's credentials is in s.
func requireNoSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, secret := range proxySecrets() {
		require.NotContains(t, s, secret, "%s holds the proxy's credentials", what)
	}
}

// localProxyFrom finds the local proxy's address in an agent's output line
// "proxy=http://127.0.0.1:PORT".
func localProxyFrom(t *testing.T, out string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "proxy="); ok {
			addr, ok := strings.CutPrefix(v, "http://")
			require.True(t, ok, "the agent's proxy is %q", v)
			host, _, err := net.SplitHostPort(addr)
			require.NoError(t, err)
			require.Equal(t, "127.0.0.1", host)
			return addr
		}
	}
	require.Failf(t, "no proxy= line", "%s", out)
	return ""
}
