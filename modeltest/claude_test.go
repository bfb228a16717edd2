package modeltest_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/modeltest"
)

// Claude Code 2.1.328's list prices for its default model, claude-opus-5-5,
// in dollars per token, measured from the total_cost_usd it reports against
// the tokens served.
const (
	opusInput      = 4e-6
	opusOutput     = 20e-6
	opusCacheWrite = 5e-6
	opusCacheRead  = 0.2e-6
)

func streamJSON(prompt string, more ...string) []string {
	return append([]string{"-p", prompt, "--output-format", "stream-json", "--verbose"}, more...)
}

func TestClaudeRunsAScriptedConversation(t *testing.T) {
	dir := t.TempDir()
	u := func(in, out, cw, cr int64) *modeltest.Usage {
		return &modeltest.Usage{InputTokens: in, OutputTokens: out, CacheCreationInputTokens: cw, CacheReadInputTokens: cr}
	}
	srv := modeltest.Start(t, modeltest.Script{Match: "modeltest-claude", Turns: []modeltest.Turn{
		{Text: "Creating the file.", Calls: []modeltest.Call{modeltest.Shell("echo made > made.txt")}, Usage: u(1200, 40, 3000, 0)},
		{When: "Bash completed", Calls: []modeltest.Call{modeltest.WriteFile(filepath.Join(dir, "written.txt"), "written\n")}, Usage: u(30, 60, 200, 3000)},
		{When: "File created", Text: "All done.", Usage: u(10, 7, 0, 3200)},
	}})
	r := claude(t, srv, dir, nil, streamJSON("modeltest-claude: make two files", "--allowedTools", "Bash,Write")...)
	t.Logf("claude: wall %v, first request after %v", r.wall, r.firstRequest)
	require.NoError(t, r.err, "stderr: %s\nstdout: %s", r.stderr, r.stdout)

	made, err := os.ReadFile(filepath.Join(dir, "made.txt"))
	require.NoError(t, err)
	assert.Equal(t, "made\n", string(made))
	written, err := os.ReadFile(filepath.Join(dir, "written.txt"))
	require.NoError(t, err)
	assert.Equal(t, "written\n", string(written))

	inits, results := r.find("system"), r.find("result")
	require.NotEmpty(t, inits)
	require.Len(t, results, 1)
	res := results[0]
	session := inits[0]["session_id"].(string)
	assert.Equal(t, session, res["session_id"])
	assert.Equal(t, "success", res["subtype"])
	assert.Equal(t, false, res["is_error"])
	assert.Equal(t, "All done.", res["result"])
	assert.Equal(t, 3.0, res["num_turns"])
	assert.Empty(t, res["permission_denials"])
	assert.Empty(t, srv.Unmatched())

	served := srv.Usage(session)
	require.Equal(t, modeltest.Usage{InputTokens: 1240, OutputTokens: 107, CacheCreationInputTokens: 3200, CacheReadInputTokens: 6200}, served)
	usage := res["usage"].(map[string]any)
	assert.Equal(t, float64(served.InputTokens), usage["input_tokens"])
	assert.Equal(t, float64(served.OutputTokens), usage["output_tokens"])
	assert.Equal(t, float64(served.CacheCreationInputTokens), usage["cache_creation_input_tokens"])
	assert.Equal(t, float64(served.CacheReadInputTokens), usage["cache_read_input_tokens"])
	cost := float64(served.InputTokens)*opusInput + float64(served.OutputTokens)*opusOutput +
		float64(served.CacheCreationInputTokens)*opusCacheWrite + float64(served.CacheReadInputTokens)*opusCacheRead
	assert.InDelta(t, cost, res["total_cost_usd"], 1e-12, "cost of the served tokens at %s's prices", inits[0]["model"])

	// Every request of the run belongs to the session and got its turn.
	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	for i, q := range reqs {
		assert.Equal(t, session, q.Session)
		assert.Equal(t, i, q.Turn)
		assert.Contains(t, q.Tools, "Bash")
	}
}

func TestClaudeRetriesARateLimit(t *testing.T) {
	cached := modeltest.Usage{InputTokens: 5, OutputTokens: 1, CacheReadInputTokens: 10000}
	srv := modeltest.Start(t, modeltest.Script{Turns: []modeltest.Turn{modeltest.RateLimited(0), {Text: "after the limit", Usage: &cached}}})
	r := claude(t, srv, t.TempDir(), nil, streamJSON("hello")...)
	t.Logf("claude 429 then 200: wall %v, first request after %v", r.wall, r.firstRequest)
	require.NoError(t, r.err, "stderr: %s", r.stderr)
	retries := r.find("system")[1:] // after init
	require.Len(t, retries, 1)
	assert.Equal(t, "api_retry", retries[0]["subtype"])
	assert.Equal(t, 1.0, retries[0]["attempt"])
	assert.Equal(t, 429.0, retries[0]["error_status"])
	assert.Equal(t, "rate_limit", retries[0]["error"])
	assert.Positive(t, retries[0]["retry_delay_ms"])
	res := r.find("result")[0]
	assert.Equal(t, "after the limit", res["result"])
	assert.Equal(t, 5.0, res["usage"].(map[string]any)["input_tokens"], "the 429 served no tokens")
	assert.InDelta(t, 5*opusInput+1*opusOutput+10000*opusCacheRead, res["total_cost_usd"], 1e-12)
}

// TestClaudeProviderFailures records what Claude Code prints when the API
// keeps failing: it retries 401, 429 and 529 alike (CLAUDE_CODE_MAX_RETRIES
// caps the retries; its delays double from about half a second, whatever
// retry-after says), then ends with an error result.
func TestClaudeProviderFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		turn   modeltest.Turn
		status float64
		errKey string
		text   string
	}{
		{"401", modeltest.Unauthorized(), 401, "authentication_failed", "Invalid API key"},
		{"429", modeltest.RateLimited(0), 429, "rate_limit", "429"},
		{"529", modeltest.Overloaded(), 529, "overloaded", "529"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := modeltest.Start(t, modeltest.Script{Turns: modeltest.Times(5, tc.turn)})
			r := claude(t, srv, t.TempDir(), []string{"CLAUDE_CODE_MAX_RETRIES=1"}, streamJSON("hello")...)
			t.Logf("claude %s: wall %v\n%s", tc.name, r.wall, r.stdout[len(r.stdout)-min(len(r.stdout), 3000):])
			require.Error(t, r.err, "the run fails")
			assert.Len(t, srv.Requests(), 2, "one try, one retry")
			retries := r.find("system")[1:]
			require.Len(t, retries, 1)
			assert.Equal(t, "api_retry", retries[0]["subtype"])
			assert.Equal(t, tc.status, retries[0]["error_status"])
			assert.Equal(t, tc.errKey, retries[0]["error"])
			assert.Equal(t, 1.0, retries[0]["max_retries"])
			res := r.find("result")
			require.Len(t, res, 1)
			assert.Equal(t, true, res[0]["is_error"])
			assert.Equal(t, "api_error", res[0]["terminal_reason"])
			assert.Contains(t, res[0]["result"], tc.text)
			assert.Equal(t, 0.0, res[0]["total_cost_usd"])
		})
	}
}

func TestClaudeDefaultPermissionModeRefusesWrite(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "refused.txt")
	srv := modeltest.Start(t, modeltest.Script{Turns: []modeltest.Turn{
		modeltest.Do(modeltest.WriteFile(target, "x")),
		{When: "haven't granted", Text: "I was refused."},
	}})
	r := claude(t, srv, dir, nil, streamJSON("write it")...)
	require.NoError(t, r.err)
	assert.NoFileExists(t, target)
	res := r.find("result")[0]
	assert.Equal(t, "success", res["subtype"], "a refused tool still ends in success")
	assert.Equal(t, "I was refused.", res["result"])
	denials := res["permission_denials"].([]any)
	require.Len(t, denials, 1)
	assert.Equal(t, "Write", denials[0].(map[string]any)["tool_name"])
}

func TestClaudeLoadsADeferredToolWithToolSearch(t *testing.T) {
	// CronList is one of Claude Code's deferred built-in tools, like MCP tools.
	srv := modeltest.Start(t, modeltest.Script{Turns: []modeltest.Turn{
		modeltest.Do(modeltest.Tool("CronList", map[string]any{})),
		{When: "No scheduled jobs", Text: "listed"},
	}})
	r := claude(t, srv, t.TempDir(), nil, streamJSON("list the jobs")...)
	require.NoError(t, r.err)
	assert.Equal(t, "listed", r.find("result")[0]["result"])
	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	assert.NotContains(t, reqs[0].Tools, "CronList")
	assert.Equal(t, "ToolSearch", reqs[0].Served.Calls[0].Name)
	assert.Contains(t, reqs[1].Tools, "CronList", "loaded by ToolSearch")
	assert.Equal(t, "CronList", reqs[1].Served.Calls[0].Name)
}

func TestClaudeResumesItsSession(t *testing.T) {
	dir := t.TempDir()
	srv := modeltest.Start(t, modeltest.Script{Match: "first", Turns: []modeltest.Turn{
		modeltest.Say("one"),
		{When: "second", Text: "two"},
	}})
	home := t.TempDir()
	env := []string{"HOME=" + home} // the session lives under HOME
	first := claude(t, srv, dir, env, streamJSON("first prompt")...)
	require.NoError(t, first.err)
	session := first.find("result")[0]["session_id"].(string)
	second := claude(t, srv, dir, env, streamJSON("second prompt", "--resume", session)...)
	require.NoError(t, second.err, "%s", second.stderr)
	res := second.find("result")[0]
	assert.Equal(t, session, res["session_id"])
	assert.Equal(t, "two", res["result"])
	// usage is this run's; total_cost_usd and modelUsage are the session's.
	assert.Equal(t, 100.0, res["usage"].(map[string]any)["input_tokens"])
	total := srv.Usage(session)
	assert.InDelta(t, float64(total.InputTokens)*opusInput+float64(total.OutputTokens)*opusOutput, res["total_cost_usd"], 1e-12)
}
