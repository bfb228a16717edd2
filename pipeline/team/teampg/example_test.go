package teampg_test

import (
	"context"
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

// A coordinator process: campaign for the lease, then run the team with
// its stages on the worker hosts and its merges on the shared repository.
// (examples/foreman -role coordinator does this, with printing.)
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
	leader, err := db.Campaign(ctx, pgstore.LeaseOptions{}) // blocks until this process leads
	if err != nil {
		fmt.Println(err)
		return
	}
	coord, err := pgtransport.NewCoordinator(ctx, pgtransport.Config{Pool: pool, Store: db, Leader: leader})
	if err != nil {
		fmt.Println(err)
		return
	}
	remote, err := teampg.NewRemote(teampg.RemoteConfig{Coordinator: coord, Store: leader.Store()})
	if err != nil {
		fmt.Println(err)
		return
	}
	git := teampg.Git{Clone: clone, Leader: leader}
	tm, err := team.New(ctx, team.Config{
		Repo: clone.Dir(), Store: leader.Store(), Remote: remote, Worktrees: git, Merger: git,
		Agent: agentcmd.New(agentcmd.Config{Format: agentcmd.FormatClaude}),
		Gates: phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests,
			Checks: []phases.GateCheck{{Name: "tests", Argv: []string{"go", "test", "./..."}}}}}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := tm.Run(ctx) // ends early, fenced, if another coordinator takes over
	fmt.Println(res, err)
}

// A worker host process: its own clone, the team's stage agent, and a
// pgtransport host that claims stages from the queue.
func Example_worker() {
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
