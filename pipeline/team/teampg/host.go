package teampg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/agentforeman/foreman"
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
	// Queue, Name, Capacity, ...); NewHost sets Runtime.Agent, Prepare.
	Transport pgtransport.HostConfig
	// Clone is this host's clone of the shared repository; required.
	Clone *gitremote.Clone
	// Stages performs the team's stages: team.NewStageAgent with Repo
	// set to Clone.Dir(); required.
	Stages phases.AgentDriver
	// Store is the team's store, where each stage's result is recorded for
	// the coordinator; required.
	Store store.Store
}

// NewHost returns a pgtransport Host that performs the team's stages:
// before each, the item's worktree is checked out from the shared
// repository in Clone; after a stage that succeeded, the item's branch is
// pushed (a refused push fails the stage), its result recorded and the
// worktree removed; then the host reports DONE. Run it with Host.Run.
func NewHost(ctx context.Context, cfg HostConfig) (*pgtransport.Host, error) {
	if cfg.Clone == nil || cfg.Stages == nil || cfg.Store == nil {
		return nil, errors.New("teampg: HostConfig needs Clone, Stages and Store")
	}
	h := &hostAgent{cfg: cfg, current: map[foreman.ItemID]foreman.AssignmentID{}}
	tc := cfg.Transport
	tc.Runtime.Agent = h
	tc.Prepare = h.prepare
	return pgtransport.NewHost(ctx, tc)
}

type hostAgent struct {
	cfg     HostConfig
	mu      sync.Mutex
	current map[foreman.ItemID]foreman.AssignmentID // the transport assignment each item runs as here
}

func (h *hostAgent) prepare(ctx context.Context, a *worker.Assignment) error {
	wt, err := h.cfg.Clone.Checkout(ctx, a.Item)
	if err != nil {
		return err
	}
	a.Worktree = wt.Path
	h.mu.Lock()
	h.current[a.Item] = a.ID
	h.mu.Unlock()
	return nil
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
	req.Env = append(slices.Clip(req.Env), pipeline.AssignmentEnv(pipeline.SpawnRequest{
		Item: a.Item, Stage: a.Stage, Worker: a.Worker, Assignment: a.Assignment})...)
	res, err := h.cfg.Stages.Execute(ctx, req, onEvent)
	if ctx.Err() != nil {
		// Withdrawn (a new leader, a kill) or the host stopping: what was
		// not pushed is not the story's, and the next attempt checks out
		// again, here or elsewhere.
		if rerr := h.cfg.Clone.Remove(context.WithoutCancel(ctx), a.Item); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return res, err
	}
	if err != nil || !res.Success {
		return res, err
	}
	if _, err := h.cfg.Clone.Push(ctx, a.Item, fmt.Sprintf("%s: stage %d", a.Item, a.Stage)); err != nil {
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
	// another host, checks it out again. A failed stage's worktree stays
	// for a person to look at.
	if err := h.cfg.Clone.Remove(ctx, a.Item); err != nil {
		return phases.AgentResult{}, err
	}
	return res, nil
}
