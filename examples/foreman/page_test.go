package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// holdWithPage is holdInBuild with output the test can read while the run
// goes on (the page's URL and token).
func (f *fixture) holdWithPage(t *testing.T, extra ...string) (cmd *exec.Cmd, stdout, stderr *syncBuffer) {
	t.Helper()
	started, release := filepath.Join(f.ctl, "US-002.started"), filepath.Join(f.ctl, "US-002.release")
	require.NoError(t, syscall.Mkfifo(started, 0o644))
	require.NoError(t, syscall.Mkfifo(release, 0o644))
	cmd, _, _ = f.command(t, append(f.runArgs(), extra...)...)
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	require.NoError(t, cmd.Start())
	data, err := os.ReadFile(started) // blocks until the agent writes
	require.NoError(t, err)
	require.Equal(t, "started\n", string(data))
	var agentPid int
	for _, l := range strings.Split(readFile(t, filepath.Join(f.ctl, "log")), "\n") {
		if strings.HasPrefix(l, "US-002 2 ") {
			_, err := fmt.Sscanf(strings.Fields(l)[3], "%d", &agentPid)
			require.NoError(t, err)
		}
	}
	require.NotZero(t, agentPid)
	t.Cleanup(func() {
		if alive(agentPid) {
			_ = syscall.Kill(-agentPid, syscall.SIGKILL)
		}
	})
	return cmd, stdout, stderr
}

func fetch(t *testing.T, url, host string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// The run serves the live status page on 127.0.0.1 and prints its URL
// with the access token; the page, its status (with the token) and the
// metrics are there while the team runs, and nothing answers a request
// that names another host (DNS rebinding) or comes without the token.
func TestTheRunServesTheStatusPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	cmd, stdout, stderr := f.holdWithPage(t, "-http", addr)
	m := regexp.MustCompile(`status page: http://` + regexp.QuoteMeta(addr) + `/#token=([0-9a-f]{32}) \(metrics: http://` +
		regexp.QuoteMeta(addr) + `/metrics\)`).FindStringSubmatch(stdout.String())
	require.NotNil(t, m, "stdout:\n%s", stdout)
	token := m[1]
	base := "http://" + addr

	status, body := fetch(t, base+"/api/status", "", "X-Foreman-Token", token)
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `"US-002"`)
	status, body = fetch(t, base+"/api/status", "")
	assert.Equal(t, http.StatusUnauthorized, status, "no token, no story")
	assert.NotContains(t, body, `"US-002"`)
	status, _ = fetch(t, base+"/api/stream?token=x"+token, "")
	assert.Equal(t, http.StatusForbidden, status)
	status, _ = fetch(t, base+"/", "")
	assert.Equal(t, http.StatusOK, status, "the page loads without the token (it takes it from its fragment)")

	status, exposition := fetch(t, base+"/metrics", "")
	assert.Equal(t, http.StatusOK, status, "metrics hold no story: no token")
	assert.Regexp(t, `foreman_team_stories\{state="running"\} [12]\n`, exposition, "US-002 (and US-003, unless it merged)")
	assert.Regexp(t, `foreman_worker_workers\{state="Busy"\} [12]\n`, exposition)
	assert.Contains(t, exposition, "foreman_team_running 1")
	assert.Contains(t, exposition, "go_goroutines")
	assert.NotContains(t, exposition, "US-00", "no story id in the metrics")

	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	for _, path := range []string{"/", "/api/status", "/metrics"} {
		status, body = fetch(t, base+path, "rebound.example:"+port, "X-Foreman-Token", token)
		assert.Equal(t, http.StatusForbidden, status, path)
		assert.Contains(t, body, "DNS rebinding", path)
		status, _ = fetch(t, base+path, "", "X-Foreman-Token", token, "Origin", "http://evil.example")
		assert.Equal(t, http.StatusForbidden, status, path)
		status, _ = fetch(t, base+path, "localhost:"+port, "X-Foreman-Token", token)
		assert.Equal(t, http.StatusOK, status, "localhost names it too: %s", path)
	}

	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	require.Equal(t, exitInterrupted, exitCode(t, cmd.Wait()), "stderr:\n%s", stderr)
	assert.NotContains(t, stderr.String(), "warning", "127.0.0.1 is this machine only")
}

// An address beyond this machine is served with a warning, and the URL
// printed is one the page answers (a wildcard address is no name a
// browser can use).
func TestAPageBeyondThisMachineIsServedWithAWarning(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var stdout, stderr bytes.Buffer
	// The run is over in a moment: the warning and the URL are what count.
	cmd, _, _ := f.command(t, append(f.runArgs(), "-http", "0.0.0.0:0")...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stderr:\n%s", &stderr)
	warning := strings.Join(strings.Fields(stderr.String()), " ")
	assert.Contains(t, warning, "warning: -http 0.0.0.0:0 serves the status page beyond this machine")
	assert.Contains(t, warning, "the token (it travels in clear)")
	assert.Contains(t, warning, "127.0.0.1, localhost or [::1]")
	assert.Regexp(t, `status page: http://127\.0\.0\.1:\d+/#token=[0-9a-f]{32}`, stdout.String())
}
