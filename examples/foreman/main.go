// Command foreman runs a team of coding agents through a plan of stories on
// your repository: each story is planned, validated, built in a git
// worktree of its own, checked against your gates and squash-merged onto
// main, one commit per story, in dependency order.
//
//	foreman -repo . -plan stories.yaml -format claude -gate 'go test ./...'
//	foreman -repo . -plan stories.yaml -agent 'my-agent --prompt {prompt}' -workers 2
//	foreman -repo . -status                      # how it stands (also while it runs)
//	foreman -repo . -resolve US-002=retry -note 'the flaky test is fixed on main'
//
// The team keeps its state in <repo>/.foreman: stop it with Ctrl-C (or
// kill it) and run the same command again to go on where it stopped. A
// story that needs a person pauses with the reason; -resolve says what to
// do about it. foreman -h shows a complete stories file.
//
// The exit status says how the plan stands: 0 every story merged (or
// skipped by a person), 3 stories wait for a person (paused, abandoned or
// blocked behind one), 1 a system fault (git, the store, an agent that
// cannot start), 2 bad usage or a bad stories file, 130 interrupted.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/team"
)

// Exit statuses.
const (
	exitMerged      = 0   // every story merged or skipped
	exitFault       = 1   // a system fault
	exitUsage       = 2   // bad flags or a bad stories file
	exitNeedsPerson = 3   // stories wait for a person
	exitInterrupted = 130 // Ctrl-C or SIGTERM
)

// options are the command line.
type options struct {
	repo      string
	plan      string
	source    string
	githubAPI string
	land      string
	// token is $GITHUB_TOKEN, taken out of the environment (-source, -land pr).
	token          string
	agent          string
	format         agentcmd.Format
	workers        int
	gates          []string
	trustPlanGates bool
	landRefused    bool
	check          string
	author         string
	verbose        bool
	http           string
	notify         string
	// mcp serves the team's MCP report tool to the agents (-mcp=false:
	// they report through the result file or the printed line).
	mcp bool

	role       string
	db         string
	remote     string
	leaseTTL   time.Duration
	leaseRenew time.Duration
	leaseRetry time.Duration
	silence    time.Duration
	workerRole string

	status  bool
	json    bool
	resolve string
	note    string
	// waitForPerson keeps a run whose stories all wait for a person
	// serving its page until one is decided.
	waitForPerson bool
	// sandbox and binds configure the agents' OS sandbox.
	sandbox agentcmd.SandboxMode
	binds   []agentcmd.Bind
	// gatesOffline cuts the contained gates off the network.
	gatesOffline bool
}

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		fmt.Fprintln(os.Stderr, "\nforeman: stopping: the agents get SIGTERM; run the same command again to go on (Ctrl-C again exits at once)")
		cancel()
		<-signals
		fmt.Fprintln(os.Stderr, "foreman: exiting at once; run the same command again to go on")
		os.Exit(exitInterrupted)
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole command, for main and the tests: it returns the exit
// status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err == flag.ErrHelp {
		return exitMerged
	}
	if err != nil {
		fmt.Fprintln(stderr, "foreman:", err)
		return exitUsage
	}
	switch {
	case o.status:
		return showStatus(ctx, o, stdout, stderr)
	case o.resolve != "":
		return resolve(ctx, o, stdout, stderr)
	case o.role == roleWorker:
		return runWorkerHost(ctx, o, stdout, stderr)
	}
	return runTeam(ctx, o, stdout, stderr)
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	o := options{}
	fs := flag.NewFlagSet("foreman", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { usage(fs) }
	fs.StringVar(&o.repo, "repo", ".", "the git repository to work on (its main worktree); stories merge onto its main branch")
	fs.StringVar(&o.plan, "plan", "", "the stories file (YAML; -h shows one); required to run, unless -source")
	fs.StringVar(&o.source, "source", "", "take the stories from an issue tracker instead of -plan: github:OWNER/REPO?label=foreman (the open\nissues with the label; the token in $GITHUB_TOKEN, which no agent or gate gets); needs -gate")
	fs.StringVar(&o.land, "land", "local", landUsage)
	fs.StringVar(&o.githubAPI, "github-api", os.Getenv("GITHUB_API_URL"), "with -source github:... and -land pr: the REST API's base URL (GitHub Enterprise: https://HOST/api/v3/;\ndefault $GITHUB_API_URL, else https://api.github.com/)")
	fs.StringVar(&o.agent, "agent", "", "the agent command, split like a shell would; {prompt} is replaced by the stage's prompt\n(default for -format claude, codex or gemini: that CLI's own non-interactive command); not needed with -role coordinator,\nwhose worker hosts run the agent and the gates")
	fs.Func("format", "the agent's output format: text, claude, codex or gemini (default text)", func(s string) error {
		f, err := agentcmd.ParseFormat(s)
		o.format = f
		return err
	})
	fs.IntVar(&o.workers, "workers", 0, "stories in flight at once (default: the stories file's workers, else 4)")
	fs.Func("gate", "a check every story's work must pass, run in its worktree, e.g. 'go test ./...' (repeatable;\nreplaces the stories file's gates)", func(s string) error {
		o.gates = append(o.gates, s)
		return nil
	})
	fs.BoolVar(&o.landRefused, "land-refused", false, "land a story whose agents were refused (a write outside its worktree, another story's\nbranch moved, a report for another assignment) like any other; without it such a story\nwaits for a person before it lands (-resolve ID=resume lands it)")
	fs.BoolVar(&o.trustPlanGates, "trust-plan-gates", false, "run the stories file's gates: they are commands this host runs, with no agent involved, so a\nstories file with gates is code; without this flag (or -gate) a file with gates is refused")
	fs.StringVar(&o.check, "merge-check", "", "a command run on each story's squash commit, in a checkout of it, before it lands on main,\ne.g. 'go build ./...'; when it fails the story pauses with its output")
	fs.StringVar(&o.author, "author", "", "author of the squash commits, 'Name <email>' (default Foreman <foreman@localhost>)")
	fs.BoolVar(&o.verbose, "v", false, "log the library's warnings to stderr")
	fs.StringVar(&o.http, "http", "127.0.0.1:0", "serve the live status page (and its actions) while the team runs, at this address; the URL with its\naccess token is printed at start (every read and action needs the token; the page answers only requests\nnaming its address or a loopback name); an address beyond this machine gets a warning; empty: no page")
	fs.BoolVar(&o.mcp, "mcp", true, "serve the agents the team's MCP report tool (Claude Code, Codex and Gemini CLI are wired to it);\n-mcp=false: they report through the result file or the printed line only")
	fs.StringVar(&o.notify, "notify", "", "POST escalations and the run's end as JSON to this URL (a webhook), signed with the secret in\n$"+envNotifySecret+" (HMAC-SHA256; see go doc pipeline/team/teamnotify)")
	fs.StringVar(&o.role, "role", "", "run one part of a team spread over hosts: coordinator (campaigns for the lease, leads the team) or\nworker (performs stages); needs -db and -remote, and -repo is then this host's clone of -remote")
	fs.StringVar(&o.db, "db", "", "with -role or -status: the team's PostgreSQL database, postgres://...")
	fs.StringVar(&o.remote, "remote", "", "with -role: the shared git repository every host fetches from and pushes to (URL or path)")
	fs.DurationVar(&o.leaseTTL, "lease-ttl", 10*time.Second, "with -role coordinator: how long the leader's lease lasts without renewal (failover time)")
	fs.DurationVar(&o.leaseRenew, "lease-renew", 0, "with -role coordinator: how often the leader renews its lease (default: a third of -lease-ttl)")
	fs.DurationVar(&o.leaseRetry, "lease-retry", 0, "with -role coordinator: how often a coordinator that does not lead checks whether the lease is free;\nit also checks when the lease runs out (default: half of -lease-ttl)")
	fs.DurationVar(&o.silence, "host-silence", 30*time.Second, "with -role coordinator: how long a stage may go without a word from its worker host")
	fs.StringVar(&o.workerRole, "worker-role", "", "with -role coordinator: the database role worker hosts log in with (the user in their -db); the\ncoordinator grants it what a worker host needs and nothing more, and refuses a role that can do more\n(see docs/multihost.md); default: none granted (hosts with the coordinators' role can write anything)")
	fs.BoolVar(&o.status, "status", false, "print how the plan stands and exit (works while another foreman runs the team; with -db, a team\nspread over hosts, and which coordinator leads it)")
	fs.BoolVar(&o.json, "json", false, "with -status: print the status as JSON")
	fs.StringVar(&o.resolve, "resolve", "", "decide about a paused story: ID=retry|resume|skip|abandon")
	fs.StringVar(&o.note, "note", "", "with -resolve: a note the story's next agent reads")
	fs.Func("sandbox", "run each agent in an OS sandbox (bubblewrap): auto (where it works; -status says), required, or off\n(default auto, or $FOREMAN_SANDBOX)", func(s string) error {
		switch m := agentcmd.SandboxMode(s); m {
		case agentcmd.SandboxAuto, agentcmd.SandboxOff, agentcmd.SandboxRequired:
			o.sandbox = m
			return nil
		}
		return fmt.Errorf("want auto, required or off")
	})
	fs.BoolVar(&o.gatesOffline, "gates-offline", false, "run the gates and -merge-check (which run the story's code, in the agents' sandbox) without a network:\na test the agent wrote cannot send what it reads anywhere; what they build from must be in a bound cache")
	fs.Func("bind", "a directory the sandboxed agents (and the gates, which run in the same sandbox) may also read and\nwrite, e.g. a shared cache (repeatable; PATH:ro for read-only)", func(s string) error {
		b := agentcmd.Bind{Source: s, Writable: true}
		if p, ok := strings.CutSuffix(s, ":ro"); ok {
			b = agentcmd.Bind{Source: p}
		}
		abs, err := filepath.Abs(b.Source)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err != nil {
			return err
		}
		b.Source = abs
		o.binds = append(o.binds, b)
		return nil
	})
	fs.BoolVar(&o.waitForPerson, "wait-for-person", stdinIsTerminal(), "when every story left waits for a person and the status page is served, keep serving it and go on\nas soon as one is decided there (or with -resolve from another terminal); Ctrl-C stops, resumably\n(default: on when standard input is a terminal)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q (flags only; -h for help)", fs.Arg(0))
	}
	if o.status && o.resolve != "" {
		return o, fmt.Errorf("-status and -resolve: one at a time")
	}
	if o.note != "" && o.resolve == "" {
		return o, fmt.Errorf("-note goes with -resolve")
	}
	if o.json && !o.status {
		return o, fmt.Errorf("-json goes with -status")
	}
	if o.source != "" && o.plan != "" {
		return o, fmt.Errorf("-plan and -source: one at a time")
	}
	if !o.status && o.resolve == "" && o.plan == "" && o.source == "" {
		return o, fmt.Errorf("-plan is required (a stories file; foreman -h shows one), or -source github:OWNER/REPO")
	}
	switch o.role {
	case "":
		if o.resolve != "" && o.db != "" {
			return o, fmt.Errorf("-resolve with -db: a team over PostgreSQL is resolved on its leading coordinator's page (-http)")
		}
		if (o.db != "" && !o.status) || o.remote != "" {
			return o, fmt.Errorf("-db and -remote go with -role coordinator or -role worker (or -db with -status)")
		}
	case roleCoordinator, roleWorker:
		if o.db == "" || o.remote == "" {
			return o, fmt.Errorf("-role %s needs -db postgres://... and -remote (the shared repository)", o.role)
		}
		if o.status || o.resolve != "" {
			return o, fmt.Errorf("-role runs the team; for its status give -status -db alone, and resolve on the leader's page (-http)")
		}
	default:
		return o, fmt.Errorf("-role %q: coordinator or worker", o.role)
	}
	if o.workerRole != "" && o.role != roleCoordinator {
		return o, fmt.Errorf("-worker-role goes with -role coordinator (a worker host gives its role in -db)")
	}
	if _, _, err := parseLand(o); err != nil {
		return o, err
	}
	if o.workers < 0 {
		return o, fmt.Errorf("-workers %d: at least 1", o.workers)
	}
	return o, nil
}

func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprint(w, `foreman runs a team of coding agents through a plan of stories on a git
repository: each story is planned, validated, built in a worktree of its own,
checked against the gates and squash-merged onto main, one commit per story,
in dependency order. State lives in <repo>/.foreman: after Ctrl-C or a crash,
run the same command again to go on.

  foreman -repo DIR -plan stories.yaml -format claude -gate 'go test ./...'
  foreman -repo DIR -plan stories.yaml -agent 'my-agent {prompt}' -workers 2
  foreman -repo DIR -status [-json]
  foreman -repo DIR -resolve US-002=retry|resume|skip|abandon [-note 'what changed']

The agent reports each stage by writing JSON to the file named by
$FOREMAN_RESULT, with the assignment id from $FOREMAN_ASSIGNMENT (the prompt
says the same); $FOREMAN_ITEM is the story, $FOREMAN_STAGE the stage number
and $FOREMAN_ROLE its role. Fields the team does not know are ignored.

  stage 0, planner:   {"assignment": "<id>", "outcome": "complete", "tasks": 3, "score": 4, "summary": "the plan"}
                      (score: plan quality 0-4)
  stage 1, validator: {"assignment": "<id>", "outcome": "go", "score": 9}
                      or "no-go" with a "summary" saying why (score: readiness 0-10)
  stage 2, builder:   {"assignment": "<id>", "outcome": "complete", "summary": "what was done"}
                      (taken only when the story's worktree has changes that pass the gates)
  any stage:          {"assignment": "<id>", "outcome": "error", "summary": "what went wrong"}
  stage 3 runs the -gate commands; no agent.

Exit status: 0 every story merged (or skipped), 3 stories wait for a person,
1 a system fault, 2 bad usage or stories file, 130 interrupted.

Flags:
`)
	fs.PrintDefaults()
	fmt.Fprint(w, "\nA complete stories file:\n\n"+indent(team.PlanExample, "  "))
}

func indent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "")
}
