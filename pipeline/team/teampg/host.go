package teampg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/merge/gitremote"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/worker"
	"github.com/agentforeman/foreman/worker/pgtransport"
)

// HostConfig configures a worker host of a team spread over machines.
type HostConfig struct {
	// Transport is the pgtransport host's configuration (Pool, Schema,
	// Queue, Name, Capacity, ...); NewHost sets Runtime.Agent and Prepare,
	// and pgtransport.HostConfig says which of the rest are required.
	// Required.
	Transport pgtransport.HostConfig
	// Clone is this host's clone of the shared repository. Required.
	Clone *gitremote.Clone
	// Stages performs the team's stages: team.NewStageAgent with Repo
	// set to Clone.Dir(). Required.
	Stages phases.AgentDriver
	// Store is the team's store, where each stage's result is recorded for
	// the coordinator. A *pgstore.Store also gives the transport its
	// schema when Transport.Schema is empty (the two must agree: a host on
	// another schema than the coordinators' never sees their work).
	// Required.
	Store store.Store
}

// NewHost returns a pgtransport Host that performs the team's stages:
// before each, the item's worktree is checked out from the shared
// repository in Clone; after a stage that succeeded, the item's branch is
// pushed (a refused push fails the stage), its result recorded and the
// worktree removed; then the host reports DONE. Run it with Host.Run.
//
// A HostConfig without Clone, Stages or Store, or whose Transport.Schema is
// not its Store's, is an error matching ErrInvalidConfig that names the
// field.
func NewHost(ctx context.Context, cfg HostConfig) (*pgtransport.Host, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	h := &hostAgent{cfg: cfg, current: map[foreman.ItemID]foreman.AssignmentID{},
		busy: map[foreman.ItemID]int{}, unended: map[foreman.AssignmentID]bool{}}
	h.idle = sync.NewCond(&h.mu)
	h.clk = clock.OrReal(cfg.Transport.Clock)
	h.log = cfg.Transport.Logger
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	tc := cfg.Transport
	tc.Runtime.Agent = h
	tc.Prepare = h.prepare
	return pgtransport.NewHost(ctx, tc)
}

// check finds what is missing or inconsistent in cfg, and takes the
// transport's schema from a PostgreSQL store.
func (cfg *HostConfig) check() error {
	var missing []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"Clone (this host's clone of the shared repository)", cfg.Clone != nil},
		{"Stages (team.NewStageAgent)", cfg.Stages != nil}, {"Store (the team's store)", cfg.Store != nil}} {
		if !f.set {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: HostConfig needs %s", ErrInvalidConfig, strings.Join(missing, ", "))
	}
	if s, ok := cfg.Store.(interface{ Schema() string }); ok {
		switch {
		case cfg.Transport.Schema == "":
			cfg.Transport.Schema = s.Schema()
		case cfg.Transport.Schema != s.Schema():
			return fmt.Errorf("%w: HostConfig.Transport.Schema %q is not the Store's schema %q: this host would never see the coordinators' work",
				ErrInvalidConfig, cfg.Transport.Schema, s.Schema())
		}
	}
	return nil
}

type hostAgent struct {
	cfg  HostConfig
	clk  foreman.Clock
	log  *slog.Logger
	mu   sync.Mutex
	idle *sync.Cond // signalled when an item's run ends here
	// current is the transport assignment each item was last prepared as
	// here: the one that owns the item's worktree. An older run of the same
	// item (a withdrawn attempt still winding down) must leave it alone.
	current map[foreman.ItemID]foreman.AssignmentID
	// busy counts each item's runs from their checkout to the end of their
	// execution; unended holds those runs.
	busy    map[foreman.ItemID]int
	unended map[foreman.AssignmentID]bool
}

// stopWait bounds how long a new attempt at an item waits for a withdrawn
// one to stop on this host (its agent gets SIGTERM, then SIGKILL). The
// host's loop waits with it, so it must stay well below the coordinator's
// host silence.
const stopWait = 10 * time.Second

func (h *hostAgent) prepare(ctx context.Context, a *worker.Assignment) error {
	// A new attempt at an item whose withdrawn attempt still runs here
	// waits for it to stop: both would work in the one worktree. (The
	// transport carries the withdrawal out before it starts what it
	// claimed in the same round.)
	wctx, cancel := context.WithCancel(ctx)
	timer := h.clk.AfterFunc(stopWait, cancel)
	err := h.waitIdle(wctx, a.Item)
	timer.Stop()
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("teampg: an earlier attempt at %s is still running on this host after %v", a.Item, stopWait)
	}
	wt, err := h.cfg.Clone.Checkout(ctx, a.Item)
	if err != nil {
		h.log.Warn("teampg: checking the story out failed", "item", a.Item, "assignment", a.ID, "err", err)
		return err
	}
	a.Worktree = wt.Path
	h.mu.Lock()
	h.current[a.Item] = a.ID
	// Busy from now, not from when its execution starts: a run prepared but
	// not yet started owns the worktree too.
	h.busy[a.Item]++
	h.unended[a.ID] = true
	h.mu.Unlock()
	return nil
}

func (h *hostAgent) waitIdle(ctx context.Context, item foreman.ItemID) error {
	stop := context.AfterFunc(ctx, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.idle.Broadcast()
	})
	defer stop()
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.busy[item] > 0 && ctx.Err() == nil {
		h.idle.Wait()
	}
	return ctx.Err()
}

// owns reports whether id still owns item's worktree here.
func (h *hostAgent) owns(item foreman.ItemID, id foreman.AssignmentID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.current[item] == id
}

// drop removes item's worktree if run id still owns it: its work is not
// the story's (withdrawn, or superseded on the shared repository).
func (h *hostAgent) drop(ctx context.Context, item foreman.ItemID, id foreman.AssignmentID, err error) error {
	if !h.owns(item, id) {
		return err
	}
	if rerr := h.cfg.Clone.Remove(context.WithoutCancel(ctx), item); rerr != nil {
		return errors.Join(err, rerr)
	}
	return err
}

func (h *hostAgent) Execute(ctx context.Context, req phases.AgentRequest, onEvent phases.StreamCallback) (phases.AgentResult, error) {
	a, ok := pipeline.ParseAssignment(req.TaskPrompt)
	if !ok {
		return phases.AgentResult{}, errors.New("teampg: a stage prompt without an assignment block")
	}
	h.mu.Lock()
	id, ok := h.current[a.Item]
	h.mu.Unlock()
	if !ok {
		return phases.AgentResult{}, fmt.Errorf("teampg: %s was not prepared on this host", a.Item)
	}
	defer func() {
		h.mu.Lock()
		if h.unended[id] {
			delete(h.unended, id)
			h.busy[a.Item]--
			h.idle.Broadcast()
		}
		h.mu.Unlock()
	}()
	req.Env = append(slices.Clip(req.Env), pipeline.AssignmentEnv(pipeline.SpawnRequest{
		Item: a.Item, Stage: a.Stage, Worker: a.Worker, Assignment: a.Assignment})...)
	res, err := h.cfg.Stages.Execute(ctx, req, onEvent)
	if ctx.Err() != nil {
		// Withdrawn (a new leader, a kill) or the host stopping: what was
		// not pushed is not the story's, and the next attempt checks out
		// again, here or elsewhere.
		return res, h.drop(ctx, a.Item, id, err)
	}
	if err != nil || !res.Success {
		// A failed stage's worktree stays for a person to look at.
		h.log.Warn("teampg: stage failed on this host; its worktree is kept", "item", a.Item, "stage", a.Stage,
			"assignment", id, "worktree", req.WorkspacePath, "err", err, "result", res.Result)
		return res, err
	}
	if !h.owns(a.Item, id) {
		return phases.AgentResult{}, fmt.Errorf("teampg: %s: a newer attempt was prepared on this host; not pushing %s's work", a.Item, id)
	}
	if _, err := h.cfg.Clone.Push(ctx, a.Item, fmt.Sprintf("%s: stage %d", a.Item, a.Stage)); err != nil {
		if errors.Is(err, gitremote.ErrBranchMoved) {
			// Another attempt pushed the story meanwhile: this work is stale.
			return phases.AgentResult{}, h.drop(ctx, a.Item, id, err)
		}
		return phases.AgentResult{}, err
	}
	data, err := json.Marshal(stageResult{Result: res.Result, SessionID: res.SessionID, Tokens: res.Tokens.Total(), CostUSD: res.CostUSD})
	if err != nil {
		return phases.AgentResult{}, err
	}
	if _, err := h.cfg.Store.Apply(ctx, store.Op{Kind: resultKind, ID: string(id), Data: data}); err != nil {
		return phases.AgentResult{}, fmt.Errorf("teampg: recording %s's result: %w", id, err)
	}
	// The work is on the shared repository: the next stage, here or on
	// another host, checks it out again.
	if err := h.drop(ctx, a.Item, id, nil); err != nil {
		return phases.AgentResult{}, err
	}
	return res, nil
}
