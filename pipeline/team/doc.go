// Package team runs a team of coding agents through a plan of stories on
// one git repository: every layer of Foreman composed into one type.
//
//	t, err := team.New(ctx, team.Config{
//		Repo:    dir,
//		Agent:   agentcmd.New(agentcmd.Config{Format: agentcmd.FormatClaude}),
//		Gates:   phases.Commands(phases.L1Tests, "go vet ./...", "go test ./..."), // the checks every story's work must pass
//		Workers: 4,
//	})
//	if err != nil {
//		return err // a bad Config (a *team.ConfigError), or an agent binary that is not there
//	}
//	defer t.Close()
//	err = t.Add(ctx, team.Story{ID: "US-001", Title: "Parse the config", Body: "..."},
//		team.Story{ID: "US-002", Title: "Validate it", Body: "...", After: []foreman.ItemID{"US-001"}})
//	if err != nil {
//		return err
//	}
//	res, err := t.Run(ctx) // until every story is merged or waits for a person
//	fmt.Println(res)       // "1 merged, 1 paused, ..."; t.Status says why, t.Resolve decides
//
// A flow of the host's own (Config.Flow) is a pipeline.Flow: see
// Example_customFlow.
//
// # How a story is worked
//
// The task graph (pipeline/taskgraph) schedules the stories: one starts
// once every story it comes After has merged, and at most Workers are in
// flight at once. Each moves through a flow on pipeline.Runtime: by default
// the story flow (plan, validate, execute, quality gate, then a squash
// merge), or pipeline.TaskFlow's single build stage, or the host's own, of
// any number of stages (up to 1000) with outcomes of its own (Config.Flow).
// A stage's report is a typed message.Report, decided by the flow's rule
// for its outcome and handed to pipeline.Runtime as it is, in process.
// Every stage is an assignment on the worker pool (worker.Dispatcher): a
// fresh worker per stage, supervised for liveness and progress, within
// budgets. How a stage is performed is its StageKind:
//
//   - StageAgent runs the agent once (plan, validate);
//   - StageBuild runs the run loop (package phases) in the story's worktree:
//     the agent builds, the change since the assignment's base is
//     snapshotted (commits and uncommitted files), checked against the gate
//     plan, and the failures go back to the agent as feedback, up to
//     Config.Limits;
//   - StageGate runs the gate plan itself, PASS or FAIL; a FAIL sends the
//     story back to the build stage with the gates' output, within the
//     flow's quality cycles.
//
// With Config.Reviewer set, a reviewer agent judges every build before it
// completes; a rejection goes back to a fresh builder with the review in
// its prompt (the worker pool's review limit applies). A story that passes
// is squash-merged onto the target branch with a Foreman-Item trailer
// (package merge), exactly once, and its worktree is removed.
//
// # Conflict triage
//
// A squash merge that conflicts (another story landed on the same lines
// since this one started) does not pause the story at once. The team
// rebases the story's branch onto the target in its worktree; when that is
// clean, it runs the gate plan on the rebased change and merges it. When
// the rebase conflicts too, it is aborted (the worktree is left as it was)
// and the story goes back to a fresh builder, once, with the conflicting
// files and both sides of each hunk in its prompt (PromptData.Conflict).
// Only a conflict after that pauses the story, with an escalation naming
// the files. The events EventConflict, EventRebased and
// EventConflictRework follow it, and StoryStatus.Triage says what was
// tried. The rework is counted in the store, so a host that crashes in the
// middle neither gives a story a second rework nor merges it twice.
//
// A plan can be written as a stories file (YAML, see PlanExample) and read
// with LoadPlan or ParsePlan. Its stories are data, but its gates are
// commands the host runs with no agent involved: a stories file with gates
// is code. ParsePlan keeps them apart (Plan.UntrustedGates), and a host
// puts them in Config.Gates only with the consent of the person it runs
// for (Plan.GatesNeedConsent names them; the reference binary asks for
// -trust-plan-gates).
//
// # Where stories come from
//
// Add takes stories from the host. A Source lists them (a Plan is one;
// pipeline/team/ghsource makes a GitHub repository's labelled issues
// one), and Follow keeps the team in step with it: Follower.Sync adds the
// stories it lists and drops, with Drop, the ones it withdraws before
// they start (EventStoryDropped; skipped or abandoned); Follower.Flush
// tells a source that is a Reporter when a story starts, pauses (with
// its cause) and merges, from the event log, remembering in the store how
// far it got, each report under a key the source writes once; Run does
// both on the clock.
//
// # Where stories land
//
// A story that passes its flow is squash-merged onto the local target
// branch by default. A Config.Merger that is a pipeline.Lander lands it
// elsewhere while the Run goes on: pipeline/team/ghland opens a pull
// request, waits for its checks and reviews and merges it; a failing
// check or a review requesting changes sends the story back to its
// builder with the check's log tail or the review as feedback (within
// the flow's quality cycles; an EventLanding records it), and a pull
// request a person closes pauses the story.
//
// # What an agent gets, and how it reports
//
// Every agent runs in the story's worktree with, in its environment,
// FOREMAN_ITEM (the story id), FOREMAN_STAGE (the stage's 0-based index in
// the flow: 0 plan, 1 validate, 2 execute, 3 quality in the story flow),
// FOREMAN_ROLE (the stage's role: planner, validator, builder by default;
// the quality-gate stage runs the gate plan, not an agent),
// FOREMAN_WORKER, FOREMAN_ASSIGNMENT, FOREMAN_RESULT and
// FOREMAN_REPORT_KEY; its prompt (DefaultPrompt) says the same in words and
// ends with an assignment block (pipeline.AssignmentBlock), after which a
// driver may add the previous iteration's feedback (agentcmd does, under
// its own heading).
//
// An agent of a plan or validation stage reports by writing a Report as
// JSON to the file named by FOREMAN_RESULT, carrying the assignment id it
// was given (FOREMAN_ASSIGNMENT). The stage's canonical line
// (pipeline/message: the story flow's line for stages 0-3, a Report line
// "Stage {N} REPORT for {id}: {OUTCOME}…" for any stage) at the end of its
// output is the fallback, followed by
// "[assignment <FOREMAN_ASSIGNMENT> key <FOREMAN_REPORT_KEY>]". Such an
// agent that fails or says nothing pauses its story with the cause: exit
// status, the tail of its stderr.
//
// A build agent need not report: its stage completes when the run loop saw
// changes since the assignment's base (commits or uncommitted files) that
// pass the gates, whatever the agent says or its exit status (an agent
// that exits non-zero still has its work snapshotted and verified: git's
// "nothing to commit" after a restart ends no build), and fails, pausing
// the story with the gates' output and the agent's last exit status and
// stderr, when the run loop's limits end first; a Report with outcome
// "error" adds the agent's own words to that cause. An agent stopped by a
// timeout or a signal, or whose own output reports an error, fails its
// iteration at once.
//
// While it runs, the team also serves its agents an MCP server (Config.MCP,
// on by default; phases/agentmcp) on the loopback interface, named in
// their environment (FOREMAN_MCP_URL, and FOREMAN_MCP_TOKEN, the bearer
// token of the agent's own assignment) and, for Claude Code and Codex run
// by agentcmd, in their own MCP configuration. Its report tool takes the
// same fields as the result file and answers at once: a report naming
// another assignment than the token's is refused, and a report from the
// story's current assignment is checked (its outcome must be the stage's;
// a build reported complete must show commits or changes in the worktree
// since the assignment's base, else it is not taken) and becomes the
// stage's first evidence, before the result file and the printed line,
// which stay as fallbacks. A report from a replaced worker
// is stale: counted where the story flow counts stale messages (and in
// Team.MCPStats) and ignored. Its status tool says what the assignment
// expects.
//
// What agents print is theirs: the team keeps their reports, not their
// output (an agentcmd driver's Config.Logger logs each execution's end).
// Squash commits are authored by Config.Merge.Author, by default
// "Foreman <foreman@localhost>".
//
// # Each agent proves its assignment
//
// Assignment ids are easy to guess (<story>-a<n>), so an agent is believed
// only with what its own assignment alone was given. Its result file is
// <StateDir>/results/<assignment>-<128 bits, hex>/result.json, in a
// directory the team makes (0700) before the agent starts, names in
// phases.AgentRequest.Writable (a driver that confines its agent lets it
// write there and no further), and removes once it has read the file; a
// Run clears what earlier runs left. Its report key, and that directory's
// name, are derived from a secret the team keeps in its store, so that an
// assignment run again after a restart of its host finds both as before.
// Its MCP token proves that assignment to the MCP server, until its stage
// ends. A printed line is taken only with the assignment's id and key,
// which no story body, file, tool answer or other agent can hold: the
// prompt gives the key on a line of its own and its example line a
// placeholder, so a prompt echoed back is no report. What an agent tries
// beyond its assignment (an MCP report or status query for another, its
// token after its stage, a result file naming another, printed report
// lines without the proof) is refused, never applied, recorded as an
// EventRefused and counted in its story's status (StoryStatus.Refused).
// Against an agent that runs as the host's user without a sandbox, which
// can read the team's store and the other agents' processes, these
// proofs keep out what reaches an agent, not the agent itself; a driver
// that confines its agent keeps the rest of the state directory out of
// its reach. An agentcmd driver's sandbox also hides the other stories'
// worktrees and the main checkout (whose ignored files, a .env, are the
// host's), each hidden place (the state directory, the worktree root,
// whose decoy repeats the other worktrees' names, the main checkout, the
// host's home) a decoy the agent may write and nothing real behind it;
// the repository's git directory is the agent's private copy, its object
// directory the agent's own, borrowing the real one (only objects that are
// what their names say are carried back). What its driver refused or repaired once the agent
// was gone (a write into a hidden place, a read of a secret's usual
// place there or its removal, named; a listing of a hidden place where the
// host runs as root, which the driver tells from the host's own; a ref moved, a tag, a config or hook written in its
// copy; its HEAD moved off its branch; an output flood stopped:
// phases.StreamSandbox) is an EventRefused too. The real object store is
// readable: an agent that goes looking can read other stories' committed or
// staged work (and the other worktrees' git admin directories, read-only).
// docs/containment.md records the attacks tried and their outcomes.
//
// # Durable and resumable
//
// The team's state (the task graph, each story's flow state and pending
// effects, the plan, a person's decisions) lives in a store.Store: by
// default a SQLite database in <Repo>/.foreman, which git ignores. Every
// decision is persisted before it is acted on, and every action is
// idempotent, so a host killed at any point and started again with the
// same Config finishes the plan: Run carries out what was decided but not
// done, gives the stages that were in flight a worker again (an agent the
// dead host left running in a worktree is stopped first, through
// agentcmd's leases, kept in <Repo>/.foreman/leases, or the host its
// environment names when it had no lease yet, and the git locks it
// left are cleared; a git command it left running, such as a worktree
// being added, is let finish first, as merge.New does), never redoes a
// finished stage and never merges a
// story twice. A plan already merged finishes at once. A stage that was in
// flight runs again from its start, so its agent may find its own earlier
// work already committed in the worktree (the build still counts it: its
// starting point is recorded). One host runs a team at a time: Run holds a
// lock in the state directory, and a second one fails with ErrBusy.
//
// # State that no commit can touch
//
// The team's state directory (<Repo>/.foreman: the database, the agents'
// result files, their leases) and the story worktrees (<Repo>/.worktrees)
// live in the repository's working tree, ignored by git, and git deletes
// ignored files when it checks out a commit that puts a file in their
// place. So no story's work may reach them: a story whose branch adds a
// file named .foreman or .worktrees, anything inside them, or a symbolic
// link in their place, or whose uncommitted work would add one when the
// team commits it, is not merged. It pauses with the cause (merge's
// *ProtectedPathError, in its escalation, its status and its
// EventStoryPaused, naming the paths), nothing is committed or checked out
// for it, and the other stories go on. A person decides what to do with it
// (Resolve). A state directory elsewhere (Config.StateDir) is protected
// the same way when it is inside the repository, and the merge never lets
// git delete or overwrite any ignored file in main's checkout. New refuses
// a state directory or worktree root that is a symbolic link, is reached
// through one, or is tracked by git (ErrInvalidConfig naming the field,
// matching merge.ErrUnsafeDir), before it writes anything there: a
// repository that tracks .foreman as a link would have the team write its
// database wherever the link points.
//
// # A person in the loop
//
// Status reports every story (state, stage, worker and how long it has
// worked, the last result, the escalation of a paused one and the worker
// pool's cause, the tokens and money its agents spent) and the dependency
// graph, as text (Status.Text) or JSON, with the totals spent. Spending is
// what the agent CLIs report (agentcmd reads Claude's and Codex's usage),
// recorded per story in the store and as EventUsage events.
// ReadStatus gives the same from another process, without an agent and
// without writing (its Containment is what the last Run recorded as it
// started: how that Run's agents were contained). The team keeps every story's status as the records it
// is made of are written, and writes each story's status (team.view) in
// the same store write as those records, so Status costs the stories it
// shows, StatusOf one story and Summary a few counts whatever the size of
// the plan, and ReadStatus reads one list of small records that is always
// the store's current state; a write by another process (a Resolve from
// another terminal) is noticed by the next Status. For a plan of more
// than 200 stories Status.Graph is a summary rather than every story's
// line. Events and Subscribe give the typed event stream,
// numbered by Seq and kept in the store, so a reader that comes back with
// the last Seq it saw misses nothing, across restarts too. Resolve takes a
// person's decision about a paused story: Retry its stage, Resume after a
// manual fix, Skip it, or Abandon it.
//
// # Agents as they behave
//
// An agent that hits its provider's rate limit is not a failure: the
// worker pool backs off until the reset and runs the stage again, and the
// team runs fewer agents at once while limits persist. An agent that asks
// a question or is refused a permission pauses its story with the
// question; nothing answers it for the person.
//
// # Errors
//
// New refuses a bad Config (ErrInvalidConfig, with the field) and an
// agent that cannot start (ErrAgentUnavailable), checking each agent it
// takes (Config.Agent, each Stage.Agent, Reviewer) before any work: a
// missing binary on PATH or at an absolute path, and an agentcmd driver
// whose Sandbox.Mode requires a sandbox where none is available (matching
// agentcmd.ErrNoSandbox too, with the driver's reason: bwrap not found, or
// unable to create one). A relative ./path runs from each story's
// worktree, and a missing one pauses the story with the workspace it was
// looked up in. Add refuses an invalid plan whole (ErrInvalidStory,
// ErrStoryExists). Run's error is a system fault (store, git, context);
// stories that pause are part of its Result.
//
// # Around the team
//
// Packages beside this one, each optional: teamweb serves the team's live
// status page and a person's decisions as an http.Handler; teammetrics
// exports Prometheus metrics from its events; teamnotify sends escalations
// and finished runs to a webhook, signed; teamsim simulates a whole team
// deterministically (seeded agents, crashes, conflicts) to test flows and
// agent models against the team's invariants. examples/foreman is a
// reference binary wiring them all.
package team
