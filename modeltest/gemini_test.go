package modeltest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/realagent"
	"github.com/agentforeman/foreman/modeltest"
)

// gemini runs Gemini CLI in dir against srv, with a fresh HOME whose
// settings.json has the extra settings.
func gemini(t *testing.T, srv *modeltest.Server, dir string, extra map[string]any, args ...string) cliRun {
	bin := realagent.Require(t, realagent.Gemini)
	env, err := realagent.GeminiEnv(srv.URL(), t.TempDir(), extra)
	require.NoError(t, err)
	return runCLI(t, srv, dir, env, append([]string{bin}, args...)...)
}

func geminiJSON(prompt string, more ...string) []string {
	return append([]string{"-p", prompt, "--output-format", "stream-json"}, more...)
}

// geminiStats is the result line's stats.
func geminiStats(t *testing.T, r cliRun) map[string]any {
	t.Helper()
	results := r.find("result")
	require.Len(t, results, 1, "%s", r.stdout)
	return results[0]["stats"].(map[string]any)
}

func TestGeminiRunsAScriptedConversation(t *testing.T) {
	dir := t.TempDir()
	u := func(in, out, cached int64) *modeltest.Usage {
		return &modeltest.Usage{InputTokens: in, OutputTokens: out, CacheReadInputTokens: cached}
	}
	srv := modeltest.Start(t, modeltest.Script{Match: "modeltest-gemini", Turns: []modeltest.Turn{
		{Text: "Creating the files.", Calls: []modeltest.Call{modeltest.Shell("echo made > made.txt")}, Usage: u(5000, 30, 0)},
		{When: "Process Group PGID", Calls: []modeltest.Call{modeltest.WriteFile(filepath.Join(dir, "written.txt"), "written\n")}, Usage: u(5100, 40, 4900)},
		{When: "Successfully created", Text: "All done.", Usage: u(5200, 9, 5000)},
	}})
	// The default model, auto, asks a router first: a side request wanting
	// JSON ({"complexity_reasoning", "complexity_score"}), answered from
	// its schema.
	r := gemini(t, srv, dir, nil, geminiJSON("modeltest-gemini: make two files", "--approval-mode", "yolo")...)
	t.Logf("gemini: wall %v, first request after %v", r.wall, r.firstRequest)
	require.NoError(t, r.err, "stderr: %s\nstdout: %s", r.stderr, r.stdout)

	made, err := os.ReadFile(filepath.Join(dir, "made.txt"))
	require.NoError(t, err)
	assert.Equal(t, "made\n", string(made))
	written, err := os.ReadFile(filepath.Join(dir, "written.txt"))
	require.NoError(t, err)
	assert.Equal(t, "written\n", string(written))

	inits := r.find("init")
	require.Len(t, inits, 1)
	assert.NotEmpty(t, inits[0]["session_id"])
	var tools []any
	for _, l := range r.find("tool_use") {
		tools = append(tools, l["tool_name"])
	}
	assert.Equal(t, []any{"run_shell_command", "write_file"}, tools)
	results := r.find("tool_result")
	require.Len(t, results, 2)
	for _, l := range results {
		assert.Equal(t, "success", l["status"])
	}
	var text string
	for _, l := range r.find("message") {
		if l["role"] == "assistant" {
			text += l["content"].(string)
		}
	}
	assert.Equal(t, "Creating the files.All done.", text)
	assert.Empty(t, srv.Unmatched())

	reqs := srv.Requests()
	require.Len(t, reqs, 4)
	assert.True(t, reqs[0].Side, "the router's request")
	assert.Contains(t, reqs[0].Served.Text, "complexity_score")
	for i, q := range reqs[1:] {
		assert.Equal(t, i, q.Turn)
		assert.True(t, q.Stream)
		assert.Equal(t, modeltest.Gemini, q.API)
		assert.Contains(t, q.Tools, "run_shell_command")
	}
	// The result's stats count every request, the router's too.
	served := srv.Usage("")
	require.Equal(t, modeltest.Usage{InputTokens: 15400, OutputTokens: 99, CacheReadInputTokens: 9900}, served)
	stats := geminiStats(t, r)
	assert.Equal(t, float64(served.InputTokens), stats["input_tokens"])
	assert.Equal(t, float64(served.CacheReadInputTokens), stats["cached"])
	assert.Equal(t, float64(served.InputTokens-served.CacheReadInputTokens), stats["input"])
	assert.Equal(t, float64(served.OutputTokens), stats["output_tokens"])
	assert.Equal(t, 2.0, stats["tool_calls"])
}

// TestGeminiDefaultModeOffersNoWriteTools: in a headless run's default
// approval mode Gemini CLI offers neither run_shell_command nor write_file
// (auto_edit adds write_file and replace, yolo the shell); a call of one is
// answered "not found" (error type tool_not_registered) and the run still
// succeeds.
func TestGeminiDefaultModeOffersNoWriteTools(t *testing.T) {
	dir := t.TempDir()
	srv := modeltest.Start(t, modeltest.Script{Turns: []modeltest.Turn{
		modeltest.Do(modeltest.WriteFile(filepath.Join(dir, "refused.txt"), "x\n")),
		{When: "not found", Text: "I could not write the file."},
	}})
	r := gemini(t, srv, dir, nil, geminiJSON("Write a file.", "-m", "gemini-2.5-pro")...)
	require.NoError(t, r.err, "%s", r.stderr)
	assert.NoFileExists(t, filepath.Join(dir, "refused.txt"))
	assert.NotContains(t, srv.Requests()[0].Tools, "write_file")
	assert.NotContains(t, srv.Requests()[0].Tools, "run_shell_command")
	res := r.find("tool_result")
	require.Len(t, res, 1)
	assert.Equal(t, "error", res[0]["status"])
	assert.Equal(t, "tool_not_registered", res[0]["error"].(map[string]any)["type"])
	assert.Equal(t, "success", r.find("result")[0]["status"])
	assert.Empty(t, srv.Unmatched())
}

// TestGeminiProviderFailures: a 401 is not retried (exit status 145: Gemini
// CLI exits with the HTTP status, modulo 256); a 429 whose RetryInfo asks
// for more than 300 s is a terminal quota error, not retried either (exit
// 173). Either ends with a result line of status error.
func TestGeminiProviderFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		turn modeltest.Turn
		exit int
		text string
	}{
		{"401", modeltest.Unauthorized(), 145, `"code":401`},
		{"429", modeltest.RateLimited(time.Hour), 173, "Suggested retry after 3600s."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := modeltest.Start(t, modeltest.Script{Turns: modeltest.Times(3, tc.turn)})
			r := gemini(t, srv, t.TempDir(), nil, geminiJSON("hello", "-m", "gemini-2.5-pro")...)
			t.Logf("gemini %s: wall %v\n%s", tc.name, r.wall, r.stdout)
			var exit interface{ ExitCode() int }
			require.ErrorAs(t, r.err, &exit)
			assert.Equal(t, tc.exit, exit.ExitCode())
			assert.Len(t, srv.Requests(), 1, "not retried")
			res := r.find("result")
			require.Len(t, res, 1)
			assert.Equal(t, "error", res[0]["status"])
			assert.Contains(t, res[0]["error"].(map[string]any)["message"], tc.text)
		})
	}
}

// TestGeminiResumesItsSession: --resume takes the session id of the init
// line; the resumed run keeps it, and its result's stats count only its own
// requests.
func TestGeminiResumesItsSession(t *testing.T) {
	dir := t.TempDir()
	srv := modeltest.Start(t, modeltest.Script{Match: "first", Turns: []modeltest.Turn{
		modeltest.Say("one"),
		{When: "second", Text: "two"},
	}})
	bin := realagent.Require(t, realagent.Gemini)
	env, err := realagent.GeminiEnv(srv.URL(), t.TempDir(), nil) // one HOME for both runs
	require.NoError(t, err)
	first := runCLI(t, srv, dir, env, append([]string{bin}, geminiJSON("first prompt", "-m", "gemini-2.5-pro")...)...)
	require.NoError(t, first.err, "%s", first.stderr)
	session := first.find("init")[0]["session_id"].(string)
	second := runCLI(t, srv, dir, env, append([]string{bin}, geminiJSON("second prompt", "-m", "gemini-2.5-pro", "--resume", session)...)...)
	require.NoError(t, second.err, "%s", second.stderr)
	assert.Equal(t, session, second.find("init")[0]["session_id"])
	assert.Equal(t, "two", second.find("message")[1]["content"])
	assert.Equal(t, 100.0, geminiStats(t, second)["input_tokens"], "the run's own tokens")
	assert.Empty(t, srv.Unmatched())
}

// TestGeminiCallsAnMCPTool: an MCP server in settings.json (httpUrl,
// headers, trust) gives Gemini CLI the tool mcp_<server>_<tool>, offered
// even in the default approval mode when the server is trusted; a Tool call
// named the Claude Code way (mcp__foreman__report) is served by that name.
func TestGeminiCallsAnMCPTool(t *testing.T) {
	ms := mcp.NewServer(&mcp.Implementation{Name: "foreman", Version: "1"}, nil)
	type input struct {
		Outcome string `json:"outcome"`
	}
	mcp.AddTool(ms, &mcp.Tool{Name: "report", Description: "Report the outcome."},
		func(_ context.Context, _ *mcp.CallToolRequest, in input) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "accepted " + in.Outcome}}}, nil, nil
		})
	auth := make(chan string, 16)
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		select {
		case auth <- r.Header.Get("Authorization"):
		default:
		}
		return ms
	}, nil))
	defer hs.Close()

	srv := modeltest.Start(t, modeltest.Script{Turns: []modeltest.Turn{
		modeltest.Do(modeltest.Tool("mcp__foreman__report", map[string]any{"outcome": "done"})),
		{When: "accepted done", Text: "Reported."},
	}})
	r := gemini(t, srv, t.TempDir(), map[string]any{"mcpServers": map[string]any{"foreman": map[string]any{
		"httpUrl": hs.URL, "headers": map[string]any{"Authorization": "Bearer the-token"}, "trust": true}}},
		geminiJSON("Report.", "-m", "gemini-2.5-pro")...)
	require.NoError(t, r.err, "%s", r.stderr)
	assert.Contains(t, srv.Requests()[0].Tools, "mcp_foreman_report")
	uses := r.find("tool_use")
	require.Len(t, uses, 1)
	assert.Equal(t, "mcp_foreman_report", uses[0]["tool_name"])
	assert.Equal(t, "success", r.find("tool_result")[0]["status"])
	assert.Equal(t, "Bearer the-token", <-auth)
	assert.Empty(t, srv.Unmatched())
}
