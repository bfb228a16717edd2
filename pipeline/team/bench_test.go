package team_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/team"
)

// The team's overhead per story, against pipeline.Runtime alone, in one
// run: both move stories through the story flow on the same kind of real
// repository (a worktree per story, one commit, the squash merge) with the
// memory store and agents that do nothing but report (the build commits
// one file). The team adds the task graph, the worker pool, the stage
// runner, the board, the result files and the events; its snapshotter and
// gates are no-ops here, so what differs is orchestration.
//
//	go test -run '^$' -bench 'Story' -benchtime 40x ./pipeline/team/

const benchWorkers = 4

func BenchmarkTeamStory(b *testing.B) {
	repo := benchRepo(b)
	tm, err := team.New(context.Background(), team.Config{
		Repo: repo, Workers: benchWorkers, Store: store.NewMemory(store.MemoryOptions{}),
		Agent: benchAgent{}, Gates: gatePlan(), Snapshotter: changedSnapshot{}, Verifier: passingVerifier{},
		Merge: merge.Config{GitEnv: demo.IsolatedGitConfig()},
	})
	require.NoError(b, err)
	defer tm.Close()
	stories := make([]team.Story, b.N)
	for i := range stories {
		stories[i] = team.Story{ID: foreman.ItemID(fmt.Sprintf("S%d", i)), Title: "bench"}
	}
	require.NoError(b, tm.Add(context.Background(), stories...))
	b.ResetTimer()
	res, err := tm.Run(context.Background())
	b.StopTimer()
	require.NoError(b, err)
	require.Equal(b, b.N, res.Merged, res.String())
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/story")
}

func BenchmarkRuntimeStory(b *testing.B) {
	repo := benchRepo(b)
	mgr, err := merge.New(context.Background(), merge.Config{Repo: repo, GitEnv: demo.IsolatedGitConfig()})
	require.NoError(b, err)
	git := pipeline.Git{Manager: mgr, Request: merge.Request{CommitPending: true}}
	var (
		rt    *pipeline.Runtime
		wg    sync.WaitGroup
		done  = make(chan pipeline.State, b.N)
		sem   = make(chan struct{}, benchWorkers)
		board = &benchBoard{}
	)
	deliver := func(r pipeline.SpawnRequest) {
		defer wg.Done()
		ctx := context.Background()
		line := benchLine(r.Item, r.Stage)
		switch r.Stage {
		case 1:
			_ = board.SetStatus(ctx, r.Item, pipeline.BoardTodo)
		case 2:
			dir, _ := mgr.Path(r.Item)
			benchCommit(b, dir, r.Item)
			_ = board.SetStatus(ctx, r.Item, pipeline.BoardToReview)
		}
		env, err := message.Open(r.Worker, r.Assignment, line, time.Now())
		if err != nil {
			b.Error(err)
			return
		}
		st, err := rt.Deliver(ctx, r.Item, env)
		if err != nil {
			b.Error(err)
			return
		}
		if st.Status == pipeline.StatusDone || st.Status == pipeline.StatusPaused {
			done <- st
		}
	}
	rt, err = pipeline.NewRuntime(pipeline.RuntimeConfig{
		Store: store.NewMemory(store.MemoryOptions{}), Worktrees: git, Merger: git, Board: board,
		Spawner: pipeline.SpawnerFunc(func(_ context.Context, r pipeline.SpawnRequest) error {
			wg.Add(1)
			go deliver(r)
			return nil
		}),
		Messenger: pipeline.MessengerFunc(func(context.Context, pipeline.Outgoing) error { return nil }),
	})
	require.NoError(b, err)
	b.ResetTimer()
	// Like the team, at most benchWorkers stories in flight.
	go func() {
		for i := range b.N {
			sem <- struct{}{}
			if _, err := rt.Start(context.Background(), foreman.ItemID(fmt.Sprintf("S%d", i)), "bench"); err != nil {
				b.Error(err)
			}
		}
	}()
	for range b.N {
		st := <-done
		if st.Status != pipeline.StatusDone {
			b.Fatalf("%s paused: %+v", st.Item, st.Pause)
		}
		<-sem
	}
	b.StopTimer()
	wg.Wait()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/story")
}

func benchRepo(b testing.TB) string {
	repo := filepath.Join(b.TempDir(), "repo")
	require.NoError(b, demo.NewGoModuleRepo(context.Background(), repo))
	return repo
}

func benchLine(item foreman.ItemID, stage int) string {
	switch stage {
	case 0:
		return message.Format(message.Stage0Complete{Item: item, Tasks: 1, PlanScore: 4})
	case 1:
		return message.Format(message.Stage1Complete{Item: item, Verdict: message.VerdictGo, Readiness: 9})
	case 2:
		return message.Format(message.Stage2Complete{Item: item})
	}
	return message.Format(message.Stage3Complete{Item: item, Verdict: message.VerdictPass, Score: 100})
}

func benchCommit(b *testing.B, dir string, item foreman.ItemID) {
	if err := os.WriteFile(filepath.Join(dir, string(item)+".txt"), []byte("x\n"), 0o644); err != nil {
		b.Error(err)
		return
	}
	cmd := exec.Command("sh", "-c", "git add -A && git commit -qm work")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), demo.GitEnv()...), demo.IsolatedGitConfig()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Errorf("commit: %v: %s", err, out)
	}
}

// benchAgent reports through the printed line; the build commits one
// file.
type benchAgent struct{}

func (benchAgent) Execute(_ context.Context, req phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
	a, ok := pipeline.ParseAssignment(req.TaskPrompt)
	if !ok {
		return phases.AgentResult{}, fmt.Errorf("no assignment")
	}
	if a.Stage == 2 {
		dir := req.WorkspacePath
		if err := os.WriteFile(filepath.Join(dir, string(a.Item)+".txt"), []byte("x\n"), 0o644); err != nil {
			return phases.AgentResult{}, err
		}
		cmd := exec.Command("sh", "-c", "git add -A && git commit -qm work")
		cmd.Dir = dir
		cmd.Env = append(append(os.Environ(), demo.GitEnv()...), demo.IsolatedGitConfig()...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return phases.AgentResult{}, fmt.Errorf("commit: %v: %s", err, out)
		}
	}
	// The printed line with its assignment's proof (team.EnvReportKey).
	line := fmt.Sprintf("%s [assignment %s key %s]", benchLine(a.Item, a.Stage), a.Assignment, envOf(req.Env, team.EnvReportKey))
	return phases.AgentResult{Success: true, Result: line}, nil
}

// envOf returns the last value of key in env.
func envOf(env []string, key string) string {
	var v string
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

type changedSnapshot struct{}

func (changedSnapshot) Before(context.Context, string) (phases.BeforeState, error) {
	return phases.BeforeState{BaseCommit: "0000000000000000000000000000000000000000"}, nil
}

func (changedSnapshot) Capture(_ context.Context, dir string, _ phases.BeforeState, _ phases.SnapshotMeta) (phases.Snapshot, error) {
	return phases.Snapshot{WorkspacePath: dir, Files: []phases.FileDiff{{Path: "x"}}, DiffHash: "x"}, nil
}

type passingVerifier struct{}

func (passingVerifier) Verify(context.Context, phases.Snapshot, phases.GatePlan, phases.VerifyOptions) (phases.VerificationReport, error) {
	return phases.VerificationReport{Passed: true}, nil
}

// benchBoard is the baseline agents' board: each sets its story's status
// as the story flow's check for its stage wants.
type benchBoard struct {
	mu     sync.Mutex
	status map[foreman.ItemID]string
}

func (bb *benchBoard) Story(_ context.Context, item foreman.ItemID) (pipeline.BoardStory, error) {
	bb.mu.Lock()
	defer bb.mu.Unlock()
	return pipeline.BoardStory{Found: true, Tasks: 1, Status: bb.status[item]}, nil
}

func (bb *benchBoard) SetStatus(_ context.Context, item foreman.ItemID, status string) error {
	bb.mu.Lock()
	defer bb.mu.Unlock()
	if bb.status == nil {
		bb.status = map[foreman.ItemID]string{}
	}
	bb.status[item] = status
	return nil
}
