package team_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentmcp"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/team"
)

// An assignment interrupted by the end of its Run runs again in the next,
// also with a new Team on the same state (a restarted host): its result
// directory is made again, with the same name (the prompt that named it
// may be the one the agent resumes with), while what earlier runs left in
// the results directory is cleared when the Run starts.
func TestAnInterruptedAssignmentGetsItsResultDirectoryAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.touch(t, "US-001.hang")
	tm := f.newTeam(t)
	require.NoError(t, tm.Add(context.Background(), team.Story{ID: "US-001", Title: "first"}))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	starts := f.startsOf(ctx, t, "US-001")
	var first string
	go func() {
		defer cancel()
		first = <-starts // "" if ctx ended first
	}()
	_, err := tm.Run(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.NotEmpty(t, first, "the planner started")
	dir := filepath.Dir(first)
	results := filepath.Join(f.repo, team.StateDirName, "results")
	assert.Equal(t, results, filepath.Dir(dir))
	assert.Regexp(t, `^US-001-a1-[0-9a-f]{32}$`, filepath.Base(dir))
	_, err = os.Stat(dir)
	assert.ErrorIs(t, err, os.ErrNotExist, "removed when its stage ended")
	require.NoError(t, tm.Close())

	// What a host killed at any point would leave: its directory with a
	// result in it, another assignment's, a file of an older version.
	stale := []string{dir, filepath.Join(results, "US-009-a3-0123456789abcdef0123456789abcdef"), filepath.Join(results, "US-001-a1.json")}
	for _, p := range stale[:2] {
		require.NoError(t, os.MkdirAll(p, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(p, "result.json"), []byte(`{"assignment":"US-001-a1","outcome":"error","summary":"stale"}`), 0o600))
	}
	require.NoError(t, os.WriteFile(stale[2], []byte(`{}`), 0o600))

	f.remove(t, "US-001.hang")
	tm = f.newTeam(t) // a new host on the same state
	res := run(t, tm)
	require.Equal(t, team.StoryMerged, stateOf(res, "US-001").State, res.String())
	log, err := os.ReadFile(filepath.Join(f.ctl, "log"))
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(log), "US-001 stage 0 US-001-a1 "+first+"\n"), "the plan stage ran again, with the same result file:\n%s", log)
	for _, p := range stale {
		_, err := os.Stat(p)
		assert.ErrorIs(t, err, os.ErrNotExist, p)
	}
	left, err := os.ReadDir(results)
	require.NoError(t, err)
	assert.Empty(t, left)
}

// recordingAgent keeps every request it is given, then does benchAgent's
// work.
type recordingAgent struct {
	mu   sync.Mutex
	reqs []phases.AgentRequest
}

func (r *recordingAgent) Execute(ctx context.Context, req phases.AgentRequest, onEvent phases.StreamCallback) (phases.AgentResult, error) {
	// Each result directory exists, 0700, when the agent starts.
	info, err := os.Stat(filepath.Dir(envOf(req.Env, team.EnvResult)))
	if err != nil || info.Mode().Perm() != 0o700 {
		return phases.AgentResult{}, fmt.Errorf("the result directory: %v, %v", info, err)
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return benchAgent{}.Execute(ctx, req, onEvent)
}

// Every execution gets its assignment's own credentials: the result
// file's directory (also in Writable, for a driver that confines its
// agent), the report key, and an MCP token (in the environment and in the
// MCP server's configuration alike), none of them another assignment's.
func TestEachAssignmentGetsCredentialsOfItsOwn(t *testing.T) {
	t.Parallel()
	agent := &recordingAgent{}
	tm, err := team.New(context.Background(), team.Config{
		Repo: benchRepo(t), Workers: 2, Store: store.NewMemory(store.MemoryOptions{}),
		Agent: agent, Gates: gatePlan(), Snapshotter: changedSnapshot{}, Verifier: passingVerifier{},
		Merge: merge.Config{GitEnv: demo.IsolatedGitConfig()},
	})
	require.NoError(t, err)
	defer tm.Close()
	require.NoError(t, tm.Add(context.Background(), team.Story{ID: "S1", Title: "one"}, team.Story{ID: "S2", Title: "two"}))
	res := run(t, tm)
	require.Equal(t, 2, res.Merged, res.String())

	seen := map[string]string{}
	once := func(kind, v, assignment string) {
		t.Helper()
		require.NotEmpty(t, v, kind)
		if other, ok := seen[v]; ok {
			assert.Equal(t, other, assignment, "%s %s given to two assignments", kind, v)
		}
		seen[v] = assignment
	}
	require.Len(t, agent.reqs, 6, "plan, validate and build of two stories")
	for _, req := range agent.reqs {
		a := envOf(req.Env, "FOREMAN_ASSIGNMENT")
		result := envOf(req.Env, team.EnvResult)
		assert.Regexp(t, `/results/`+regexp.QuoteMeta(a)+`-[0-9a-f]{32}/result\.json$`, result)
		assert.Equal(t, []string{filepath.Dir(result)}, req.Writable)
		assert.Contains(t, req.TaskPrompt, result, "the prompt names the same file")
		key := envOf(req.Env, team.EnvReportKey)
		assert.Regexp(t, `^[0-9a-f]{32}$`, key)
		assert.Contains(t, req.TaskPrompt, "Your report key: "+key)
		require.Len(t, req.MCPServers, 1)
		token := envOf(req.Env, agentmcp.EnvToken)
		assert.Equal(t, token, req.MCPServers[0].BearerToken)
		once("result path", result, a)
		once("report key", key, a)
		once("token", token, a)
	}
}
