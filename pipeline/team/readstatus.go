package team

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/sqlitestore"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
	"github.com/agentforeman/foreman/pipeline/team/internal/teamcore"
)

// ErrNoState is matched by ReadStatus when the repository has no team
// state (no team ever ran there, or Config points elsewhere).
var ErrNoState = errors.New("team: no team state")

// ReadStatus reports the status of the team whose state cfg names,
// without an agent, without running anything and without writing: what a
// status command or a dashboard in another process calls while a host
// runs the team. Only Repo (and StateDir, Store, Flow and Stages when the
// host set them) matter; the default SQLite store is opened read-only.
// Status.Running says whether a host holds the team's run lock (a Run is
// in progress in some process), and Status.Host which one;
// Status.Containment is what the last Run recorded as it started.
//
// It reads the team's status view: every story's status is a record the
// team writes in the same store write as the records it is made of, so
// one List of them is the store's current state (and costs one small
// record per story, not one read of each of its records).
//
// With Store set, Repo may be empty: the status is then read from the
// store alone, and Running stays false (the run lock is a file in the
// repository; a team over PostgreSQL has its leader's lease instead).
func ReadStatus(ctx context.Context, cfg Config) (Status, error) {
	workersGiven := cfg.Workers > 0
	// A shared store (PostgreSQL) holds the whole status; no repository
	// need be at hand to read it.
	storeOnly := cfg.Repo == "" && cfg.Store != nil
	if storeOnly {
		cfg.Repo = string(filepath.Separator) // defaults wants one; nothing reads it
	}
	cfg, err := cfg.defaults(false)
	if err != nil {
		return Status{}, err
	}
	if !storeOnly {
		if err := resolveRepo(ctx, &cfg); err != nil {
			return Status{}, err
		}
	}
	t := &Team{cfg: cfg, clk: clock.OrReal(cfg.Clock), log: slog.New(slog.DiscardHandler),
		stories: map[foreman.ItemID]Story{}}
	t.view = newStatusView(t)
	t.db = cfg.Store
	if t.db == nil {
		path := filepath.Join(cfg.StateDir, "foreman.db")
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return Status{}, fmt.Errorf("%w at %s", ErrNoState, path)
		}
		db, err := sqlitestore.Open(ctx, path, sqlitestore.Options{ReadOnly: true, SkipQuickCheck: true})
		if err != nil {
			return Status{}, err
		}
		defer db.Close()
		t.db = db
	}
	t.spawns.t = t
	t.pipe, err = pipeline.NewRuntime(pipeline.RuntimeConfig{
		Flow: cfg.Flow, Store: t.db, Spawner: &t.spawns, Messenger: &t.spawns, Worktrees: readOnlyRepo{}, Merger: readOnlyRepo{},
		Board: storeBoard(t.db), Clock: cfg.Clock,
	})
	if err != nil {
		return Status{}, err
	}
	t.graph, err = taskgraph.NewRuntime(taskgraph.Config{Store: t.db, Spawner: graphSpawner{t}, Clock: cfg.Clock,
		Core: teamcore.GraphCore(cfg.Workers)})
	if err != nil {
		return Status{}, err
	}
	// The view records hold every story's status, written with the
	// records it is made of: one List. A store without them (last written
	// by a version of the team that kept none) is read record by record.
	stories, found, err := readView(ctx, t.db)
	if err == nil && !found {
		var ins []storyInputs
		if ins, err = t.readInputs(ctx); err == nil {
			_, stories = t.statusesOf(ins)
		}
	}
	var graph string
	if err == nil {
		graph, err = t.graphFor(ctx, stories)
	}
	if errors.Is(err, taskgraph.ErrSessionNotFound) {
		return Status{}, fmt.Errorf("%w in this store", ErrNoState)
	}
	if err != nil {
		return Status{}, err
	}
	st := statusOf(t.clk.Now(), false, cfg.Workers, stories, graph)
	start, err := readRunStart(ctx, t.db)
	if err != nil {
		return Status{}, err
	}
	st.Containment = start.Containment
	if storeOnly {
		if !workersGiven {
			st.Workers = 0
		}
	} else if info, running := runningElsewhere(cfg.StateDir); running {
		st.Running = true
		st.Host = &RunHost{PID: info.PID, Host: info.Host, Started: info.Started}
		if info.Workers > 0 {
			st.Workers = info.Workers
		}
	} else if !workersGiven {
		st.Workers = 0 // no run to ask and no Config.Workers: not known
	}
	return st, nil
}

// kindRunStart holds what the team's last Run started with (runStart, id
// runStartID), for ReadStatus: how its agents are contained, which only
// the process holding the agents can say.
const (
	kindRunStart = "team.runstart"
	runStartID   = "last"
)

// runStart is the record of a Run's start.
type runStart struct {
	// Containment is Status.Containment as the Run started.
	Containment string    `json:"containment"`
	At          time.Time `json:"at"`
}

// recordRunStart writes the runStart record of a Run starting now (under
// the run lock: no other process runs the team).
func (t *Team) recordRunStart(ctx context.Context) error {
	rec := runStart{Containment: t.containment(), At: t.clk.Now()}
	if err := putJSON(ctx, t.db, kindRunStart, runStartID, rec); err != nil {
		return fmt.Errorf("team: recording the run's start: %w", err)
	}
	return nil
}

// readRunStart is the last Run's runStart record; the zero value when no
// Run recorded one (none ran, or a version of the team that kept none).
func readRunStart(ctx context.Context, db store.Store) (runStart, error) {
	var rec runStart
	_, _, err := getJSON(ctx, db, kindRunStart, runStartID, &rec)
	return rec, err
}

// readOnlyRepo stands in for the repository where nothing may change.
type readOnlyRepo struct{}

var errReadOnly = errors.New("team: reading status only")

func (readOnlyRepo) CreateWorktree(context.Context, foreman.ItemID) error { return errReadOnly }
func (readOnlyRepo) RemoveWorktree(context.Context, foreman.ItemID) error { return errReadOnly }
func (readOnlyRepo) Merge(context.Context, pipeline.MergeRequest) (pipeline.MergeOutcome, error) {
	return pipeline.MergeOutcome{}, errReadOnly
}
