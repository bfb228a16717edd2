package pgtransport_test

import (
	"context"
	"log"
	"os"
	"os/signal"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/worker"
	"github.com/agentforeman/foreman/worker/pgtransport"
)

// A coordinator process: once it leads, its Dispatcher's workers are the
// hosts serving the queue, on any machine. The examples need a PostgreSQL
// server, so they are compiled, not run; the tests run the same calls.
func ExampleNewCoordinator() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	st, err := pgstore.OpenPool(ctx, pool, pgstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	leader, err := st.Campaign(ctx, pgstore.LeaseOptions{}) // waits while another coordinator leads
	if err != nil {
		log.Fatal(err)
	}
	defer leader.Resign(ctx)

	tr, err := pgtransport.NewCoordinator(ctx, pgtransport.Config{Pool: pool, Store: st, Leader: leader})
	if err != nil {
		log.Fatal(err) // pgstore.ErrFenced: another coordinator took over meanwhile
	}
	d, err := worker.New(worker.Config{Transport: tr, MaxWorkers: 16})
	if err != nil {
		log.Fatal(err)
	}
	tr.Start(d)
	defer d.Shutdown(ctx) // closes tr too
	_ = d.Submit(ctx, worker.Item{ID: "story-1", Prompt: "Add a health check endpoint", Worktree: "/srv/work/story-1"})
	<-leader.Lost() // a real coordinator also stops when its work is done
}

// A worker host process: it claims up to four assignments at a time and
// runs each with the agent command, until interrupted.
func ExampleNewHost() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	agent := agentcmd.New(agentcmd.Config{Format: agentcmd.FormatClaude}) // Claude Code's default command line
	h, err := pgtransport.NewHost(ctx, pgtransport.HostConfig{Pool: pool, Capacity: 4, Runtime: worker.RuntimeConfig{Agent: agent}})
	if err != nil {
		log.Fatal(err)
	}
	if err := h.Run(ctx); err != nil {
		log.Println("host stopped:", err)
	}
}

// A worker host's database role of its own: run once by the coordinators'
// role (the schema's owner), it lets the role claim, beat and report for
// its own claims and nothing else. The hosts then log in with it.
func ExampleGrantWorker() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL")) // the coordinators' role
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE ROLE foreman_worker LOGIN PASSWORD 'change me'`); err != nil {
		log.Fatal(err)
	}
	if err := pgtransport.GrantWorker(ctx, pool, "foreman", "foreman_worker"); err != nil {
		log.Fatal(err) // pgstore.ErrPrivileged: the role can do more (a superuser, the owner's member)
	}
	// On a worker host: pgxpool.New(ctx, "postgres://foreman_worker@db/foreman"),
	// then NewHost as in ExampleNewHost.
}
