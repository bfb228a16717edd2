package agentcmd

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What a hostile agent might try on the local proxy to get the
// credentials back, or the driver's descriptors away.

// A TRACE would have the upstream echo the request, Proxy-Authorization
// included: it is refused, and the upstream never sees it.
func TestTheLocalProxyPassesNoTrace(t *testing.T) {
	up := newUpstreamProxy(t, "127.0.0.1:9")
	addr, _ := startLocalProxy(t, up.url())
	for _, method := range []string{"TRACE", "TRACK"} {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		_, err = io.WriteString(c, method+" http://origin.example/ HTTP/1.1\r\nHost: origin.example\r\nMax-Forwards: 0\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		_ = c.Close()
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, method)
		requireNoSecret(t, method+"'s answer", string(body))
	}
	assert.Empty(t, up.seen(), "the upstream saw no request")
}

// A password with an unencoded / ? or # ends the URL's authority early:
// the value is refused without a word of it, never passed on.
func TestAnAtThatIsNotUserinfoIsRefusedSilently(t *testing.T) {
	for _, value := range []string{
		"http://bob:PWa#PWb@proxy.corp:3128",   // the parser fails on a piece of the password
		"http://bob:7301#8402@proxy.corp:3128", // the parser takes bob:7301 for the host: no userinfo
		"http://bob:7301/8402@proxy.corp:3128",
		"bob:7301?8402@proxy.corp:3128",
	} {
		t.Run(value, func(t *testing.T) {
			env, stop, err := New(Config{}).proxyEnv(context.Background(), []string{"HTTPS_PROXY=" + value}, false)
			defer stop()
			var pe *ProxyURLError
			require.ErrorAs(t, err, &pe, "passed on as %v", env)
			for _, piece := range []string{"PWa", "PWb", "7301", "8402"} {
				assert.NotContains(t, err.Error(), piece)
			}
			assert.Contains(t, pe.Reason, "percent-encode")
		})
	}
}

// The run's end cuts a CONNECT whose upstream has not answered yet: the
// upstream's connection is closed at once, not at the handshake's 30 s.
func TestTheRunsEndCutsAHandshakeInProgress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	closed := make(chan struct{})
	accepted := make(chan struct{})
	go func() { // an upstream that reads the CONNECT and never answers
		c, err := ln.Accept()
		if err != nil {
			return
		}
		close(accepted)
		_, _ = io.Copy(io.Discard, c) // until the local proxy closes it
		close(closed)
	}()
	addr, stop := startLocalProxy(t, "http://"+proxyUser+":"+proxyPassInURL+"@"+ln.Addr().String())
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = io.WriteString(c, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
	require.NoError(t, err)
	<-accepted
	stop()
	select {
	case <-closed:
	case <-time.After(10 * time.Second): // a guard; the handshake's own bound is 30 s
		t.Fatal("the upstream connection outlived the run")
	}
}

// At most proxyMaxConns connections are open at once; one more is closed
// at once, and a slot is free again when a connection ends.
func TestTheLocalProxyBoundsItsConnections(t *testing.T) {
	up := newUpstreamProxy(t, "127.0.0.1:9")
	addr, _ := startLocalProxy(t, up.url())
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	get := func(c net.Conn) (int, error) {
		if _, err := io.WriteString(c, "GET http://origin.example/x HTTP/1.1\r\nHost: origin.example\r\n\r\n"); err != nil {
			return 0, err
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a guard, not a wait
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	for range proxyMaxConns {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		conns = append(conns, c)
	}
	code, err := get(conns[0])
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code, "within the bound")
	extra, err := net.Dial("tcp", addr)
	require.NoError(t, err) // the kernel accepts; the proxy closes it
	_, err = get(extra)
	_ = extra.Close()
	require.Error(t, err, "a connection over the bound is closed")
	_ = conns[len(conns)-1].Close()
	conns = conns[:len(conns)-1]
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		defer func() { _ = c.Close() }()
		code, err := get(c)
		return err == nil && code == http.StatusOK
	}, 10*time.Second, 10*time.Millisecond, "a slot is free again")
	assert.True(t, strings.HasPrefix(addr, "127.0.0.1:"))
}

// A tunnel carries a half-close both ways: the target says all it has and
// closes its side; the agent reads to the end and can still answer.
func TestATunnelCarriesAHalfCloseBothWays(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	heard := make(chan string, 1)
	go func() { // the target: speaks first, half-closes, then listens
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer func() { _ = c.Close() }()
		_, _ = io.WriteString(c, "hello")
		_ = c.(*net.TCPConn).CloseWrite()
		b, _ := io.ReadAll(c)
		heard <- string(b)
	}()
	up := newUpstreamProxy(t, ln.Addr().String())
	addr, _ := startLocalProxy(t, up.url())
	c, br, resp := rawConnect(t, addr, "example.com:443", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got, err := io.ReadAll(br)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(got), "the target's words, then its end")
	_, err = io.WriteString(c, "bye")
	require.NoError(t, err)
	require.NoError(t, c.(*net.TCPConn).CloseWrite())
	select {
	case h := <-heard:
		assert.Equal(t, "bye", h, "the agent's answer after the target's half-close")
	case <-time.After(10 * time.Second): // a guard
		t.Fatal("the target never heard the agent's answer")
	}
}
