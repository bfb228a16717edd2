package teampg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/merge/gitremote"
	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/worker/pgtransport"
)

// ErrInvalidConfig is matched by the error Lead returns for a LeadConfig
// missing a required field, and by NewHost's for a HostConfig missing one or
// naming another schema than its store's.
var ErrInvalidConfig = errors.New("teampg: invalid config")

// LeadConfig configures Lead. Pool, Store and Clone are required; zero
// values of the others mean their defaults.
type LeadConfig struct {
	// Pool reaches the database. Required.
	Pool *pgxpool.Pool
	// Store is the team's store in the database (its schema holds the
	// transport's queue too). Required.
	Store *pgstore.Store
	// Clone is this coordinator's clone of the shared repository, where
	// merges are made and pushed from. Required.
	Clone *gitremote.Clone
	// Lease is the lease coordinators contend for; its TTL is the failover
	// time. Default: pgstore.LeaseOptions' defaults (TTL 10 s).
	Lease pgstore.LeaseOptions
	// Transport is the queue's options (Queue, PollInterval, NoListen,
	// ...); Lead sets Pool, Store and Leader, and Logger when it has none.
	// Default: pgtransport.Config's defaults for the rest.
	Transport pgtransport.Config
	// Silence is how long a stage may go without a word from its host
	// (heartbeat or message) before the coordinator gives up on it.
	// Default: 30 s (DefaultSilence).
	Silence time.Duration
	// Merge is every merge's template (Check, Body); team.Config.MergeCheck
	// is not read, set Merge.Check. Default: the zero merge.Request (no
	// check; Title comes from the story).
	Merge merge.Request
	// WorkerRoles are the database roles the worker hosts log in with:
	// once leading, Lead grants each what a worker host needs and nothing
	// more (GrantWorker), and fails if one can already do more (the
	// coordinators' own role, a superuser). Default: none (the hosts' roles
	// are granted elsewhere, or they log in as the coordinators' role,
	// which lets a host that runs agents write anything).
	WorkerRoles []string
	// Logger receives the transport's logs when Transport.Logger is nil.
	// Default: none (nil discards them).
	Logger *slog.Logger
}

// Leadership is a coordinator process's lead over the team: the lease
// (Leader), the fenced shared repository, the transport coordinator
// carrying stages to the hosts, and the seams that make a team.Config run
// from here (Configure). Its Context ends when the lead is lost.
type Leadership struct {
	Leader      *pgstore.Leader
	Coordinator *pgtransport.Coordinator
	Remote      *Remote
	Git         Git

	clone  *gitremote.Clone
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// Lead blocks until this process leads the team (pgstore's lease), then
// fences the shared repository with the lease's term (gitremote's
// Clone.Fence: from then on no older leader's merge can land, however
// long it was paused), starts the transport coordinator, installs the
// team's worker functions (WorkerStore) and grants the WorkerRoles, and
// returns the Leadership. Run the team with a Config passed through Configure and
// the Leadership's Context; Close gives the lead up.
//
// Errors: ErrInvalidConfig, the campaign's (a cancelled ctx), and
// gitremote.ErrFenced when a newer leader fenced the repository between
// this one's election and its fence (it has already lost).
func Lead(ctx context.Context, cfg LeadConfig) (*Leadership, error) {
	if cfg.Pool == nil || cfg.Store == nil || cfg.Clone == nil {
		return nil, fmt.Errorf("%w: LeadConfig needs Pool, Store and Clone", ErrInvalidConfig)
	}
	leader, err := cfg.Store.Campaign(ctx, cfg.Lease)
	if err != nil {
		return nil, err
	}
	l := &Leadership{Leader: leader, clone: cfg.Clone}
	fail := func(err error) (*Leadership, error) {
		return nil, errors.Join(err, l.Close(context.WithoutCancel(ctx)))
	}
	if err := cfg.Clone.Fence(ctx, leader.Term()); err != nil {
		return fail(fmt.Errorf("teampg: fencing the shared repository with term %d: %w", leader.Term(), err))
	}
	tc := cfg.Transport
	tc.Pool, tc.Store, tc.Leader = cfg.Pool, cfg.Store, leader
	if tc.Logger == nil {
		tc.Logger = cfg.Logger
	}
	if l.Coordinator, err = pgtransport.NewCoordinator(ctx, tc); err != nil {
		return fail(err)
	}
	// The hosts' side of the team's records (WorkerStore), for this build.
	if err := installWorkerFunctions(ctx, cfg.Pool, cfg.Store.Schema()); err != nil {
		return fail(err)
	}
	for _, role := range cfg.WorkerRoles {
		if err := GrantWorker(ctx, cfg.Pool, cfg.Store.Schema(), role); err != nil {
			return fail(fmt.Errorf("teampg: granting worker role %q: %w", role, err))
		}
	}
	if l.Remote, err = NewRemote(RemoteConfig{Coordinator: l.Coordinator, Store: leader.Store(), Silence: cfg.Silence}); err != nil {
		return fail(err)
	}
	l.Git = Git{Clone: cfg.Clone, Leader: leader, Request: cfg.Merge}
	l.ctx, l.cancel = context.WithCancelCause(ctx)
	go func() {
		select {
		case <-leader.Lost():
			l.cancel(leader.Err())
		case <-l.ctx.Done():
		}
	}()
	return l, nil
}

// Configure sets what makes cfg's team run from this coordinator: Repo
// (the clone), Store (the lease-fenced store), Remote (stages on the
// hosts), Worktrees and Merger (the shared repository).
func (l *Leadership) Configure(cfg *team.Config) {
	cfg.Repo, cfg.Store, cfg.Remote, cfg.Worktrees, cfg.Merger = l.clone.Dir(), l.Leader.Store(), l.Remote, l.Git, l.Git
}

// Context ends when the lead is lost (its cause is the Leader's error,
// matching pgstore.ErrLeadershipLost), when Lead's ctx ends, or when Close is
// called: run the team with it.
func (l *Leadership) Context() context.Context {
	if l.ctx == nil {
		return context.Background()
	}
	return l.ctx
}

// Close stops the coordinator and resigns the lease, so that another
// coordinator takes over at once rather than after the lease's TTL.
func (l *Leadership) Close(ctx context.Context) error {
	if l.cancel != nil {
		l.cancel(errors.New("teampg: the lead was given up"))
	}
	var closeErr error
	if l.Coordinator != nil {
		closeErr = l.Coordinator.Close(ctx)
	}
	return errors.Join(closeErr, l.Leader.Resign(ctx))
}
