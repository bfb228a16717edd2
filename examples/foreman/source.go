package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/ghsource"
)

// loadPlan reads -plan; with -source the plan is empty (no stories, no
// gates: an issue tracker gives no commands to run) and the source gives
// the stories.
func loadPlan(o options) (team.Plan, error) {
	if o.source != "" {
		return team.Plan{}, nil
	}
	return team.LoadPlan(o.plan)
}

// sourcePoll is how often -source is polled while the team runs.
const sourcePoll = time.Minute

// followSource opens -source, adds its stories (and drops the withdrawn
// ones) once, and keeps following it while the team runs: new issues
// join, states are written back. stop ends the following and reports
// what the run left unreported. The token is taken out of the process's
// environment first, so no agent or gate command inherits it.
func followSource(ctx context.Context, tm *team.Team, o options, out *printer, stderr io.Writer) (stop func(), code int) {
	cfg, err := ghsource.ParseSpec(o.source)
	if err != nil {
		fmt.Fprintln(stderr, "foreman:", err)
		return nil, exitUsage
	}
	cfg.Token = o.token // taken from $GITHUB_TOKEN before the team opened
	if cfg.BaseURL == "" {
		cfg.BaseURL = o.githubAPI
	}
	src, err := ghsource.New(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "foreman:", err)
		return nil, exitUsage
	}
	f := tm.Follow(src, team.FollowConfig{Interval: sourcePoll})
	res, err := f.Sync(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "foreman: reading the stories from", o.source+":", err)
		return nil, exitFault
	}
	out.printf("%s: %d new stories, %d dropped\n", o.source, len(res.Added), len(res.Dropped))
	for _, ig := range res.Ignored {
		out.printf("%s: %s not taken: %s\n", o.source, ig.Story, ig.Reason)
	}
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f.Run(fctx)
	}()
	return func() {
		cancel()
		<-done
		fl, cancelFlush := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancelFlush()
		if err := f.Flush(fl); err != nil {
			fmt.Fprintln(stderr, "foreman: reporting to", o.source+":", err, "(the next run reports it)")
		}
		st := src.Stats()
		out.printf("%s: %d requests (%d not modified), %d rate-limited, waited %s\n", o.source, st.Requests, st.NotModified, st.Limited, st.Waited)
	}, 0
}
