package agentcmd_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/realagent"
	"github.com/agentforeman/foreman/modeltest"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
)

// geminiDriver is a FormatGemini driver running the real Gemini CLI
// against srv, unsandboxed, with a HOME of its own (settings.json selecting
// API-key authentication: with GOOGLE_GEMINI_BASE_URL set, Gemini CLI
// does not take the key from the environment alone).
func geminiDriver(t *testing.T, srv *modeltest.Server) *agentcmd.Driver {
	t.Helper()
	bin := realagent.Require(t, realagent.Gemini)
	env, err := realagent.GeminiEnv(srv.URL(), t.TempDir(), nil)
	require.NoError(t, err)
	argv := append([]string{bin}, agentcmd.GeminiArgs()[1:]...)
	return agentcmd.New(agentcmd.Config{Format: agentcmd.FormatGemini, Argv: argv, Env: env,
		Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxOff}})
}

// reportMCP is an MCP server with a report tool that wants a bearer token.
func reportMCP(t *testing.T) *httptest.Server {
	ms := mcp.NewServer(&mcp.Implementation{Name: "foreman", Version: "1"}, nil)
	type input struct {
		Outcome string `json:"outcome"`
	}
	mcp.AddTool(ms, &mcp.Tool{Name: "report", Description: "Report the outcome."},
		func(_ context.Context, _ *mcp.CallToolRequest, in input) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "accepted " + in.Outcome}}}, nil, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs
}

// TestGeminiThroughTheDriver runs the real Gemini CLI with FormatGemini's
// defaults: the prompt on stdin, yolo approval, the result directory outside
// the workspace reached through --include-directories, the MCP server through
// the settings file, tokens equal to those served; then resumes the session.
func TestGeminiThroughTheDriver(t *testing.T) {
	ws, results := t.TempDir(), t.TempDir()
	mcpSrv := reportMCP(t)
	srv := modeltest.Start(t, modeltest.Script{Match: "modeltest-driver", Turns: []modeltest.Turn{
		{Text: "Building.", Calls: []modeltest.Call{modeltest.Shell("echo made > made.txt")}},
		{When: "Process Group PGID", Calls: []modeltest.Call{modeltest.WriteFile(filepath.Join(results, "result.json"), `{"outcome":"done"}`)}},
		{When: "Successfully created", Calls: []modeltest.Call{modeltest.Tool("mcp__foreman__report", map[string]any{"outcome": "done"})}},
		{When: "accepted done", Text: "All done."},
		{When: "go on", Text: "Resumed."},
	}})
	d := geminiDriver(t, srv)
	req := phases.AgentRequest{WorkspacePath: ws, TaskPrompt: "modeltest-driver: build and report", Writable: []string{results},
		MCPServers: []phases.MCPServer{{Name: "foreman", URL: mcpSrv.URL, BearerToken: "s3cret", Tools: []string{"report"}}}}
	start := time.Now()
	res, err := d.Execute(context.Background(), req, nil)
	require.NoError(t, err)
	t.Logf("gemini through the driver: %v; stderr: %s", time.Since(start), res.Stderr)
	require.True(t, res.Success, "%s\n%s", res.Error, res.Output)
	assert.Equal(t, "All done.", res.Result)
	assert.FileExists(t, filepath.Join(ws, "made.txt"))
	assert.FileExists(t, filepath.Join(results, "result.json"))
	assert.Empty(t, res.PermissionDenials)
	assert.Empty(t, srv.Unmatched())
	assert.Contains(t, srv.Requests()[1].Tools, "mcp_foreman_report")
	served := srv.Usage("")
	assert.Equal(t, phases.TokenUsage{Input: served.InputTokens - served.CacheReadInputTokens, Output: served.OutputTokens,
		CacheRead: served.CacheReadInputTokens}, res.Tokens)
	require.NotEmpty(t, res.SessionID)

	before := len(srv.Requests())
	req.SessionID, req.TaskPrompt, req.MCPServers, req.Writable = res.SessionID, "go on", nil, nil
	again, err := d.Execute(context.Background(), req, nil)
	require.NoError(t, err)
	require.True(t, again.Success, "%s\n%s", again.Error, again.Output)
	assert.Equal(t, res.SessionID, again.SessionID)
	assert.Equal(t, "Resumed.", again.Result)
	assert.Equal(t, modeltest.Sum(srv.Requests()[before:]).OutputTokens, again.Tokens.Output, "the resumed run's own tokens")
}

// TestGeminiFailuresThroughTheDriver: a bad key fails at once with the API
// error; a default-mode run (no yolo) is refused its write tool, and says so.
func TestGeminiFailuresThroughTheDriver(t *testing.T) {
	t.Run("401", func(t *testing.T) {
		srv := modeltest.Start(t, modeltest.Script{Turns: modeltest.Times(3, modeltest.Unauthorized())})
		res, err := geminiDriver(t, srv).Execute(context.Background(), phases.AgentRequest{WorkspacePath: t.TempDir(), TaskPrompt: "hi"}, nil)
		require.NoError(t, err)
		assert.False(t, res.Success)
		require.NotNil(t, res.APIError, "%s", res.Output)
		assert.Equal(t, 401, res.APIError.Status)
		assert.Equal(t, "authentication_failed", res.APIError.Code)
		assert.Len(t, srv.Requests(), 2, "the router's request and one try")
	})
	t.Run("refused in the default approval mode", func(t *testing.T) {
		ws := t.TempDir()
		srv := modeltest.Start(t, modeltest.Script{Turns: []modeltest.Turn{
			modeltest.Do(modeltest.WriteFile(filepath.Join(ws, "x.txt"), "x")), {When: "not found", Text: "Could not."}}})
		bin := realagent.Require(t, realagent.Gemini)
		env, err := realagent.GeminiEnv(srv.URL(), t.TempDir(), nil)
		require.NoError(t, err)
		d := agentcmd.New(agentcmd.Config{Format: agentcmd.FormatGemini, Env: env, Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxOff},
			Argv: []string{bin, "--output-format", "stream-json", "--skip-trust"}})
		res, err := d.Execute(context.Background(), phases.AgentRequest{WorkspacePath: ws, TaskPrompt: "write"}, nil)
		require.NoError(t, err)
		assert.True(t, res.Success)
		assert.Equal(t, []phases.AgentPermissionDenial{{Tool: "write_file", Input: filepath.Join(ws, "x.txt")}}, res.PermissionDenials)
	})
}

// TestGeminiInTheSandbox runs the real Gemini CLI in the bubblewrap sandbox:
// its HOME is the sandbox's, so the test binds a ~/.gemini holding the
// settings in (a host does the same with its own login, or gives
// GEMINI_API_KEY alone against the real API).
func TestGeminiInTheSandbox(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("no bwrap")
	}
	ws := t.TempDir()
	require.NoError(t, exec.Command("git", "-C", ws, "init", "-q").Run())
	srv := modeltest.Start(t, modeltest.Script{Turns: []modeltest.Turn{
		modeltest.Do(modeltest.Shell("echo made > made.txt")), modeltest.Say("Sandboxed.")}})
	bin := realagent.Require(t, realagent.Gemini)
	home := t.TempDir()
	env, err := realagent.GeminiEnv(srv.URL(), home, nil)
	require.NoError(t, err)
	var keep []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "HOME=") {
			keep = append(keep, kv)
		}
	}
	root, err := realagent.ModuleRoot()
	require.NoError(t, err)
	d := agentcmd.New(agentcmd.Config{Format: agentcmd.FormatGemini, Argv: append([]string{bin}, agentcmd.GeminiArgs()[1:]...), Env: keep,
		Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxRequired, Binds: []agentcmd.Bind{
			{Source: filepath.Join(home, ".gemini"), Target: "~/.gemini", Writable: true},
			{Source: filepath.Join(root, ".ci", "agents")}}}})
	start := time.Now()
	res, err := d.Execute(context.Background(), phases.AgentRequest{WorkspacePath: ws, TaskPrompt: "make it"}, nil)
	require.NoError(t, err)
	t.Logf("sandboxed gemini: %v", time.Since(start))
	require.True(t, res.Success, "%s\n%s\n%s", res.Error, res.Output, res.Stderr)
	assert.Equal(t, "Sandboxed.", res.Result)
	made, err := os.ReadFile(filepath.Join(ws, "made.txt"))
	require.NoError(t, err)
	assert.Equal(t, "made\n", string(made))
}
