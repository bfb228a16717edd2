package team

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/phases/agentmcp"
	"github.com/agentforeman/foreman/phases/gates"
	"github.com/agentforeman/foreman/phases/gitsnap"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/sqlitestore"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
	"github.com/agentforeman/foreman/pipeline/team/internal/teamcore"
)

// ErrRunning is returned by Run while another Run of the same Team is in
// progress.
var ErrRunning = errors.New("team: already running")

// ErrClosed is returned by calls after Close.
var ErrClosed = errors.New("team: closed")

// graphMode is the task graph session's mode: the team gives its tasks.
const graphMode taskgraph.Mode = "team"

// Team is a team of agents working through a plan of stories on one
// repository. Create it with New, add stories with Add, and call Run until
// every story is merged or waits for a person; Status, Events, Subscribe
// and Resolve are for the people watching. All methods are safe for
// concurrent use.
type Team struct {
	cfg      Config
	db       store.Store
	ownsDB   bool
	mgr      *merge.Manager
	pipe     *pipeline.Runtime
	graph    *taskgraph.Runtime
	snap     phases.Snapshotter
	verifier phases.Verifier
	feedback phases.FeedbackGenerator
	clk      foreman.Clock
	log      *slog.Logger
	events   *eventLog
	spawns   spawnProxy
	// reports is the MCP server agents report to (nil when Config.MCP.Off);
	// each Run serves it.
	reports *agentmcp.Server
	// retries are the running stories' agents waiting for their model API.
	retries providerRetries
	// secret derives each assignment's result directory and report key
	// (credentials.go); refusedEvents counts each assignment's
	// EventRefused events (refused.go).
	secret        []byte
	refusedMu     sync.Mutex
	refusedEvents map[foreman.AssignmentID]int
	// view is every story's status, kept as its records are written.
	view *statusView

	mu      sync.Mutex
	stories map[foreman.ItemID]Story
	order   []foreman.ItemID
	run     *runState
	closed  bool
}

// New checks cfg, opens the team's state (creating it in a new repository,
// continuing it in one that has it) and returns the Team. It runs nothing:
// call Run. A missing agent program is an error matching
// ErrAgentUnavailable; a bad Config one matching ErrInvalidConfig; a
// Store holding another repository's plan one matching ErrOtherRepository
// (a store remembers the first commit of the repository it was first
// used with).
func New(ctx context.Context, cfg Config) (*Team, error) {
	cfg, log, err := prepareConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Reviewer != nil {
		// The reviewer works in the same worktree as the builder, after it:
		// a lease of its own (a directory of its own) keeps the two drivers
		// from taking each other for an orphan.
		if cfg.Reviewer, err = prepareAgent(cfg.Reviewer, filepath.Join(cfg.StateDir, "review"), agentHidden(cfg), "the reviewer", log); err != nil {
			return nil, err
		}
	}
	t := &Team{cfg: cfg, clk: clock.OrReal(cfg.Clock), log: log, stories: map[foreman.ItemID]Story{}}
	t.reports = t.newReportServer()
	if err := t.open(ctx); err != nil {
		t.closeStore()
		return nil, err
	}
	return t, nil
}

// prepareConfig checks cfg and fills its defaults, resolves the repository
// to its main worktree, and prepares every stage's own agent (prepareAgent):
// what New and NewStageAgent share.
func prepareConfig(ctx context.Context, cfg Config) (Config, *slog.Logger, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return cfg, nil, err
	}
	if err := resolveRepo(ctx, &cfg); err != nil {
		return cfg, nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for i := range cfg.Stages {
		st := &cfg.Stages[i]
		if st.Agent == nil || cfg.Remote != nil { // a remote stage's agent runs on its host
			continue
		}
		if st.Agent, err = prepareAgent(st.Agent, cfg.StateDir, agentHidden(cfg), "the "+st.Role+" stage's agent", log); err != nil {
			return cfg, nil, err
		}
	}
	return cfg, log, nil
}

// hiddenDir is a directory an agent's sandbox hides, and what the notes
// about an agent's writes there call it.
// hiddenDir is a directory an agent's sandbox hides, the name its notes
// give it, and whether its decoy repeats its entries' names (mirror: the
// worktree root's, the other stories' worktrees, so that an agent reaching
// for one by its name is seen).
type hiddenDir struct {
	dir, name string
	mirror    bool
}

// agentHidden are the directories an agent's sandbox hides (its own
// worktree, git directory and result directory are bound back in): the
// team's state directory, the story worktrees' root (other stories' work)
// and the repository's main checkout, whose ignored files (a .env, local
// settings) are the host's and in no story's worktree. An agentcmd driver
// binds a decoy over each (an empty directory of the execution, writable):
// what an agent writes there changes nothing real and is reported after
// it, a phases.StreamSandbox note the team counts as a refusal.
func agentHidden(cfg Config) []hiddenDir {
	root := cfg.Merge.Root
	if root == "" {
		root = ".worktrees"
	}
	if !filepath.IsAbs(root) {
		root = filepath.Join(cfg.Repo, root)
	}
	hide := []hiddenDir{{cfg.StateDir, "state directory", false}, {root, "worktree root", true}, {cfg.Repo, "main checkout", false}}
	for i, h := range hide {
		// The sandbox takes absolute paths only (a relative StateDir is
		// the host's working directory's).
		if abs, err := filepath.Abs(h.dir); err == nil {
			hide[i].dir = abs
		}
	}
	return hide
}

// prepareAgent turns the orphan reaper on for an *agentcmd.Driver (leases
// under leaseRoot/leases, and the git locks a reaped agent left cleared),
// hides the directories hide names from its sandbox (agentHidden; each
// execution's result directory is bound back in, AgentRequest.Writable)
// and checks that the agent can start.
func prepareAgent(a phases.AgentDriver, leaseRoot string, hide []hiddenDir, who string, log *slog.Logger) (phases.AgentDriver, error) {
	if d, ok := a.(*agentcmd.Driver); ok {
		if d.LeaseDir() == "" {
			d = d.WithLeaseDir(filepath.Join(leaseRoot, "leases"))
		}
		for _, h := range hide {
			d = d.WithHideNamed(h.dir, h.name)
			if h.mirror {
				d = d.WithMirror(h.dir)
			}
		}
		a = d.WithOnReap(func(r agentcmd.Reaped) { clearReapedLocks(log, r) })
	}
	if c, ok := a.(interface{ Check() error }); ok {
		if err := c.Check(); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrAgentUnavailable, who, err)
		}
	}
	return a, nil
}

// open makes the state directory, the store, the repository's manager,
// the services and the two runtimes, and loads the plan.
func (t *Team) open(ctx context.Context) error {
	cfg := t.cfg
	// The repository first: it refuses an unsafe state directory before
	// anything is written there.
	mc := cfg.Merge
	if mc.Clock == nil {
		mc.Clock = cfg.Clock
	}
	if mc.Logger == nil {
		mc.Logger = t.log
	}
	if ds := t.agentDrivers(); mc.CheckSandbox == nil && len(ds) > 0 {
		// MergeCheck runs the squash's code: in the agents' sandbox, what
		// it refused counted as the story's refusals.
		mc.CheckSandbox = mergeCheckSandbox{driver: ds[0], t: t}
	}
	mgr, mc, err := openRepository(ctx, cfg, mc)
	if err != nil {
		return err
	}
	t.mgr = mgr
	for _, d := range []string{cfg.StateDir, filepath.Join(cfg.StateDir, "leases")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := makeResultsDir(cfg.StateDir); err != nil {
		return err
	}
	if err := t.mgr.Exclude(cfg.StateDir); err != nil {
		return err
	}
	t.db, t.ownsDB = cfg.Store, false
	if t.db == nil {
		db, err := sqlitestore.Open(ctx, filepath.Join(cfg.StateDir, "foreman.db"), sqlitestore.Options{Clock: cfg.Clock})
		if err != nil {
			return err
		}
		t.db, t.ownsDB = db, true
	}
	t.view = newStatusView(t)
	t.view.inner = t.db
	t.db = &viewStore{Store: t.db, v: t.view}
	if t.events, err = newEventLog(ctx, t.db, cfg.OnEvent, t.log); err != nil {
		return err
	}
	if t.secret, err = loadSecret(ctx, t.db); err != nil {
		return err
	}
	t.snap, t.verifier, t.feedback = cfg.Snapshotter, cfg.Verifier, cfg.Feedback
	if t.snap == nil {
		t.snap = gitsnap.New(gitsnap.Config{Git: mc.Git, Env: mc.GitEnv, Clock: cfg.Clock})
	}
	if t.verifier == nil {
		t.verifier = t.defaultVerifier()
	}
	if t.feedback == nil {
		t.feedback = gates.NewFeedbackGenerator(gates.FeedbackConfig{})
	}
	git := pipeline.Git{Manager: mgr, Request: merge.Request{CommitPending: true, Check: cfg.MergeCheck}, Logger: t.log}
	var worktrees pipeline.Worktrees = homeWorktrees{Git: git, t: t}
	var merger pipeline.Merger = t.triageMerger(git)
	if cfg.Worktrees != nil {
		worktrees = cfg.Worktrees
	}
	if cfg.Merger != nil {
		merger = cfg.Merger // no conflict triage: that reworks in a local worktree
	}
	if !cfg.LandRefused {
		merger = refusalGate{next: merger, db: t.db}
	}
	t.spawns.t = t
	t.pipe, err = pipeline.NewRuntime(pipeline.RuntimeConfig{
		Flow: cfg.Flow, Store: t.db, Spawner: &t.spawns, Messenger: &t.spawns, Worktrees: worktrees, Merger: merger,
		Board: storeBoard(t.db), Clock: cfg.Clock, Logger: t.log,
	})
	if err != nil {
		return err
	}
	t.graph, err = taskgraph.NewRuntime(taskgraph.Config{
		Store: t.db, Spawner: graphSpawner{t}, Clock: cfg.Clock, Logger: t.log,
		Core: teamcore.GraphCore(cfg.Workers),
	})
	if err != nil {
		return err
	}
	if err := t.bindRepository(ctx); err != nil {
		return err
	}
	if _, _, err := t.graph.Load(ctx, graphSession); errors.Is(err, taskgraph.ErrSessionNotFound) {
		if _, err := t.graph.Create(ctx, graphSession, "foreman", graphMode, []taskgraph.TaskSpec{}); err != nil && !errors.Is(err, taskgraph.ErrSessionExists) {
			return err
		}
	} else if err != nil {
		return err
	}
	if err := t.loadStories(ctx); err != nil {
		return err
	}
	return t.view.rebuild(ctx)
}

// loadStories reads the plan and repairs an Add that a crash interrupted
// between writing the stories and adding their tasks to the graph.
func (t *Team) loadStories(ctx context.Context) error {
	recs, err := t.db.List(ctx, kindStory)
	if err != nil {
		return err
	}
	sess, _, err := t.graph.Load(ctx, graphSession)
	if err != nil {
		return err
	}
	var missing []taskgraph.TaskSpec
	for _, rec := range recs {
		var sr storyRecord
		if _, _, err := getJSON(ctx, t.db, kindStory, rec.ID, &sr); err != nil {
			return err
		}
		t.stories[sr.ID] = sr.Story
		if _, ok := sess.Graph.Task(string(sr.ID)); !ok {
			missing = append(missing, taskSpec(sr.Story))
		}
	}
	for _, task := range sess.Graph.Tasks() {
		t.order = append(t.order, foreman.ItemID(task.Subject))
	}
	if len(missing) > 0 {
		if err := t.graph.AddTasks(ctx, graphSession, missing...); err != nil {
			return err
		}
		for _, m := range missing {
			t.order = append(t.order, foreman.ItemID(m.Subject))
		}
	}
	return nil
}

func taskSpec(s Story) taskgraph.TaskSpec { return teamcore.TaskSpec(s.ID, s.Title, s.After) }

// Close releases the team's store (when New opened it). A Run in progress
// is not stopped: cancel its context first. Close is safe to call twice.
func (t *Team) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	return t.closeStore()
}

func (t *Team) closeStore() error {
	if t.ownsDB && t.db != nil {
		return t.db.Close()
	}
	return nil
}

// Repo returns the repository's main worktree.
func (t *Team) Repo() string { return t.cfg.Repo }

// ErrNoWorktree means a story has no worktree now: it has not started, it
// merged, or it paused for a cause other than a merge conflict (its work
// is on its branch).
var ErrNoWorktree = errors.New("team: the story has no worktree")

// Worktree returns the path of story's worktree, which exists while the
// story is being worked on, and after it paused on a merge conflict (for
// the person resolving it there); otherwise the error matches
// ErrNoWorktree. A story paused for another cause keeps its branch
// (<Merge.BranchPrefix>/<story>, the work so far), not its worktree: a
// Retry or Resume makes the worktree again from the branch.
func (t *Team) Worktree(story foreman.ItemID) (string, error) {
	dir, err := t.mgr.Path(story)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		branch, _ := t.mgr.Branch(story)
		return "", fmt.Errorf("%w: %s (%s is not there: the story has not started, has merged, or paused for a cause other than a merge conflict: its work is on branch %s)",
			ErrNoWorktree, story, dir, branch)
	} else if err != nil {
		return "", err
	}
	return dir, nil
}

// Add adds stories to the plan, all or none: each must be valid, every
// story it comes After must be in the plan or in this call, and the
// dependencies must not form a cycle. Adding a story that is already in
// the plan with the same content does nothing; with different content it
// is an error matching ErrStoryExists. Stories may be added while the
// team runs.
func (t *Team) Add(ctx context.Context, stories ...Story) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	var fresh []Story
	inCall := map[foreman.ItemID]Story{}
	for _, s := range stories {
		if err := s.validate(); err != nil {
			return err
		}
		if prev, ok := inCall[s.ID]; ok && !prev.same(s) {
			return &StoryError{ID: s.ID, Reason: "given twice with different content", Err: ErrStoryExists}
		}
		inCall[s.ID] = s
		if old, ok := t.stories[s.ID]; ok {
			if !old.same(s) {
				return &StoryError{ID: s.ID, Reason: "already in the plan with different content", Err: ErrStoryExists}
			}
			continue
		}
		fresh = append(fresh, s)
	}
	if len(fresh) == 0 {
		return nil
	}
	sess, _, err := t.graph.Load(ctx, graphSession)
	if err != nil {
		return err
	}
	specs := make([]taskgraph.TaskSpec, len(fresh))
	for i, s := range fresh {
		specs[i] = taskSpec(s)
	}
	// The graph checks blockers and cycles; trying it first means nothing
	// is written for a plan it would refuse.
	if _, err := sess.Graph.Add([]string{storyRole}, specs...); err != nil {
		return &StoryError{ID: fresh[0].ID, Reason: err.Error(), Err: errors.Join(ErrInvalidStory, err)}
	}
	now := t.clk.Now()
	ops := make([]store.Op, len(fresh))
	for i, s := range fresh {
		data, err := jsonMarshal(storyRecord{Story: s, Added: now})
		if err != nil {
			return err
		}
		ops[i] = store.Op{Kind: kindStory, ID: string(s.ID), Data: data}
	}
	if _, err := t.db.Apply(ctx, ops...); err != nil {
		return err
	}
	if err := t.graph.AddTasks(ctx, graphSession, specs...); err != nil {
		return err // the stories are written; New or the next Add repairs the graph
	}
	for _, s := range fresh {
		t.stories[s.ID] = s
		t.order = append(t.order, s.ID)
		t.events.add(Event{Kind: EventStoryAdded, At: now, Story: s.ID, Detail: s.Title})
	}
	if t.run != nil {
		t.run.wake(taskgraph.WakeUp{Text: "next"})
	}
	return nil
}

// story returns a story of the plan.
func (t *Team) story(id foreman.ItemID) (Story, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.stories[id]
	return s, ok
}

// Stories returns the plan, in the order the stories were added.
func (t *Team) Stories() []Story {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Story, 0, len(t.order))
	for _, id := range t.order {
		out = append(out, t.stories[id])
	}
	return out
}
