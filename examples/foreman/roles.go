package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/merge/gitremote"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teampg"
	"github.com/agentforeman/foreman/worker/pgtransport"
)

// A team over several hosts: -role coordinator or -role worker with -db
// (PostgreSQL) and -remote (the shared git repository). -repo is then this
// host's own clone of -remote, made when missing.
const (
	roleCoordinator = "coordinator"
	roleWorker      = "worker"
)

// distributed is what a coordinator or worker process opened; close
// releases it.
type distributed struct {
	pool   *pgxpool.Pool
	store  *pgstore.Store
	clone  *gitremote.Clone
	closer []func()
}

func (d *distributed) close() {
	for i := len(d.closer) - 1; i >= 0; i-- {
		d.closer[i]()
	}
}

// openDistributed connects to the database and opens this host's clone.
func openDistributed(ctx context.Context, o options, mc merge.Config) (*distributed, error) {
	d := &distributed{}
	pool, err := pgxpool.New(ctx, o.db)
	if err != nil {
		return nil, fmt.Errorf("-db: %w", err)
	}
	d.pool = pool
	d.closer = append(d.closer, pool.Close)
	if d.store, err = pgstore.OpenPool(ctx, pool, pgstore.Options{}); err != nil {
		d.close()
		return nil, err
	}
	d.closer = append(d.closer, func() { _ = d.store.Close() })
	if d.clone, err = gitremote.Open(ctx, gitremote.Config{Remote: o.remote, Dir: o.repo, Merge: mc}); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// becomeLeader opens the database and the clone, campaigns until this
// process leads, and sets cfg up to run the team from here with its stages
// on the worker hosts. The returned context ends when leadership is lost.
func becomeLeader(ctx context.Context, o options, cfg *team.Config, out *printer) (context.Context, func(), error) {
	d, err := openDistributed(ctx, o, cfg.Merge)
	if err != nil {
		return nil, nil, err
	}
	out.printf("coordinator: campaigning for the lease (ttl %v)\n", o.leaseTTL)
	var workerRoles []string
	if o.workerRole != "" {
		workerRoles = []string{o.workerRole}
	}
	lead, err := teampg.Lead(ctx, teampg.LeadConfig{Pool: d.pool, Store: d.store, Clone: d.clone,
		Lease: pgstore.LeaseOptions{TTL: o.leaseTTL, RenewEvery: o.leaseRenew, RetryEvery: o.leaseRetry}, Silence: o.silence,
		Merge: merge.Request{Check: cfg.MergeCheck}, WorkerRoles: workerRoles, Logger: cfg.Logger})
	if err != nil {
		d.close()
		return nil, nil, err
	}
	d.closer = append(d.closer, func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = lead.Close(cctx)
	})
	out.printf("coordinator: leading, term %d; the shared repository is fenced with it\n", lead.Leader.Term())
	if o.workerRole != "" {
		out.printf("coordinator: worker role %q may claim, report and record its own stages, and nothing else\n", o.workerRole)
	}
	lead.Configure(cfg)
	lctx := lead.Context()
	go func() {
		<-lctx.Done()
		if errors.Is(context.Cause(lctx), pgstore.ErrLeadershipLost) {
			out.printf("coordinator: lost the lease (term %d): another coordinator leads; stopping without another write\n", lead.Leader.Term())
		}
	}()
	return lctx, d.close, nil
}

// runWorkerHost serves the team's stages from this host until ctx ends.
func runWorkerHost(ctx context.Context, o options, stdout, stderr io.Writer) int {
	plan, err := team.LoadPlan(o.plan)
	if err != nil {
		fmt.Fprintln(stderr, "foreman:", err)
		return exitUsage
	}
	cfg, err := teamConfig(o, plan, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "foreman:", err)
		return exitUsage
	}
	out := &printer{w: stdout}
	d, ws, stages, err := openWorkerHost(ctx, o, cfg, out)
	if err != nil {
		if ctx.Err() != nil {
			return exitInterrupted
		}
		fmt.Fprintln(stderr, "foreman:", err)
		return exitFault
	}
	defer d.close()
	capacity := cfg.Workers
	if capacity == 0 {
		capacity = 1
	}
	host, err := teampg.NewHost(ctx, teampg.HostConfig{
		Transport: pgtransport.HostConfig{Pool: d.pool, Capacity: capacity, Logger: cfg.Logger},
		Clone:     d.clone, Stages: stages, Store: ws,
	})
	if err != nil {
		fmt.Fprintln(stderr, "foreman:", err)
		return exitFault
	}
	out.printf("worker: host %s serving up to %d stages from %s\n", host.Name(), capacity, d.clone.Dir())
	err = host.Run(ctx)
	st := host.Stats()
	out.printf("worker: stopped after %d assignments (%d messages)\n", st.Claimed, st.Messages)
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(stderr, "foreman:", err)
		return exitFault
	}
	return exitInterrupted
}

// setupPoll is how often a worker host whose role the database does not
// let in yet (no coordinator has set the team up or granted the role)
// tries again.
const setupPoll = 2 * time.Second

// openWorkerHost opens the database, this host's clone, the team's store as
// a worker host sees it (teampg.WorkerStore: only its claimed stories'
// stage records) and the stage agent. A role that may not do this yet (the
// coordinators have not set the database up, or not granted it with
// -worker-role) waits for them, saying so once; a role that can do more
// than a worker host needs (the coordinators') gets a warning.
func openWorkerHost(ctx context.Context, o options, cfg team.Config, out *printer) (*distributed, *teampg.WorkerStore, phases.AgentDriver, error) {
	for said := false; ; said = true {
		d, err := openDistributed(ctx, o, cfg.Merge)
		var ws *teampg.WorkerStore
		if err == nil {
			ws, err = teampg.OpenWorkerStore(ctx, teampg.WorkerStoreConfig{Pool: d.pool, Schema: d.store.Schema()})
		}
		var stages phases.AgentDriver
		if err == nil {
			cfg.Repo, cfg.Store = d.clone.Dir(), ws
			stages, err = team.NewStageAgent(ctx, cfg)
		}
		if err == nil {
			if perr := pgtransport.CheckWorker(ctx, d.pool, d.store.Schema(), ""); errors.Is(perr, pgstore.ErrPrivileged) {
				out.printf("worker: warning: this host's database role can write the team's state and the leader's lease, and the agents run here: "+
					"give worker hosts a role of their own (-worker-role on the coordinators; docs/multihost.md): %v\n", perr)
			}
			return d, ws, stages, nil
		}
		if d != nil {
			d.close()
		}
		var pe *pgconn.PgError
		if !errors.Is(err, teampg.ErrNotGranted) && !errors.Is(err, pgtransport.ErrNotMigrated) &&
			!(errors.As(err, &pe) && pe.Code == "42501") {
			return nil, nil, nil, err
		}
		if !said {
			out.printf("worker: waiting for a coordinator to set the database up for this role (-worker-role): %v\n", err)
		}
		t := time.NewTimer(setupPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, nil, ctx.Err()
		case <-t.C:
		}
	}
}

// showClusterStatus is -status -db: how a team spread over hosts stands,
// read from its database, and which coordinator leads it.
func showClusterStatus(ctx context.Context, o options, stdout, stderr io.Writer) int {
	pool, err := pgxpool.New(ctx, o.db)
	if err != nil {
		fmt.Fprintln(stderr, "foreman: -db:", err)
		return exitUsage
	}
	defer pool.Close()
	db, err := pgstore.OpenPool(ctx, pool, pgstore.Options{})
	if err != nil {
		fmt.Fprintln(stderr, "foreman:", err)
		return exitFault
	}
	defer db.Close()
	st, err := team.ReadStatus(ctx, team.Config{Store: db})
	switch {
	case errors.Is(err, team.ErrNoState):
		fmt.Fprintf(stderr, "foreman: no team in this database yet (%v): start a -role coordinator first\n", err)
		return exitUsage
	case err != nil:
		fmt.Fprintln(stderr, "foreman:", err)
		return exitFault
	}
	lease, found, err := db.ReadLease(ctx, "")
	if err != nil {
		fmt.Fprintln(stderr, "foreman:", err)
		return exitFault
	}
	running := "No coordinator has led the team yet.\n\n"
	switch {
	case found && lease.Live():
		running = fmt.Sprintf("Coordinator %s leads the team (term %d).\n\n", lease.Holder, lease.Term)
	case found:
		running = fmt.Sprintf("No coordinator leads the team now (the last, %s, led term %d).\n\n", lease.Holder, lease.Term)
	}
	return printStatus(o, st, running, stdout, stderr)
}
