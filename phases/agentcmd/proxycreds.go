package agentcmd

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// A proxy variable's credentials (HTTPS_PROXY=http://user:secret@proxy:3128)
// are the host's: an agent that read them could use them from anywhere.
// The driver keeps them out of every agent's and check's environment: for
// the duration of the run it serves a forwarding proxy on the host's
// 127.0.0.1 that adds them on the way to the real proxy, and hands the
// agent that local proxy's address instead (proxyEnv).

// ProxyURLError means a proxy variable the driver would hand an agent or a
// gate check holds a value it cannot use: not a URL, no host, or
// credentials for a proxy that is not an HTTP(S) proxy (socks5://u:p@...).
// Nothing was started: the driver never passes such a value on, since it
// may hold credentials it cannot keep out.
type ProxyURLError struct {
	// Name is the variable (HTTPS_PROXY, all_proxy, ...).
	Name string
	// Reason says what is wrong; it never quotes the value.
	Reason string
}

func (e *ProxyURLError) Error() string {
	return fmt.Sprintf("agentcmd: proxy variable %s: %s (its value is not shown: it may hold a password)", e.Name, e.Reason)
}

// Bounds of the local proxy.
const (
	// proxyMaxHeaderBytes bounds a request's headers from the agent and
	// the upstream proxy's answer to a CONNECT.
	proxyMaxHeaderBytes = 64 << 10
	// proxyHandshakeTimeout bounds reading a request's headers and the
	// upstream's answer to a CONNECT.
	proxyHandshakeTimeout = 30 * time.Second
	// proxyIdleTimeout closes a connection or tunnel that carried no byte
	// either way for this long (a model's reply may keep a stream quiet
	// for minutes).
	proxyIdleTimeout = 10 * time.Minute
	// proxyErrorBodyBytes bounds the body of an upstream refusal relayed.
	proxyErrorBodyBytes = 64 << 10
)

// isProxyVar reports whether name is a proxy variable whose credentials the
// driver keeps out: HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, in any case.
func isProxyVar(name string) bool {
	for _, n := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		if strings.EqualFold(name, n) {
			return true
		}
	}
	return false
}

// parseProxyURL reads a proxy variable's value as Go's and curl's clients
// do: a URL, or host:port without a scheme (taken as http://).
func parseProxyURL(name, v string) (*url.URL, error) {
	u, err := url.Parse(v)
	if !strings.Contains(v, "://") && (err != nil || u.Scheme == "" || u.Host == "") {
		u, err = url.Parse("http://" + v)
	}
	if strings.Contains(v, "@") && (err != nil || u.User == nil) {
		// A password with a / ? or # not percent-encoded ends the
		// authority early: the parser then fails on, or takes as the
		// host, a piece of the password. Neither its message nor the
		// value may go anywhere.
		return nil, &ProxyURLError{Name: name, Reason: "not a URL with user:password@host as the driver reads it (percent-encode any % / ? # @ in the password)"}
	}
	if err != nil {
		// The parser's message quotes the value; its cause does not,
		// except a bad escape's, which quotes three of its bytes.
		reason := "not a URL the driver can read"
		var ue *url.Error
		var esc url.EscapeError
		switch {
		case errors.As(err, &esc):
			reason += ": a bad percent-escape"
		case errors.As(err, &ue):
			reason += ": " + ue.Err.Error()
		}
		return nil, &ProxyURLError{Name: name, Reason: reason}
	}
	if u.Hostname() == "" {
		return nil, &ProxyURLError{Name: name, Reason: "names no host"}
	}
	if u.User != nil && u.Scheme != "http" && u.Scheme != "https" {
		return nil, &ProxyURLError{Name: name, Reason: fmt.Sprintf("credentials for a %q proxy: the driver keeps credentials out of the agent's sight for http and https proxies only", u.Scheme)}
	}
	return u, nil
}

// proxyEnv returns env with the credentials of every proxy variable kept
// out: a proxy variable whose URL has userinfo names a local proxy that
// adds them (one per distinct upstream, served until stop or the end of
// ctx); offline (no network in the sandbox: nothing to reach) it passes
// without them and no proxy starts. Other entries, NO_PROXY and variables
// without userinfo pass unchanged. stop is never nil. A value the driver
// cannot read is a *ProxyURLError, and nothing runs.
func (d *Driver) proxyEnv(ctx context.Context, env []string, offline bool) (_ []string, stop func(), err error) {
	var proxies []*credProxy
	byUpstream := map[string]*credProxy{}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			for _, p := range proxies {
				p.close()
			}
		})
	}
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" || !isProxyVar(k) {
			out = append(out, kv)
			continue
		}
		u, err := parseProxyURL(k, v)
		if err != nil {
			stop()
			return nil, func() {}, err
		}
		if u.User == nil {
			out = append(out, kv)
			continue
		}
		if offline {
			u.User = nil
			out = append(out, k+"="+u.String())
			continue
		}
		key := u.String()
		p := byUpstream[key]
		if p == nil {
			if p, err = startCredProxy(u, proxyIdleTimeout, d.cfg.Logger); err != nil {
				stop()
				return nil, func() {}, fmt.Errorf("agentcmd: proxy variable %s: serving a local proxy: %w", k, err)
			}
			proxies = append(proxies, p)
			byUpstream[key] = p
		}
		out = append(out, k+"=http://"+p.addr())
	}
	if len(proxies) > 0 {
		stopWithCtx := context.AfterFunc(ctx, stop)
		inner := stop
		stop = func() { stopWithCtx(); inner() }
	}
	return out, stop, nil
}

// credProxy is a forwarding proxy on 127.0.0.1 for one upstream proxy: it
// takes CONNECT tunnels and plain-HTTP proxy requests from local clients
// and passes them to the upstream with the upstream's Proxy-Authorization,
// the client's own never.
type credProxy struct {
	upstream *url.URL // without credentials
	auth     string   // the Proxy-Authorization value; "" for none
	ln       net.Listener
	srv      *http.Server
	tr       *http.Transport
	rp       *httputil.ReverseProxy
	idle     time.Duration
	// cancel ends every request's context: a plain request in flight, an
	// upgraded connection httputil holds (its own hijack, not tunnels').
	cancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	tunnels map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// startCredProxy serves a local proxy for upstream u (with its userinfo)
// that closes a tunnel quiet for idle.
func startCredProxy(u *url.URL, idle time.Duration, logger *slog.Logger) (*credProxy, error) {
	up := *u
	up.User, up.Path, up.RawPath, up.RawQuery, up.Fragment = nil, "", "", "", ""
	p := &credProxy{upstream: &up, idle: idle, tunnels: map[net.Conn]struct{}{}}
	user := u.User.Username()
	pass, _ := u.User.Password()
	if user != "" || pass != "" {
		p.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.ln = newLoopbackListener(ln)
	dialer := &net.Dialer{Timeout: proxyHandshakeTimeout}
	p.tr = &http.Transport{
		Proxy:                  http.ProxyURL(p.upstream),
		DialContext:            dialer.DialContext,
		TLSHandshakeTimeout:    proxyHandshakeTimeout,
		MaxResponseHeaderBytes: proxyMaxHeaderBytes,
		IdleConnTimeout:        proxyIdleTimeout,
		DisableCompression:     true, // pass the response as it comes
	}
	errLog := slog.NewLogLogger(logger.Handler(), slog.LevelDebug)
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.Header.Del("Proxy-Authorization")
			pr.Out.Header.Del("Max-Forwards") // no proxy on the way answers in the origin's place
			if p.auth != "" {
				pr.Out.Header.Set("Proxy-Authorization", p.auth)
			}
		},
		Transport:     p.tr,
		FlushInterval: -1, // a stream (SSE) passes as it comes
		ErrorLog:      errLog,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			upstreamFailed(w, r, "agentcmd proxy: upstream: "+err.Error())
		},
	}
	base, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.srv = &http.Server{
		Handler:           p,
		BaseContext:       func(net.Listener) context.Context { return base },
		ReadHeaderTimeout: proxyHandshakeTimeout,
		MaxHeaderBytes:    proxyMaxHeaderBytes,
		IdleTimeout:       proxyIdleTimeout,
		ErrorLog:          errLog,
	}
	go func() { _ = p.srv.Serve(p.ln) }()
	return p, nil
}

// addr is where the local proxy listens (127.0.0.1:port).
func (p *credProxy) addr() string { return p.ln.Addr().String() }

// close stops the proxy: the listener, every connection and tunnel. It
// waits for the tunnels' copies to end.
func (p *credProxy) close() {
	p.cancel()
	p.mu.Lock()
	p.closed = true
	for c := range p.tunnels {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.srv.Close()
	p.tr.CloseIdleConnections()
	p.wg.Wait()
}

// track registers a tunnel's connections to close with the proxy; false
// when the proxy is already closed (they are closed then).
func (p *credProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.tunnels[c] = struct{}{}
	}
	p.wg.Add(1)
	return true
}

func (p *credProxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	for _, c := range conns {
		_ = c.Close()
		delete(p.tunnels, c)
	}
	p.mu.Unlock()
	p.wg.Done()
}

// ServeHTTP takes a CONNECT or a plain-HTTP proxy request (absolute http://
// URL); anything else is refused.
func (p *credProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.tunnel(w, r)
		return
	}
	if r.Method == http.MethodTrace || strings.EqualFold(r.Method, "TRACK") {
		// A proxy answers TRACE by echoing the request, the credentials
		// it was given included.
		http.Error(w, "agentcmd proxy: "+r.Method+" is not passed on", http.StatusMethodNotAllowed)
		return
	}
	if !r.URL.IsAbs() || r.URL.Scheme != "http" || r.URL.Host == "" {
		http.Error(w, "agentcmd proxy: only CONNECT and proxy requests for http:// URLs", http.StatusBadRequest)
		return
	}
	p.rp.ServeHTTP(w, r)
}

// upstreamFailed answers a request the upstream failed with a 502 naming
// the cause, unless the request was cut (the run ended and the proxy
// stopped, or the client went away): then the connection is dropped
// with nothing written, so the agent sees its request cut, not an answer.
func upstreamFailed(w http.ResponseWriter, r *http.Request, msg string) {
	if r.Context().Err() != nil {
		panic(http.ErrAbortHandler)
	}
	http.Error(w, msg, http.StatusBadGateway)
}

// dialUpstream connects to the upstream proxy (TLS for an https:// one).
func (p *credProxy) dialUpstream(ctx context.Context) (net.Conn, error) {
	port := p.upstream.Port()
	if port == "" {
		port = "80"
		if p.upstream.Scheme == "https" {
			port = "443"
		}
	}
	addr := net.JoinHostPort(p.upstream.Hostname(), port)
	dialer := &net.Dialer{Timeout: proxyHandshakeTimeout}
	if p.upstream.Scheme == "https" {
		td := &tls.Dialer{NetDialer: dialer, Config: &tls.Config{ServerName: p.upstream.Hostname()}}
		return td.DialContext(ctx, "tcp", addr)
	}
	return dialer.DialContext(ctx, "tcp", addr)
}

// tunnel asks the upstream for a tunnel to r's target with the upstream's
// credentials, and joins it to the client's connection.
func (p *credProxy) tunnel(w http.ResponseWriter, r *http.Request) {
	target := r.Host
	if _, port, err := net.SplitHostPort(target); err != nil || port == "" || strings.ContainsAny(target, " \r\n\t") {
		http.Error(w, "agentcmd proxy: CONNECT needs host:port", http.StatusBadRequest)
		return
	}
	up, err := p.dialUpstream(r.Context())
	if err != nil {
		upstreamFailed(w, r, "agentcmd proxy: upstream: "+err.Error())
		return
	}
	// Until the tunnel is tracked, the run's end (or the client's going)
	// closes the upstream connection: the handshake's reads do not watch
	// the context.
	untilTracked := context.AfterFunc(r.Context(), func() { _ = up.Close() })
	defer untilTracked()
	// Real time: a connection's deadline is the OS's clock, not an
	// injectable one.
	_ = up.SetDeadline(time.Now().Add(proxyHandshakeTimeout))
	head := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	if p.auth != "" {
		head += "Proxy-Authorization: " + p.auth + "\r\n"
	}
	if _, err := io.WriteString(up, head+"\r\n"); err != nil {
		_ = up.Close()
		upstreamFailed(w, r, "agentcmd proxy: upstream: "+err.Error())
		return
	}
	upr := bufio.NewReader(&io.LimitedReader{R: up, N: proxyMaxHeaderBytes})
	resp, err := http.ReadResponse(upr, &http.Request{Method: http.MethodConnect})
	if err != nil {
		_ = up.Close()
		upstreamFailed(w, r, "agentcmd proxy: upstream's answer to CONNECT: "+err.Error())
		return
	}
	if resp.StatusCode < 200 {
		_ = up.Close()
		upstreamFailed(w, r, fmt.Sprintf("agentcmd proxy: upstream answered CONNECT with %d, not a final status", resp.StatusCode))
		return
	}
	if resp.StatusCode > 299 {
		// Its refusal, passed on without its Proxy-Authenticate: the
		// credentials are the driver's to give, not the agent's.
		defer func() { _ = up.Close() }()
		if ct := resp.Header.Get("Content-Type"); ct != "" {
			w.Header().Set("Content-Type", ct)
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, io.LimitReader(resp.Body, proxyErrorBodyBytes))
		return
	}
	_ = up.SetDeadline(time.Time{})
	client, cbuf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		_ = up.Close()
		http.Error(w, "agentcmd proxy: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if !untilTracked() || !p.track(client, up) {
		_ = client.Close() // the run ended during the handshake
		return
	}
	defer p.untrack(client, up)
	_ = client.SetDeadline(time.Time{})
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	// What either side sent past its headers, already read.
	if n := upr.Buffered(); n > 0 {
		b, _ := upr.Peek(n)
		if _, err := client.Write(b); err != nil {
			return
		}
	}
	if n := cbuf.Reader.Buffered(); n > 0 {
		b, _ := cbuf.Reader.Peek(n)
		if _, err := up.Write(b); err != nil {
			return
		}
	}
	p.splice(client, up)
}

// splice copies both ways until both ends are done, either fails, or no
// byte passed either way for p.idle.
func (p *credProxy) splice(a, b net.Conn) {
	var mu sync.Mutex
	last := time.Now()
	touch := func() { mu.Lock(); last = time.Now(); mu.Unlock() }
	quiet := func() bool { mu.Lock(); defer mu.Unlock(); return time.Since(last) >= p.idle }
	copyOne := func(dst, src net.Conn) error {
		buf := make([]byte, 32<<10)
		for {
			_ = src.SetReadDeadline(time.Now().Add(p.idle))
			n, err := src.Read(buf)
			if n > 0 {
				touch()
				_ = dst.SetWriteDeadline(time.Now().Add(p.idle))
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return werr
				}
			}
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() && !quiet() {
					continue // the other way is busy
				}
				return err
			}
		}
	}
	done := make(chan error, 2)
	half := func(dst, src net.Conn) {
		err := copyOne(dst, src)
		if errors.Is(err, io.EOF) {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite() // the other way may still carry an answer
				done <- nil
				return
			}
		}
		done <- err
	}
	go half(b, a)
	go half(a, b)
	if err := <-done; err != nil {
		// One way failed or went quiet: the other ends with it.
		_ = a.Close()
		_ = b.Close()
	}
	<-done
}
