package teampg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/worker"
	"github.com/agentforeman/foreman/worker/pgtransport"
)

// resultKind is the store kind of a stage's result, written by the host
// that performed it, keyed by the transport's assignment id.
const resultKind = "team.stage-result"

// DefaultSilence is how long a stage may go without a word from its host
// (heartbeat or message) before the coordinator gives up on it.
const DefaultSilence = 30 * time.Second

// ErrHostFailed is matched by the error Execute returns when the host
// reported the stage FAILED (or otherwise not done), went silent, or
// reported DONE without a result.
var ErrHostFailed = errors.New("teampg: the stage failed on its host")

// stageResult is what a host records of a performed stage.
type stageResult struct {
	Result    string  `json:"result"`
	SessionID string  `json:"session_id,omitempty"`
	Tokens    int64   `json:"tokens,omitempty"`
	CostUSD   float64 `json:"cost_usd,omitempty"`
}

// RemoteConfig configures Remote.
type RemoteConfig struct {
	// Coordinator carries each stage to the hosts. Remote starts it
	// (Start) with itself as the inbox. Required.
	Coordinator *pgtransport.Coordinator
	// Store is where hosts record each stage's result (the team's store).
	// Required.
	Store store.Store
	// Silence is how long a stage may go without a word from its host
	// (heartbeat or message) before the coordinator gives up on it; zero
	// or negative means the default. Default: 30 s (DefaultSilence).
	Silence time.Duration
	// Clock times the Silence. Default: the wall clock.
	Clock foreman.Clock
}

// Remote is the coordinator's side of a team whose stages run on worker
// hosts: it is team.Config.Remote. Each execution becomes an assignment in
// the PostgreSQL queue, claimed by some Host; its heartbeats keep it alive,
// its DONE returns the stage's report line that the host recorded.
type Remote struct {
	cfg     RemoteConfig
	clk     foreman.Clock
	mu      sync.Mutex
	waiting map[foreman.AssignmentID]chan worker.Message
}

// NewRemote starts cfg.Coordinator with the returned Remote as its inbox.
func NewRemote(cfg RemoteConfig) (*Remote, error) {
	if cfg.Coordinator == nil || cfg.Store == nil {
		return nil, errors.New("teampg: RemoteConfig needs Coordinator and Store")
	}
	if cfg.Silence <= 0 {
		cfg.Silence = DefaultSilence
	}
	r := &Remote{cfg: cfg, clk: clock.OrReal(cfg.Clock), waiting: map[foreman.AssignmentID]chan worker.Message{}}
	cfg.Coordinator.Start(r)
	return r, nil
}

// Deliver takes the hosts' messages (the transport's inbox).
func (r *Remote) Deliver(_ context.Context, m worker.Message) (worker.Disposition, error) {
	r.mu.Lock()
	ch := r.waiting[m.Assignment]
	r.mu.Unlock()
	if ch == nil {
		return worker.Stale, nil
	}
	select {
	case ch <- m:
	default: // a heartbeat more or less changes nothing; finals never block (buffer)
	}
	return worker.Applied, nil
}

// Execute hands the stage to a worker host and waits for its end.
func (r *Remote) Execute(ctx context.Context, req phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
	a, ok := pipeline.ParseAssignment(req.TaskPrompt)
	if !ok {
		return phases.AgentResult{}, errors.New("teampg: a stage prompt without an assignment block")
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	id := foreman.AssignmentID(fmt.Sprintf("%s.%s", a.Assignment, hex.EncodeToString(b[:])))
	if err := id.Validate(); err != nil {
		id = foreman.AssignmentID("r-" + hex.EncodeToString(b[:]))
	}
	ch := make(chan worker.Message, 16)
	r.mu.Lock()
	r.waiting[id] = ch
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.waiting, id)
		r.mu.Unlock()
	}()
	// The transport's worker slot is the pipeline's assignment id: the
	// team's worker functions let the host that claimed this execution
	// write that assignment's build base (team.base), and no other's.
	wid := foreman.WorkerID(a.Assignment)
	if wid.Validate() != nil {
		wid = foreman.WorkerID("host-" + hex.EncodeToString(b[:]))
	}
	co := r.cfg.Coordinator
	err := co.Send(ctx, worker.Command{Kind: worker.CommandAssign, Worker: wid, Assignment: id, Assign: &worker.Assignment{
		ID: id, Worker: wid, Item: a.Item, Stage: a.Stage, Prompt: req.TaskPrompt, Worktree: req.WorkspacePath,
		Attempt: req.Iteration, Feedback: req.Feedback,
	}})
	if err != nil {
		return phases.AgentResult{}, err
	}
	withdraw := func(reason string) {
		_ = co.Send(context.WithoutCancel(ctx), worker.Command{Kind: worker.CommandKill, Worker: wid, Assignment: id, Reason: reason})
	}
	silence := r.clk.NewTimer(r.cfg.Silence)
	defer silence.Stop()
	heard := false
	for {
		select {
		case <-ctx.Done():
			withdraw("the coordinator stopped the stage")
			return phases.AgentResult{}, context.Cause(ctx)
		case <-silence.C():
			withdraw("no word from the host")
			if !heard {
				return phases.AgentResult{}, fmt.Errorf("%w: %s: no word from any worker host within %v (none claimed it, or its host died before its first heartbeat): is a host running (teampg.NewHost) on the same database, schema and queue?",
					ErrHostFailed, id, r.cfg.Silence)
			}
			return phases.AgentResult{}, fmt.Errorf("%w: %s: no heartbeat or message from its host for %v", ErrHostFailed, id, r.cfg.Silence)
		case m := <-ch:
			heard = true
			silence.Reset(r.cfg.Silence)
			switch m.Kind {
			case worker.MsgHeartbeat, worker.MsgStatus, worker.MsgQGResult:
				continue
			case worker.MsgDone, worker.MsgReadyForReview:
				return r.result(ctx, id)
			default:
				return phases.AgentResult{}, fmt.Errorf("%w: %s: %s", ErrHostFailed, id, m.Reason)
			}
		}
	}
}

func (r *Remote) result(ctx context.Context, id foreman.AssignmentID) (phases.AgentResult, error) {
	rec, err := r.cfg.Store.Get(ctx, resultKind, string(id))
	if err != nil {
		return phases.AgentResult{}, fmt.Errorf("%w: %s reported DONE but its result cannot be read: %w", ErrHostFailed, id, err)
	}
	var sr stageResult
	if err := json.Unmarshal(rec.Data, &sr); err != nil {
		return phases.AgentResult{}, fmt.Errorf("%w: %s: corrupt result: %w", ErrHostFailed, id, err)
	}
	// Read once: every execution has an id of its own, so nobody reads it
	// again. Should the delete fail (the lead lost), the leader stops anyway.
	_, _ = r.cfg.Store.Apply(ctx, store.Op{Kind: resultKind, ID: string(id), ExpectVersion: rec.Version, Delete: true})
	return phases.AgentResult{Success: true, Result: sr.Result, SessionID: sr.SessionID,
		Tokens: phases.TokenUsage{Input: sr.Tokens}, CostUSD: sr.CostUSD}, nil
}
