package teampg_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentforeman/foreman/merge/gitremote"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teampg"
	"github.com/agentforeman/foreman/worker/pgtransport"
)

// A coordinator process: campaign for the lease, fence the shared
// repository with its term, grant the worker hosts' database role what a
// worker host needs and nothing more, then run the team with its stages on
// the worker hosts and its merges on the shared repository.
// (examples/foreman -role coordinator -worker-role foreman_worker does
// this, with printing.)
func Example_coordinator() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Println(err)
		return
	}
	db, err := pgstore.OpenPool(ctx, pool, pgstore.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	clone, err := gitremote.Open(ctx, gitremote.Config{Remote: "git@example.com:app.git", Dir: "/var/lib/foreman/app"})
	if err != nil {
		fmt.Println(err)
		return
	}
	lead, err := teampg.Lead(ctx, teampg.LeadConfig{Pool: pool, Store: db, Clone: clone, // blocks until this process leads
		WorkerRoles: []string{"foreman_worker"}}) // CREATE ROLE foreman_worker LOGIN PASSWORD '...', once
	if errors.Is(err, pgstore.ErrPrivileged) {
		fmt.Println("the worker role can do more than a worker host may:", err)
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lead.Close(context.WithoutCancel(ctx))
	// No agent and no gate plan here: the worker hosts have them.
	cfg := team.Config{Workers: 8}
	lead.Configure(&cfg) // Repo, Store, Remote, Worktrees, Merger
	tm, err := team.New(lead.Context(), cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := tm.Run(lead.Context()) // ends early if another coordinator takes over
	fmt.Println(res, err)
}

// A worker host process: it logs in with the worker role the coordinators
// granted (not theirs: the agents run here), and has its own clone, the
// team's stage agent over the worker's view of the team's store, and a
// pgtransport host that claims stages from the queue.
func Example_worker() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://foreman_worker@db.example.com/foreman") // the password in ~/.pgpass
	if err != nil {
		fmt.Println(err)
		return
	}
	// Only its claimed stories' stage records; ErrNotGranted until a
	// coordinator granted the role.
	db, err := teampg.OpenWorkerStore(ctx, teampg.WorkerStoreConfig{Pool: pool})
	if err != nil {
		fmt.Println(err)
		return
	}
	clone, err := gitremote.Open(ctx, gitremote.Config{Remote: "git@example.com:app.git", Dir: "/var/lib/foreman/app"})
	if err != nil {
		fmt.Println(err)
		return
	}
	stages, err := team.NewStageAgent(ctx, team.Config{
		Repo: clone.Dir(), Store: db, Agent: agentcmd.New(agentcmd.Config{Format: agentcmd.FormatClaude}),
		Gates: phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests,
			Checks: []phases.GateCheck{{Name: "tests", Argv: []string{"go", "test", "./..."}}}}}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	host, err := teampg.NewHost(ctx, teampg.HostConfig{
		Transport: pgtransport.HostConfig{Pool: pool, Capacity: 4}, Clone: clone, Stages: stages, Store: db,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(host.Run(ctx))
}
