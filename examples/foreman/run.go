package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/ghsource"
	"github.com/agentforeman/foreman/pipeline/team/teammetrics"
)

// runTeam loads the plan, opens the team in the repository (continuing it
// when it has state there), adds the plan's stories and runs until every
// story is merged or waits for a person, printing what happens.
func runTeam(ctx context.Context, o options, stdout, stderr io.Writer) int {
	plan, err := loadPlan(o)
	if err != nil {
		fmt.Fprintln(stderr, "foreman:", err)
		if errors.Is(err, team.ErrInvalidPlan) || errors.Is(err, os.ErrNotExist) {
			return exitUsage
		}
		return exitFault
	}
	cfg, err := teamConfig(o, plan, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "foreman:", err)
		return exitUsage
	}
	// The token leaves the environment before anything runs, for -source
	// and -land alike: no agent or gate inherits it.
	if o.source != "" || (o.land != "" && o.land != "local") {
		o.token = ghsource.TakeToken()
	}
	var ref teamRef
	lander, err := newLander(o, o.token, cfg, &ref)
	if err != nil {
		fmt.Fprintln(stderr, "foreman:", err)
		return exitUsage
	}
	if lander != nil {
		// One GET of the repository now: a run whose stories could never
		// land (no network, a wrong token or repository) fails before any
		// agent works, not after a story was planned, built and gated.
		if err := lander.Check(ctx); err != nil {
			fmt.Fprintln(stderr, "foreman: -land:", err)
			return exitFault
		}
		cfg.Merger = lander
	}
	out := &printer{w: stdout}
	if o.role == roleCoordinator {
		lctx, release, err := becomeLeader(ctx, o, &cfg, out)
		if err != nil {
			fmt.Fprintln(stderr, "foreman:", err)
			return exitFault
		}
		defer release()
		ctx = lctx
	} else if st, err := team.ReadStatus(ctx, team.Config{Repo: cfg.Repo}); err == nil && st.Running {
		// One process runs a team at a time (team.Run holds a lock and fails
		// with team.ErrBusy); saying so before opening the team is friendlier.
		fmt.Fprintf(stderr, "foreman: %v (pid %d); watch it with -status, or stop it first\n", team.ErrBusy, st.Host.PID)
		return exitFault
	}
	var (
		reg     *prometheus.Registry
		metrics *teammetrics.Metrics
	)
	if o.http != "" {
		if reg, metrics, err = newMetrics(&cfg); err != nil {
			fmt.Fprintln(stderr, "foreman:", err)
			return exitFault
		}
	}
	tm, err := team.New(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "foreman:", err)
		if errors.Is(err, team.ErrInvalidConfig) {
			return exitUsage
		}
		return exitFault
	}
	defer tm.Close()
	ref.tm = tm

	// Events recorded before this invocation: Add below records this run's
	// own story_added ones, which are not "from earlier runs".
	earlier := len(tm.Events(0))
	if err := tm.Add(ctx, plan.Stories...); err != nil {
		fmt.Fprintln(stderr, "foreman:", err)
		if errors.Is(err, team.ErrStoryExists) {
			fmt.Fprintf(stderr, "foreman: a story's definition cannot change once the team has it (it may be half built);\n"+
				"give the changed story a new id, or start the plan over by removing %s\n", filepath.Join(cfg.Repo, team.StateDirName))
			return exitUsage
		}
		if errors.Is(err, team.ErrInvalidStory) {
			return exitUsage
		}
		return exitFault
	}
	if extra := storiesNotInPlan(tm.Stories(), plan.Stories); len(extra) > 0 && o.plan != "" {
		fmt.Fprintf(stdout, "note: %d stories from earlier runs are not in %s; the team still works on them: %s\n",
			len(extra), o.plan, strings.Join(extra, ", "))
	}

	// The event stream is printed as it comes; the status table after each
	// story-level change. The subscription ends once Run has returned and
	// every event it recorded is printed.
	subCtx, stopSub := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSub()
	// Earlier runs' events are in -status and on the page; this run's log
	// starts after them, so a rerun does not look like the old failures
	// happening again.
	var from uint64
	if evs := tm.Events(0); len(evs) > 0 {
		from = evs[len(evs)-1].Seq
		if earlier > 0 {
			fmt.Fprintf(stdout, "%d events from earlier runs (-status shows where the plan stands)\n", earlier)
		}
	}
	events := tm.Subscribe(subCtx, from)
	var printed sync.WaitGroup
	lastSeq := make(chan uint64, 1)
	printed.Add(1)
	go func() {
		defer printed.Done()
		watch(subCtx, tm, events, lastSeq, out)
	}()

	if o.notify != "" {
		stopNotify, err := notify(tm, o, stderr)
		if err != nil {
			fmt.Fprintln(stderr, "foreman:", err)
			return exitUsage
		}
		defer stopNotify()
	}
	if o.http != "" {
		metrics.Watch(tm)
		stopPage, err := servePage(tm, reg, o.http, out, stderr)
		if err != nil {
			fmt.Fprintln(stderr, "foreman: the status page:", err)
			return exitUsage
		}
		defer stopPage()
	}

	if o.source != "" {
		stopSource, code := followSource(ctx, tm, o, out, stderr)
		if code != 0 {
			return code
		}
		defer stopSource()
	}
	res, runErr := tm.Run(ctx)
	// A person decides on the page: while it is served and the stories
	// left wait for one, the run goes on as soon as one is decided.
	for runErr == nil && o.waitForPerson && o.http != "" && res.Paused > 0 {
		after := tm.LastSeq() // before the run says it waits: a decision may come at once
		out.printf("%d stories wait for a person: decide on the status page, or with -resolve from another terminal;\n"+
			"the team goes on as soon as one is decided (Ctrl-C stops it; run the same command again to go on)\n", res.Paused)
		if !awaitDecision(ctx, tm, after, res.Paused) {
			break
		}
		res, runErr = tm.Run(ctx)
	}
	var last uint64
	if evs := tm.Events(0); len(evs) > 0 {
		last = evs[len(evs)-1].Seq
	}
	lastSeq <- last
	printed.Wait()

	if st, err := tm.Status(context.WithoutCancel(ctx)); err == nil {
		st.Graph = ""
		out.block(st.Text())
	}
	out.printf("%s\n", res.String())
	if lander != nil {
		st := lander.Stats()
		out.printf("pull requests: %d requests (%d not modified), %d rate-limited, waited %s\n", st.Requests, st.NotModified, st.Limited, st.Waited)
	}
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "foreman: stopped; run the same command again to go on")
		return exitInterrupted
	case errors.Is(runErr, team.ErrBusy):
		fmt.Fprintln(stderr, "foreman:", runErr)
		fmt.Fprintln(stderr, "foreman: watch it with -status, or stop it first")
		return exitFault
	case runErr != nil:
		fmt.Fprintln(stderr, "foreman:", runErr)
		return exitFault
	case res.Merged+res.Skipped == len(res.Stories):
		return exitMerged
	}
	fmt.Fprintf(stderr, "foreman: %d of %d stories merged; the others wait for a person: see the escalations above, then\n"+
		"  foreman -repo %s -resolve ID=retry|resume|skip|abandon [-note ...]   and run again\n",
		res.Merged, len(res.Stories), shellQuote(o.repo))
	return exitNeedsPerson
}

// teamConfig builds the team's Config from the flags and the plan.
func teamConfig(o options, plan team.Plan, stderr io.Writer) (team.Config, error) {
	// A coordinator runs no agent and no gate: its worker hosts do.
	coordinator := o.role == roleCoordinator
	var argv []string
	if o.agent != "" {
		var err error
		if argv, err = agentcmd.SplitCommand(o.agent); err != nil {
			return team.Config{}, fmt.Errorf("-agent: %w", err)
		}
		if len(argv) == 0 {
			return team.Config{}, errors.New("-agent is empty")
		}
	} else if !coordinator && (o.format == "" || o.format == agentcmd.FormatText) {
		return team.Config{}, errors.New("-agent is required (with -format text); e.g. -agent 'my-agent {prompt}'")
	}
	var gates phases.GatePlan
	switch consent := plan.GatesNeedConsent(); {
	case len(o.gates) > 0:
		if consent != nil {
			fmt.Fprintf(stderr, "foreman: note: -gate replaces the stories file's gates; they do not run\n")
		}
	case consent != nil && coordinator:
		// Its worker hosts run the gates, each with its own consent.
	case consent != nil && !o.trustPlanGates:
		return team.Config{}, fmt.Errorf("%w\n  %s holds gates: give -trust-plan-gates to run them, or your own with -gate 'go test ./...'",
			consent, o.plan)
	default:
		gates = plan.UntrustedGates
	}
	if len(o.gates) > 0 {
		var checks []phases.GateCheck
		for _, g := range o.gates {
			words, err := agentcmd.SplitCommand(g)
			if err != nil || len(words) == 0 {
				return team.Config{}, fmt.Errorf("-gate %q: %v", g, orEmpty(err))
			}
			checks = append(checks, phases.GateCheck{Name: g, Argv: words})
		}
		gates.Levels = []phases.GateLevel{{Level: phases.L1Tests, Checks: checks}}
	}
	if len(gates.Levels) == 0 && !coordinator {
		return team.Config{}, errors.New("no gates: every story's work must pass at least one check; give -gate 'go test ./...' (or gates: in the stories file, with -trust-plan-gates)")
	}
	var check []string
	if o.check != "" {
		words, err := agentcmd.SplitCommand(o.check)
		if err != nil || len(words) == 0 {
			return team.Config{}, fmt.Errorf("-merge-check %q: %v", o.check, orEmpty(err))
		}
		check = words
	}
	workers := o.workers
	if workers == 0 {
		workers = plan.Workers
	}
	log := slog.New(slog.DiscardHandler)
	if o.verbose {
		log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	repo, err := filepath.Abs(o.repo)
	if err != nil {
		return team.Config{}, err
	}
	// The team protects its state directory itself; a coordinator's clone
	// (-role coordinator) merges through its own Manager, which must refuse
	// a story that commits .foreman just the same.
	mc := merge.Config{Protected: []string{team.StateDirName}}
	if o.author != "" {
		a, err := mail.ParseAddress(o.author)
		if err != nil {
			return team.Config{}, fmt.Errorf("-author %q: want 'Name <email>': %w", o.author, err)
		}
		mc.Author = merge.Identity{Name: a.Name, Email: a.Address}
	}
	var agent phases.AgentDriver
	if len(argv) > 0 || o.format != "" {
		agent = agentcmd.New(agentcmd.Config{Argv: argv, Format: o.format, Logger: log,
			Sandbox: agentcmd.Sandbox{Mode: o.sandbox, Binds: o.binds, ChecksOffline: o.gatesOffline}})
	}
	if agent == nil && len(check) > 0 {
		// A coordinator runs no agent, but its -merge-check runs the
		// squash's code: in the sandbox an agent would have (the team
		// gives an agent's own to the merge check where it has one).
		mc.CheckSandbox = agentcmd.New(agentcmd.Config{Argv: []string{"true"}, Logger: log,
			Sandbox: agentcmd.Sandbox{Mode: o.sandbox, Binds: o.binds, ChecksOffline: o.gatesOffline, Hide: []string{filepath.Join(repo, team.StateDirName)}}})
	}
	return team.Config{
		Repo:       repo,
		Agent:      agent,
		Gates:      gates,
		Workers:    workers,
		Merge:      mc,
		MergeCheck: check,
		MCP:        team.MCPConfig{Off: !o.mcp},
		Logger:     log,
		// Without -land-refused, the team's default: a refused agent's
		// story waits for a person before it lands.
		LandRefused: o.landRefused,
	}, nil
}

func orEmpty(err error) error {
	if err == nil {
		return errors.New("empty command")
	}
	return err
}

// storiesNotInPlan lists the team's stories the plan file does not hold.
func storiesNotInPlan(have, plan []team.Story) []string {
	in := map[string]bool{}
	for _, s := range plan {
		in[string(s.ID)] = true
	}
	var out []string
	for _, s := range have {
		if !in[string(s.ID)] {
			out = append(out, string(s.ID))
		}
	}
	return out
}

// shellQuote makes s one shell word, for the commands the output suggests.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
