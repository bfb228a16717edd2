package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/internal/testrepo"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/sqlitestore"
	"github.com/agentforeman/foreman/pipeline/store"
)

var testIdentity = gitexec.Identity{Name: "Test", Email: "test@example.com"}

func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := (&gitexec.Runner{Author: testIdentity, Committer: testIdentity}).Run(context.Background(), dir, args...)
	require.NoError(t, err, "git %v", args)
	return strings.TrimSpace(out)
}

// TestMain keeps the machine's git configuration out of every git the tests
// start (internal/testrepo; its repositories turn auto maintenance off).
func TestMain(m *testing.M) {
	if err := testrepo.IsolateGit(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// newRepo makes a repository on main with README.md committed (written
// without git: internal/testrepo).
func newRepo(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	_, err := testrepo.New(dir, "main", testrepo.Commit{Files: map[string]string{"README.md": "hello\n"}, Author: testIdentity})
	require.NoError(t, err)
	return dir
}

// trailerCommits counts the commits on main that carry item's trailer.
func trailerCommits(t testing.TB, repo string, id foreman.ItemID) int {
	out := git(t, repo, "log", "main", "--format=%H", "--grep=^Foreman-Item: "+string(id)+"$")
	if out == "" {
		return 0
	}
	return len(strings.Split(out, "\n"))
}

// workers are fake agents: a spawn does the stage's work at once (the board
// update a real Stage 0/1/2 worker makes, a commit at Stage 2) and the test
// then delivers the worker's report. They outlive a coordinator restart, as
// real workers would, and treat a repeated spawn of an assignment as one.
type workers struct {
	t       testing.TB
	mgr     *merge.Manager
	board   *FileBoard
	mu      sync.Mutex
	spawned map[foreman.AssignmentID]SpawnRequest
	order   []foreman.AssignmentID
	sent    []Outgoing
	// conflict makes Stage 2 edit README.md and another change to it land
	// on main when Stage 3 starts, so that the squash merge conflicts.
	conflict bool
	repo     string
}

func newWorkers(t testing.TB, mgr *merge.Manager, board *FileBoard) *workers {
	return &workers{t: t, mgr: mgr, board: board, spawned: map[foreman.AssignmentID]SpawnRequest{}}
}

func (w *workers) Spawn(ctx context.Context, r SpawnRequest) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.spawned[r.Assignment]; ok {
		return nil
	}
	switch r.Stage {
	case 0:
		if err := w.board.Put(ctx, r.Item, BoardEntry{Title: r.Title, Status: "Backlog", Tasks: []string{"T1", "T2", "T3"}}); err != nil {
			return err
		}
	case 1:
		if err := w.board.SetStatus(ctx, r.Item, BoardTodo); err != nil {
			return err
		}
	case 2:
		dir, err := w.mgr.Path(r.Item)
		if err != nil {
			return err
		}
		name := "feature-" + string(r.Assignment) + ".txt"
		if w.conflict {
			name = "README.md"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(r.Worker+"\n"), 0o644); err != nil {
			return err
		}
		git(w.t, dir, "add", "-A")
		git(w.t, dir, "commit", "-q", "-m", "work of "+string(r.Worker))
		if err := w.board.SetStatus(ctx, r.Item, BoardToReview); err != nil {
			return err
		}
	case 3:
		if w.conflict {
			if err := os.WriteFile(filepath.Join(w.repo, "README.md"), []byte("main moved on\n"), 0o644); err != nil {
				return err
			}
			git(w.t, w.repo, "commit", "-qam", "another item landed")
		}
	}
	w.spawned[r.Assignment] = r
	w.order = append(w.order, r.Assignment)
	return nil
}

func (w *workers) Send(_ context.Context, m Outgoing) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sent = append(w.sent, m)
	return nil
}

func (w *workers) isSpawned(a foreman.AssignmentID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.spawned[a]
	return ok
}

// errCrash stands for the coordinator process dying.
var errCrash = errors.New("injected crash")

// crasher makes the n-th effect (1-based) fail, either before it acts or
// after it acted (the process died before it could record the effect done).
type crasher struct {
	mu    sync.Mutex
	n     int
	at    int
	after bool
}

func (c *crasher) do(act func() error) error {
	c.mu.Lock()
	c.n++
	hit := c.n == c.at
	c.mu.Unlock()
	if hit && !c.after {
		return errCrash
	}
	if err := act(); err != nil {
		return err
	}
	if hit {
		return errCrash
	}
	return nil
}

func (c *crasher) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// crashing wraps every service so that each effect passes through c.
type crashing struct {
	c     *crasher
	w     *workers
	git   Git
	board *FileBoard
	rep   *FileReporter
	esc   *escalations
}

func (x crashing) Spawn(ctx context.Context, r SpawnRequest) error {
	return x.c.do(func() error { return x.w.Spawn(ctx, r) })
}
func (x crashing) Send(ctx context.Context, m Outgoing) error {
	return x.c.do(func() error { return x.w.Send(ctx, m) })
}
func (x crashing) CreateWorktree(ctx context.Context, id foreman.ItemID) error {
	return x.c.do(func() error { return x.git.CreateWorktree(ctx, id) })
}
func (x crashing) RemoveWorktree(ctx context.Context, id foreman.ItemID) error {
	return x.c.do(func() error { return x.git.RemoveWorktree(ctx, id) })
}
func (x crashing) Merge(ctx context.Context, r MergeRequest) (out MergeOutcome, err error) {
	err = x.c.do(func() error { out, err = x.git.Merge(ctx, r); return err })
	return out, err
}
func (x crashing) Story(ctx context.Context, id foreman.ItemID) (BoardStory, error) {
	return x.board.Story(ctx, id) // a read, not an effect
}
func (x crashing) SetStatus(ctx context.Context, id foreman.ItemID, s string) error {
	return x.c.do(func() error { return x.board.SetStatus(ctx, id, s) })
}
func (x crashing) AppendReport(ctx context.Context, e ReportEntry) error {
	return x.c.do(func() error { return x.rep.AppendReport(ctx, e) })
}
func (x crashing) Escalate(ctx context.Context, e Escalation) error {
	return x.c.do(func() error { return x.esc.Escalate(ctx, e) })
}

// escalations keeps what reached a person, once per key (a re-issued
// escalation after a restart carries the same key).
type escalations struct {
	mu    sync.Mutex
	byKey map[string]Escalation
	calls int
}

func (e *escalations) Escalate(_ context.Context, x Escalation) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byKey == nil {
		e.byKey = map[string]Escalation{}
	}
	e.byKey[x.Key] = x
	e.calls++
	return nil
}

func (e *escalations) unique() []Escalation {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Escalation
	for _, x := range e.byKey {
		out = append(out, x)
	}
	return out
}

// rig is a coordinator's world: a real repository and merge.Manager, a file
// board, a file report, an in-memory store and fake workers.
type rig struct {
	repo  string
	mgr   *merge.Manager
	board *FileBoard
	rep   *FileReporter
	store store.Store
	w     *workers
	esc   *escalations
	clk   *foreman.FakeClock
	// dbPath, when set, keeps the store in a pipeline/sqlitestore file that
	// every restart (runtime) closes and opens again.
	dbPath string
	db     *sqlitestore.Store
}

// durable moves the rig's store to a SQLite file, reopened on every
// restart.
func (r *rig) durable(t testing.TB) {
	t.Helper()
	r.dbPath = filepath.Join(t.TempDir(), "state.db")
	t.Cleanup(func() {
		if r.db != nil {
			assert.NoError(t, r.db.Close())
		}
	})
}

func newRig(t testing.TB) *rig {
	t.Helper()
	repo := newRepo(t)
	mgr, err := merge.New(context.Background(), merge.Config{Repo: repo, Author: merge.Identity(testIdentity)})
	require.NoError(t, err)
	aside := t.TempDir()
	board := NewFileBoard(filepath.Join(aside, "kanban.json"))
	r := &rig{repo: repo, mgr: mgr, board: board, store: store.NewMemory(store.MemoryOptions{}),
		rep: &FileReporter{Root: aside, Diff: mgr}, esc: &escalations{}, clk: foreman.NewFakeClock(t0)}
	r.w = newWorkers(t, mgr, board)
	r.w.repo = repo
	return r
}

// runtime returns a fresh coordinator on the rig (a restart, when called
// again), with every effect passing through c.
func (r *rig) runtime(t testing.TB, c *crasher) *Runtime {
	t.Helper()
	if r.dbPath != "" {
		if r.db != nil {
			require.NoError(t, r.db.Close())
		}
		db, err := sqlitestore.Open(context.Background(), r.dbPath, sqlitestore.Options{})
		require.NoError(t, err)
		r.db, r.store = db, db
	}
	x := crashing{c: c, w: r.w, git: Git{Manager: r.mgr}, board: r.board, rep: r.rep, esc: r.esc}
	rt, err := NewRuntime(RuntimeConfig{Store: r.store, Spawner: x, Messenger: x, Worktrees: x, Merger: x,
		Board: x, Escalator: x, Reporter: x, Clock: r.clk})
	require.NoError(t, err)
	return rt
}

// reportLine is what the worker of the current assignment says, given the
// outcome wanted at its stage.
func reportLine(id foreman.ItemID, stage int, o Outcome) string {
	switch stage {
	case 0:
		return fmt.Sprintf("Stage 0 COMPLETE for %s. 3 tasks created. Plan score: 4/4.", id)
	case 1:
		return fmt.Sprintf("Stage 1 COMPLETE for %s. Verdict: GO. Readiness: 8.", id)
	case 2:
		return fmt.Sprintf("Stage 2 COMPLETE for %s. All tasks Done. Story set to To Review.", id)
	}
	if o == Fail {
		return fmt.Sprintf("Stage 3 COMPLETE for %s. Verdict: FAIL. Quality Score: 40/100. Issues: no tests", id)
	}
	return fmt.Sprintf("Stage 3 COMPLETE for %s. Verdict: PASS. Quality Score: 92/100.", id)
}

// story drives one story to its end: the workers report in turn (the first
// quality gate fails once when rework is set); after an injected crash the
// coordinator is restarted from the store and recovers. It returns the last
// runtime and how many restarts it took.
func (r *rig) story(t testing.TB, id foreman.ItemID, c *crasher, rework bool) (*Runtime, int) {
	t.Helper()
	ctx := context.Background()
	rt := r.runtime(t, c)
	restarts := 0
	_, err := rt.Start(ctx, id, "Login form")
	reported := map[foreman.AssignmentID]bool{}
	failed := false
	for range 100 {
		if err != nil {
			require.ErrorIs(t, err, errCrash)
			restarts++
			rt = r.runtime(t, c)
			err = rt.Recover(ctx)
			continue
		}
		st, gerr := rt.Get(ctx, id)
		require.NoError(t, gerr)
		if st.Status != StatusActive {
			return rt, restarts
		}
		require.True(t, r.w.isSpawned(st.Assignment), "the current assignment was spawned")
		require.False(t, reported[st.Assignment], "a worker reports once")
		reported[st.Assignment] = true
		o := Pass
		if st.Stage == 3 && rework && !failed {
			o, failed = Fail, true
		}
		env, perr := message.Open(st.Worker, st.Assignment, reportLine(id, st.Stage, o), r.clk.Now())
		require.NoError(t, perr)
		r.clk.Advance(1)
		_, err = rt.Deliver(ctx, id, env)
	}
	t.Fatal("story did not end")
	return nil, 0
}
