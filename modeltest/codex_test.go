package modeltest_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/realagent"
	"github.com/agentforeman/foreman/modeltest"
)

func execJSON(prompt string, more ...string) []string {
	return append(append([]string{"exec", "--json", "--skip-git-repo-check"}, more...), prompt)
}

func TestCodexRunsAScriptedConversation(t *testing.T) {
	dir := t.TempDir()
	u := func(in, out, cached int64) *modeltest.Usage {
		return &modeltest.Usage{InputTokens: in, OutputTokens: out, CacheReadInputTokens: cached}
	}
	srv := modeltest.Start(t, modeltest.Script{Match: "modeltest-codex", Turns: []modeltest.Turn{
		{Calls: []modeltest.Call{modeltest.Shell("echo made > made.txt")}, Usage: u(4000, 30, 0)},
		{When: "exit_code: 0", Calls: []modeltest.Call{modeltest.WriteFile(filepath.Join(dir, "written.txt"), "written\n")}, Usage: u(4100, 40, 3900)},
		{When: "exit_code: 0", Text: "All done.", Usage: u(4200, 9, 4000)},
	}})
	r := codex(t, srv, dir, execJSON("modeltest-codex: make two files", "--sandbox", "workspace-write")...)
	t.Logf("codex: wall %v, first request after %v", r.wall, r.firstRequest)
	require.NoError(t, r.err, "stderr: %s\nstdout: %s", r.stderr, r.stdout)

	made, err := os.ReadFile(filepath.Join(dir, "made.txt"))
	require.NoError(t, err)
	assert.Equal(t, "made\n", string(made))
	written, err := os.ReadFile(filepath.Join(dir, "written.txt"))
	require.NoError(t, err)
	assert.Equal(t, "written\n", string(written))

	started := r.find("thread.started")
	require.Len(t, started, 1)
	thread := started[0]["thread_id"].(string)
	var commands int
	var last string
	for _, l := range r.find("item.completed") {
		item := l["item"].(map[string]any)
		switch item["type"] {
		case "command_execution":
			commands++
			assert.Equal(t, 0.0, item["exit_code"])
		case "agent_message":
			last = item["text"].(string)
		}
	}
	assert.Equal(t, 2, commands, "each command shows as an item")
	assert.Equal(t, "All done.", last)
	done := r.find("turn.completed")
	require.Len(t, done, 1)
	usage := done[0]["usage"].(map[string]any)
	served := srv.Usage(thread)
	require.Equal(t, modeltest.Usage{InputTokens: 12300, OutputTokens: 79, CacheReadInputTokens: 7900}, served)
	assert.Equal(t, float64(served.InputTokens), usage["input_tokens"])
	assert.Equal(t, float64(served.CacheReadInputTokens), usage["cached_input_tokens"])
	assert.Equal(t, float64(served.OutputTokens), usage["output_tokens"])
	assert.Empty(t, srv.Unmatched())
	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	for i, q := range reqs {
		assert.Equal(t, thread, q.Session)
		assert.Equal(t, i, q.Turn)
	}
	assert.Contains(t, reqs[0].Tools, "exec", "Codex 0.169's default model gets its tools through exec")
}

func TestCodexReadOnlySandboxByDefault(t *testing.T) {
	dir := t.TempDir()
	srv := modeltest.Start(t, modeltest.Script{Turns: []modeltest.Turn{
		modeltest.Do(modeltest.Shell("echo x > refused.txt")),
		{When: "Read-only file system", Text: "refused"},
	}})
	r := codex(t, srv, dir, execJSON("write it")...)
	require.NoError(t, r.err, "%s", r.stderr)
	assert.NoFileExists(t, filepath.Join(dir, "refused.txt"))
	assert.Empty(t, srv.Unmatched(), "the command's output says Read-only file system")
}

func TestCodexRetriesARateLimit(t *testing.T) {
	srv := modeltest.Start(t, modeltest.Script{Turns: []modeltest.Turn{modeltest.RateLimited(0), modeltest.Say("after the limit")}})
	r := codex(t, srv, t.TempDir(), execJSON("hello")...)
	t.Logf("codex 429 then 200: wall %v", r.wall)
	require.NoError(t, r.err, "%s", r.stderr)
	errs := r.find("error")
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0]["message"], "Reconnecting... 1/5")
	assert.Contains(t, errs[0]["message"], "429 Too Many Requests")
	require.Len(t, r.find("turn.completed"), 1)
}

// TestCodexProviderFailures records what Codex prints when the API keeps
// failing: "Reconnecting... N/M" error lines, then an error and turn.failed,
// exit status 1. Its provider's stream_max_retries (and, for a 5xx,
// request_max_retries) cap the retries.
func TestCodexProviderFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		turn modeltest.Turn
		text string
	}{
		{"401", modeltest.Unauthorized(), "401 Unauthorized"},
		{"429", modeltest.RateLimited(0), "429 Too Many Requests"},
		{"529", modeltest.Overloaded(), "529"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := modeltest.Start(t, modeltest.Script{Turns: modeltest.Times(5, tc.turn)})
			r := codex(t, srv, t.TempDir(), execJSON("hello", "-c", "model_providers.modeltest.stream_max_retries=1",
				"-c", "model_providers.modeltest.request_max_retries=0")...)
			t.Logf("codex %s: wall %v\n%s", tc.name, r.wall, r.stdout)
			require.Error(t, r.err)
			assert.Len(t, srv.Requests(), 2, "one try, one retry")
			failed := r.find("turn.failed")
			require.Len(t, failed, 1)
			assert.Contains(t, failed[0]["error"].(map[string]any)["message"], tc.text)
			errs := r.find("error")
			require.Len(t, errs, 2)
			assert.Contains(t, errs[0]["message"], "Reconnecting... 1/1")
		})
	}
}

func TestCodexResumesItsThread(t *testing.T) {
	dir := t.TempDir()
	srv := modeltest.Start(t, modeltest.Script{Match: "first", Turns: []modeltest.Turn{
		modeltest.Say("one"),
		{When: "second", Text: "two"},
	}})
	bin := realagent.Require(t, realagent.Codex)
	env, err := realagent.CodexEnv(srv.URL(), realagent.CodexHome(t)) // one CODEX_HOME for both runs
	require.NoError(t, err)
	first := runCLI(t, srv, dir, env, append([]string{bin}, execJSON("first prompt")...)...)
	require.NoError(t, first.err)
	thread := first.find("thread.started")[0]["thread_id"].(string)
	second := runCLI(t, srv, dir, env, bin, "exec", "resume", "--json", "--skip-git-repo-check", thread, "second prompt")
	require.NoError(t, second.err, "%s", second.stderr)
	assert.Equal(t, thread, second.find("thread.started")[0]["thread_id"])
	var last string
	for _, l := range second.find("item.completed") {
		if item := l["item"].(map[string]any); item["type"] == "agent_message" {
			last = item["text"].(string)
		}
	}
	assert.Equal(t, "two", last)
	// turn.completed's usage after a resume is the thread's, not this run's.
	usage := second.find("turn.completed")[0]["usage"].(map[string]any)
	assert.Equal(t, float64(srv.Usage(thread).InputTokens), usage["input_tokens"])
	assert.Equal(t, 200.0, usage["input_tokens"])
}
