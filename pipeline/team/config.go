package team

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/worker"
)

// DefaultWorkers is how many stories are in flight at once by default.
const DefaultWorkers = 4

// StateDirName is the directory, inside the repository, that holds the
// team's state by default (git-ignored through .git/info/exclude).
const StateDirName = ".foreman"

// Config configures a Team. Repo, Agent and Gates are required (Agent and
// Gates not with Remote); the zero value of every other field means its
// documented default.
type Config struct {
	// Repo is the git repository the team works on: any path inside it
	// (a subdirectory, a linked worktree); the team works from its main
	// worktree. Stories are built in worktrees under
	// <Repo>/.worktrees and squash-merged onto Merge.TargetBranch
	// (default main). Required.
	Repo string
	// Agent performs every stage that runs an agent (unless Stages gives a
	// stage its own): for example
	// agentcmd.New(agentcmd.Config{Format: agentcmd.FormatClaude}). An agent
	// with a Check() error method (agentcmd.Driver has one) is checked by
	// New, so a missing binary, or a sandbox its Sandbox.Mode requires
	// where none is available (agentcmd.ErrNoSandbox, with the driver's
	// reason), is an error at once (a program named by a
	// relative path with a slash, ./agent.sh, runs from each story's
	// worktree and cannot be checked before: give an absolute path for a
	// command outside the repository). An *agentcmd.Driver
	// without a LeaseDir gets one under StateDir, so that an agent left
	// running by a killed host is stopped before another starts in its
	// worktree; its sandbox also hides (Sandbox.Hide, named) the state
	// directory, the worktree root (mirrored: Sandbox.Mirror) and the main
	// checkout. It may be nil when Remote is set or every stage that runs
	// an agent has one of its own (Stage.Agent). Required.
	Agent phases.AgentDriver
	// Gates is the gate plan every story's work must pass: in the build
	// stage after each iteration, and again in the quality-gate stage. It
	// must have at least one check, except when Remote is set or no stage
	// builds or runs the gates. Required.
	Gates phases.GatePlan
	// QualityGates is the quality-gate stage's plan. Default: Gates, which
	// the stage then does not run again on a change the build stage has
	// already verified with them (same content, measured from the same
	// base); it runs them on anything else.
	QualityGates phases.GatePlan
	// Workers is how many stories are in flight at once; each runs one
	// stage at a time. Negative is an error. Default: 4 (DefaultWorkers).
	Workers int

	// Flow is the stages every story goes through. pipeline.TaskFlow is a
	// single build stage. A flow has any number of stages up to
	// message.MaxStage+1 (1000), and each rule's outcome is a word a report
	// can carry (message.ValidOutcome: "GO", "NEEDS_WORK"), which an agent
	// reports in any case ("go"). A stage's report is decided by its rules:
	// the score is in 0..Rule.MaxScore, a task count is kept where the rule
	// checks tasks, and the report's summary is the details of an outcome
	// that does not move the story on. Default: pipeline.StoryFlow(Story)
	// (plan, validate, execute, quality gate, then merge).
	Flow *pipeline.Flow
	// Stages says how each stage of Flow is performed, by index. Default:
	// DefaultStages(Flow).
	Stages []Stage

	// Store keeps the team's state. Default: a SQLite database,
	// StateDir/foreman.db, opened by New and closed by Close.
	Store store.Store
	// StateDir holds the default store, the agents' result files and the
	// agent leases. It must not be inside a story worktree. Inside the
	// repository it must be a plain directory (not a symbolic link, nor
	// reached through one) that git does not track, else New refuses it
	// (ErrInvalidConfig, matching merge.ErrUnsafeDir); the team protects
	// it, with the worktree root, from every story's commits
	// (merge.Config.Protected). Default: <main worktree of Repo>/.foreman
	// (StateDirName).
	StateDir string

	// Limits bound each build stage's run loop (iterations, wall clock,
	// tokens, cost). Default: phases' defaults for each zero field (see
	// phases.Limits).
	Limits phases.Limits
	// Story sets the default story flow's limits (validation retries,
	// quality cycles, crash budget); ignored when Flow is set. Default:
	// pipeline.StoryConfig's defaults.
	Story pipeline.StoryConfig
	// Worker configures the worker pool every stage runs on: liveness,
	// progress and attempt timeouts, budgets, escalations. The team sets
	// MaxWorkers (from Workers), Agent, Clock and Logger. Default:
	// worker.Config's defaults for the rest.
	Worker worker.Config
	// Merge configures worktrees and merges; the team sets Repo, adds
	// StateDir to Protected, and gives it the team's Clock and Logger when
	// it has none. The merge request commits work an agent left
	// uncommitted. Default: merge.Config's defaults for the rest (stories
	// branch from and land on main).
	Merge merge.Config
	// MergeCheck, when set, is a command run on the squash commit before
	// the target branch moves (merge.Request.Check), contained like the
	// gates (Merge.CheckSandbox, when not set, is the team's first
	// agentcmd driver) and bounded by Merge.CheckTimeout (default 30 min).
	// Default: none (no check).
	MergeCheck []string

	// Remote, when set, performs every stage somewhere else (another
	// process, another host): the worker pool runs it as each worker's
	// agent in place of performing the stage here, and it must return the
	// stage's report line as the result's final message, as the agent
	// NewStageAgent returns does on the host that performs it. Agent and
	// Gates are then optional here (the hosts performing the stages have
	// them) and not checked: a coordinator needs no agent program
	// installed. Default: none (nil: stages are performed in this
	// process).
	Remote phases.AgentDriver
	// Worktrees, when set, replaces the team's own story worktrees (the
	// merge.Manager of Repo): a coordinator whose stages run on other hosts
	// makes no worktrees of its own (see merge/gitremote). Default: the
	// team's merge.Manager of Repo.
	Worktrees pipeline.Worktrees
	// Merger, when set, replaces the team's own merges (the merge.Manager
	// of Repo squash-merging with Merge and MergeCheck, with conflict
	// triage): a coordinator whose stages run on other hosts merges what
	// the hosts pushed to a shared repository (see merge/gitremote), and a
	// conflict there pauses the story without triage. A Merger that is a
	// pipeline.Lander (pipeline/team/ghland: through pull requests) lands
	// while the Run goes on; its Watch runs during every Run. Default: the
	// team's merge.Manager of Repo, with conflict triage.
	Merger pipeline.Merger
	// LandRefused lands a story whose agents were refused (EventRefused:
	// a write outside its worktree, another story's branch moved, a report
	// for another assignment, ...) like any other. An agent that tried to
	// reach beyond its story may have left harm inside it too, where
	// nothing refuses it. Default: false: such a story pauses before it
	// lands, its refusals the cause, until a person resolves it (Resume
	// lands it as it is, Retry runs its last stage again, Abandon gives it
	// up); the stories beside it go on.
	LandRefused bool

	// Snapshotter records a build's change in the run loop. Default:
	// gitsnap with Merge's Git and GitEnv.
	Snapshotter phases.Snapshotter
	// Verifier runs the gate plans, in the run loop and in the
	// quality-gate stage. Default: gates.NewVerifier with the team's Clock
	// and Logger, its Sandbox the team's first agentcmd driver (the gates
	// run the story's code: each check in that agent's sandbox, what it
	// refused counted as the story's refusals), none where no stage's
	// agent is one.
	Verifier phases.Verifier
	// Feedback turns failed gates into the build's next prompt. Default:
	// gates.NewFeedbackGenerator(gates.FeedbackConfig{}).
	Feedback phases.FeedbackGenerator

	// Reviewer, when set, reviews every build stage's work before the
	// stage completes (after the run loop's gates passed): it writes a
	// Report with outcome "approve" or "reject" (Summary: what to change).
	// A rejection gives the build to a fresh worker with every review's
	// feedback in its prompt (the worker pool's MemoryContext) and the next
	// Attempt; the rejection after Worker.MaxReviewRejections (default 2)
	// pauses the story with the last review. New checks it as it checks
	// Agent. Default: none (nil: no review).
	Reviewer phases.AgentDriver
	// ReviewerRole names the Reviewer in prompts and events. Default:
	// "reviewer".
	ReviewerRole string

	// MCP configures the MCP server the team serves its agents during a
	// Run (on by default): a report tool (outcome, summary, score, the
	// assignment id) and a status tool. Each agent gets a bearer token of
	// its assignment's own, which works for that assignment only and until
	// its stage ends. A report is taken only from the story's current
	// assignment, a build's completion only with a change in the worktree;
	// the result file and the printed line stay as fallbacks. Agents get
	// FOREMAN_MCP_URL and FOREMAN_MCP_TOKEN in their environment, and
	// agentcmd wires Claude Code and Codex to it. Default: on, on a free
	// loopback port.
	MCP MCPConfig

	// Prompt renders a stage's task for its agent. The assignment block
	// the worker pool needs is appended to it. Default: DefaultPrompt.
	Prompt func(PromptData) string

	// OnEvent, when set, receives every event as it is recorded, on the
	// goroutine that records it: it must not block. Subscribe is the
	// buffered alternative. Default: none (nil: not called).
	OnEvent func(Event)
	// Clock drives every deadline. Default: the wall clock.
	Clock foreman.Clock
	// Logger receives the team's and its layers' logs. Default: none (nil
	// discards them).
	Logger *slog.Logger
}

// StageKind is how a stage is performed.
type StageKind uint8

const (
	// StageAgent runs the stage's agent once; its report is the outcome
	// (planning, validation, review).
	StageAgent StageKind = iota + 1
	// StageBuild runs the run loop in the story's worktree: the agent
	// builds, the change is snapshotted and verified against the gate plan,
	// failures go back to the agent as feedback, up to Limits. It completes
	// only when there are commits or changes since the assignment's base and
	// they pass the gates.
	StageBuild
	// StageGate runs the gate plan in the story's worktree itself (no
	// agent): PASS, or FAIL with the failing checks as the next round's
	// feedback.
	StageGate
)

func (k StageKind) String() string {
	switch k {
	case StageAgent:
		return "agent"
	case StageBuild:
		return "build"
	case StageGate:
		return "gate"
	}
	return fmt.Sprintf("StageKind(%d)", uint8(k))
}

// Stage says how one stage of the flow is performed.
type Stage struct {
	Kind StageKind
	// Role is the host's word for who performs the stage ("planner",
	// "engineer", "reviewer"), used in prompts, the status, events and the
	// agent's FOREMAN_ROLE; default "planner", "validator", "builder" and
	// "quality gate" for the stages named plan, validate, execute and
	// quality, else the flow's stage name.
	Role string
	// Agent performs the stage (StageAgent, StageBuild); default
	// Config.Agent.
	Agent phases.AgentDriver
	// Instructions say what the stage asks of the agent; default
	// DefaultInstructions for the stage.
	Instructions string
}

// defaultRoles name who performs the stages of the flows pipeline ships,
// as an agent's prompt says it: "You are the planner for story ...".
var defaultRoles = map[string]string{"plan": "planner", "validate": "validator", "execute": "builder", "quality": "quality gate"}

// DefaultStages returns how the team performs flow's stages: for the story
// flow, plan and validate are agent stages, execute is the build stage and
// the quality gate runs the gate plan; for any other flow, the last stage
// is a build stage and the others agent stages. A nil flow is the story
// flow with its default limits, as Config.Flow's zero value is.
func DefaultStages(flow *pipeline.Flow) []Stage {
	if flow == nil {
		flow = pipeline.StoryFlow(pipeline.StoryConfig{})
	}
	out := make([]Stage, len(flow.Stages))
	for i, s := range flow.Stages {
		out[i] = Stage{Kind: StageAgent, Role: s.Name}
		switch {
		case flow.Name == "story" && s.Name == "execute":
			out[i].Kind = StageBuild
		case flow.Name == "story" && s.Name == "quality":
			out[i].Kind = StageGate
		case flow.Name != "story" && i == len(flow.Stages)-1:
			out[i].Kind = StageBuild
		}
		if r, ok := defaultRoles[s.Name]; ok {
			out[i].Role = r
		}
	}
	return out
}

// ErrInvalidConfig is matched by *ConfigError.
var ErrInvalidConfig = errors.New("team: invalid config")

// ErrAgentUnavailable is matched when New finds that the agent cannot
// start (its Check failed); the error says why.
var ErrAgentUnavailable = errors.New("team: agent cannot start")

// ConfigError names the Config field that is wrong and why.
type ConfigError struct {
	Field  string
	Reason string
	// Err is the underlying error when another package found the problem
	// (merge.ErrUnknownBranch for a target branch the repository lacks).
	Err error
}

func (e *ConfigError) Error() string { return "team: Config." + e.Field + ": " + e.Reason }

// Is matches ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns Err.
func (e *ConfigError) Unwrap() error { return e.Err }

// withDefaults checks cfg and fills its defaults (except the services that
// need I/O, which New makes).
func (cfg Config) withDefaults() (Config, error) { return cfg.defaults(true) }

// defaults checks cfg and fills its defaults; without work (a status
// reader) it requires no agent and no gate plan.
func (cfg Config) defaults(work bool) (Config, error) {
	if cfg.Repo == "" {
		return cfg, &ConfigError{Field: "Repo", Reason: "required"}
	}
	repo, err := filepath.Abs(cfg.Repo)
	if err != nil {
		return cfg, &ConfigError{Field: "Repo", Reason: err.Error()}
	}
	cfg.Repo = repo
	if cfg.Workers == 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Workers < 0 {
		return cfg, &ConfigError{Field: "Workers", Reason: fmt.Sprintf("%d is negative", cfg.Workers)}
	}
	if cfg.Flow == nil {
		cfg.Flow = pipeline.StoryFlow(cfg.Story)
	}
	if err := cfg.Flow.Validate(); err != nil {
		// Err keeps the *pipeline.FlowError, which names the stage.
		return cfg, &ConfigError{Field: "Flow", Reason: err.Error(), Err: err}
	}
	for i, st := range cfg.Flow.Stages {
		for _, r := range st.Rules {
			if !message.ValidOutcome(string(r.Outcome)) {
				return cfg, &ConfigError{Field: "Flow", Reason: fmt.Sprintf("stage %d (%s): outcome %q cannot be reported: "+
					"an outcome is an upper-case word of letters, digits, _ and - (message.ValidOutcome)", i, st.Name, r.Outcome)}
			}
		}
	}
	if cfg.Stages == nil {
		cfg.Stages = DefaultStages(cfg.Flow)
	}
	if len(cfg.Stages) != len(cfg.Flow.Stages) {
		return cfg, &ConfigError{Field: "Stages", Reason: fmt.Sprintf("%d stages for a flow of %d", len(cfg.Stages), len(cfg.Flow.Stages))}
	}
	cfg.Stages = append([]Stage(nil), cfg.Stages...)
	needsGates := false
	for i := range cfg.Stages {
		st := &cfg.Stages[i]
		if st.Role == "" {
			st.Role = cfg.Flow.Stages[i].Name
		}
		switch st.Kind {
		case StageAgent, StageBuild:
			if st.Agent == nil {
				st.Agent = cfg.Agent
			}
			if st.Agent == nil && work && cfg.Remote == nil {
				return cfg, &ConfigError{Field: "Agent", Reason: fmt.Sprintf("required: stage %d (%s) runs an agent", i, st.Role)}
			}
		case StageGate:
		default:
			return cfg, &ConfigError{Field: "Stages", Reason: fmt.Sprintf("stage %d has no Kind", i)}
		}
		needsGates = needsGates || st.Kind != StageAgent
	}
	for _, g := range []struct {
		field string
		plan  phases.GatePlan
	}{{"Gates", cfg.Gates}, {"QualityGates", cfg.QualityGates}} {
		if err := g.plan.Validate(); err != nil {
			return cfg, &ConfigError{Field: g.field, Reason: err.Error(), Err: err}
		}
	}
	if work && cfg.Remote == nil && needsGates && checkCount(cfg.Gates) == 0 {
		return cfg, &ConfigError{Field: "Gates", Reason: "the gate plan has no checks; every story's work must pass at least one"}
	}
	if cfg.Prompt == nil {
		cfg.Prompt = DefaultPrompt
	}
	if cfg.ReviewerRole == "" {
		cfg.ReviewerRole = "reviewer"
	}
	return cfg, nil
}

// checkCount counts the checks of a gate plan.
func checkCount(p phases.GatePlan) int {
	n := 0
	for _, l := range p.Levels {
		n += len(l.Checks)
	}
	return n
}
