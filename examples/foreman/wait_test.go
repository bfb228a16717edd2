package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With -wait-for-person, a run whose stories left all wait for a person
// keeps its page and goes on once a person decides there: a story paused,
// resolved on the page, and merged, in one run.
func TestARunWaitsForAPersonDecidingOnThePage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	require.NoError(t, os.WriteFile(filepath.Join(f.ctl, "US-001.fail"), nil, 0o644))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	cmd, _, stderr := f.command(t, append(f.runArgs(), "-http", addr, "-wait-for-person")...)
	cmd.Stdout = nil
	pr, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	// Read the output as it comes: the page's token, then the wait.
	var token string
	var seen strings.Builder
	lines := bufio.NewScanner(pr)
	tokenRE := regexp.MustCompile(`#token=([0-9a-f]+)`)
	for lines.Scan() {
		l := lines.Text()
		seen.WriteString(l + "\n")
		if m := tokenRE.FindStringSubmatch(l); m != nil {
			token = m[1]
		}
		if strings.Contains(l, "wait for a person: decide on the status page") {
			break
		}
	}
	require.NotEmpty(t, token, seen.String())
	require.Contains(t, seen.String(), "wait for a person", "stderr: %s", stderr)

	require.NoError(t, os.Remove(filepath.Join(f.ctl, "US-001.fail")))
	resp, err := http.PostForm("http://"+addr+"/api/resolve", url.Values{"story": {"US-001"}, "action": {"retry"}, "token": {token}})
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))

	rest, _ := io.ReadAll(pr)
	seen.Write(rest)
	require.NoError(t, cmd.Wait(), "stdout:\n%s\nstderr:\n%s", seen.String(), stderr)
	assert.ElementsMatch(t, []string{"US-001", "US-002", "US-003"}, f.merged(t))
	assert.Contains(t, seen.String(), "3 merged")
}
