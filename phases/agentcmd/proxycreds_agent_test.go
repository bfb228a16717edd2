package agentcmd

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/testrepo"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/gates"
)

// proxyWorkspace is a repository in a directory a sandboxed agent sees.
func proxyWorkspace(t *testing.T) string {
	t.Helper()
	ws := visibleTempDir(t)
	_, err := testrepo.New(ws, "main", testrepo.Commit{Files: map[string]string{"README": "hello\n"}})
	require.NoError(t, err)
	return ws
}

// requireNoSecretIn asserts that no file under dir holds the credentials.
func requireNoSecretIn(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		requireNoSecret(t, path, string(data))
		return nil
	}))
}

// requireGone asserts that nothing listens at addr any more.
func requireGone(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err == nil {
		_ = c.Close()
	}
	require.Error(t, err, "the local proxy still listens after the run")
}

// hostileDump is a script's attempt at every place the credentials could
// be read: its environment, every process's it can see (environ,
// cmdline, readable memory), the system's environment file, and the local
// proxy's answers. The memory goes to mem.bin, the rest to loot.txt, both
// in the workspace, and loot.txt is printed.
const hostileDump = `
{
echo "== env"; env
echo "== self"; tr '\0' '\n' < /proc/self/environ
echo "== parent $PPID"; tr '\0' '\n' < /proc/$PPID/environ
for p in /proc/[0-9]*; do
  echo "== $p"; tr '\0' '\n' < $p/environ; tr '\0' ' ' < $p/cmdline; echo
done
cat /etc/environment
echo "== the proxy asked for itself"; curl -sS -i "$HTTPS_PROXY/"
echo "== a plain request through it"; curl -sS -i -x "$HTTPS_PROXY" http://127.0.0.1:1/
} > loot.txt 2>&1
for p in /proc/[0-9]*; do
  while read range perms rest; do
    case $perms in r*) s=$((0x${range%-*})); e=$((0x${range#*-}))
      dd if=$p/mem bs=4096 skip=$((s/4096)) count=$(((e-s)/4096)) 2>/dev/null;; esac
  done < $p/maps 2>/dev/null
done > mem.bin
cat loot.txt
echo "proxy=$HTTPS_PROXY"
`

// (1) A hostile agent in the sandbox, reading its environment, every
// process's it sees and their memory, finds the proxy's credentials
// nowhere: not in what it prints, not in what it writes.
func TestAHostileAgentNeverSeesTheProxysCredentials(t *testing.T) {
	requireSandbox(t)
	requireCurl(t)
	target, _ := tlsTarget(t)
	up := newUpstreamProxy(t, target.Listener.Addr().String())
	setProxyEnv(t, up.url())
	ws := proxyWorkspace(t)
	agent := writeScript(t, t.TempDir(), "agent", hostileDump)
	rec := &recorder{}
	res, err := New(Config{Argv: []string{agent}, Sandbox: Sandbox{Mode: SandboxRequired}}).
		Execute(context.Background(), phases.AgentRequest{WorkspacePath: ws}, rec.callback)
	require.NoError(t, err)
	require.True(t, res.Success, res.Stderr)

	loot, err := os.ReadFile(filepath.Join(ws, "loot.txt"))
	require.NoError(t, err)
	assert.Contains(t, string(loot), "HTTPS_PROXY=http://127.0.0.1:", "the dump holds the environment")
	assert.Contains(t, string(loot), "plain via upstream: http://127.0.0.1:1/", "the proxy worked for it")
	requireNoSecret(t, "the result", res.Output+res.Stderr+res.Result)
	requireNoSecret(t, "the events", strings.Join(append(rec.stdoutLines(), rec.lines(phases.StreamStderr)...), "\n"))
	requireNoSecretIn(t, ws)
	requireGone(t, localProxyFrom(t, res.Output))
}

// (2, 3, 4) A cooperative agent reaches an HTTPS target through the local
// proxy (a tunnel) and a plain-HTTP one, with the upstream's credentials
// added; the Proxy-Authorization it sends itself never passes; the local
// proxy is gone once Execute returns. Sandboxed and not.
func TestAnAgentWorksThroughTheProxyWithoutItsCredentials(t *testing.T) {
	requireCurl(t)
	for _, mode := range []SandboxMode{SandboxOff, SandboxRequired} {
		t.Run(string(mode), func(t *testing.T) {
			if mode == SandboxRequired {
				requireSandbox(t)
			}
			target, caFile := tlsTarget(t)
			up := newUpstreamProxy(t, target.Listener.Addr().String())
			setProxyEnv(t, up.url())
			_, port, err := net.SplitHostPort(target.Listener.Addr().String())
			require.NoError(t, err)
			agent := writeScript(t, t.TempDir(), "agent", `set -e
curl -sS --fail --cacert "$CA" "https://example.com:$TPORT/"
curl -sS --fail --cacert "$CA" --proxy-header "Proxy-Authorization: Basic ZXZpbDpldmls" "https://example.com:$TPORT/"
curl -sS --fail -H "Proxy-Authorization: Basic ZXZpbDpldmls" --proxy-header "Proxy-Authorization: Basic ZXZpbDpldmls" "http://plain.example/x"
echo "proxy=$HTTPS_PROXY"
`)
			res, err := New(Config{Argv: []string{agent}, Env: []string{"CA=" + caFile, "TPORT=" + port}, Sandbox: Sandbox{Mode: mode}}).
				Execute(context.Background(), phases.AgentRequest{WorkspacePath: proxyWorkspace(t)}, nil)
			require.NoError(t, err)
			require.True(t, res.Success, "%s\n%s", res.Output, res.Stderr)
			assert.Equal(t, 2, strings.Count(res.Output, "hello through the tunnel"), res.Output)
			assert.Contains(t, res.Output, "plain via upstream: http://plain.example/x")
			assert.Equal(t, []string{wantProxyAuth(), wantProxyAuth(), wantProxyAuth()}, up.seen(),
				"the upstream saw its credentials on every request, never the agent's")
			requireNoSecret(t, "the result", res.Output+res.Stderr)
			requireGone(t, localProxyFrom(t, res.Output))
		})
	}
}

// (5) A contained gate check gets the same: the local proxy until Done,
// the credentials nowhere it looks; offline, the proxy's URL without them
// and no local proxy.
func TestAContainedCheckWorksThroughTheProxyWithoutItsCredentials(t *testing.T) {
	requireSandbox(t)
	requireCurl(t)
	for _, offline := range []bool{false, true} {
		name := map[bool]string{false: "online", true: "offline"}[offline]
		t.Run(name, func(t *testing.T) {
			target, caFile := tlsTarget(t)
			up := newUpstreamProxy(t, target.Listener.Addr().String())
			setProxyEnv(t, up.url())
			_, port, err := net.SplitHostPort(target.Listener.Addr().String())
			require.NoError(t, err)
			ws := proxyWorkspace(t)
			check := writeScript(t, ws, "check.sh", hostileDump+`
curl -sS --fail --cacert "$CA" --proxy-header "Proxy-Authorization: Basic ZXZpbDpldmls" "https://example.com:$TPORT/"
`)
			d := New(Config{Argv: []string{"true"}, Sandbox: Sandbox{Mode: SandboxRequired, ChecksOffline: offline}})
			res := verifyOne(t, d, ws, phases.GateCheck{Name: "proxy", Argv: []string{check}, Env: []string{"CA=" + caFile, "TPORT=" + port}})

			requireNoSecret(t, "the check's output", res.Output)
			requireNoSecretIn(t, ws)
			if offline {
				assert.False(t, res.Passed, "no network: %s", res.Output)
				assert.Contains(t, res.Output, "proxy=http://"+up.addr+"\n", "the upstream's URL without its credentials")
				assert.Empty(t, up.seen())
				return
			}
			require.True(t, res.Passed, res.Output)
			assert.Contains(t, res.Output, "hello through the tunnel")
			assert.Equal(t, []string{wantProxyAuth(), wantProxyAuth(), wantProxyAuth()}, up.seen(), "two plain requests (one for the local proxy itself, through http_proxy) and the tunnel")
			requireGone(t, localProxyFrom(t, res.Output))
		})
	}
}

// (6) A proxy variable the driver cannot read starts no agent and no
// check: a *ProxyURLError naming the variable, quoting nothing of it.
func TestAnUnreadableProxyURLStartsNothing(t *testing.T) {
	bad := "http://" + proxyUser + ":" + proxyPassInURL + "@proxy.corp:notaport"
	for _, mode := range []SandboxMode{SandboxOff, SandboxAuto} {
		t.Run(string(mode), func(t *testing.T) {
			setProxyEnv(t, "")
			t.Setenv("all_proxy", bad)
			ws := proxyWorkspace(t)
			marker := filepath.Join(ws, "started")
			script := writeScript(t, t.TempDir(), "run", "touch "+marker+"\n")
			d := New(Config{Argv: []string{script}, Sandbox: Sandbox{Mode: mode}})

			_, err := d.Execute(context.Background(), phases.AgentRequest{WorkspacePath: ws}, nil)
			var pe *ProxyURLError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, "all_proxy", pe.Name)
			requireNoSecret(t, "the error", err.Error())

			_, err = d.Contain(context.Background(), gates.CheckCommand{Dir: ws, Argv: []string{script}})
			require.ErrorAs(t, err, &pe)
			assert.NoFileExists(t, marker)
		})
	}
}
