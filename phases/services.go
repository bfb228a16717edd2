package phases

import (
	"context"
	"time"
)

// The services a run needs. Each is a small, non-generic interface so that
// hosts can plug in their own and tests can mock them with mockgen. Real
// defaults ship in the subpackages agentcmd (AgentDriver), gitsnap
// (Snapshotter) and gates (Verifier, FeedbackGenerator).
//
// Error convention: a returned error means the service could not do its job
// (a system fault: binary missing, git broken, context cancelled). A domain
// outcome, such as an agent exiting non-zero or a gate failing, is a field
// of the result, never an error.

// AgentDriver runs a coding agent once in a workspace.
type AgentDriver interface {
	// Execute runs the agent for one build phase. onEvent, when non-nil,
	// receives output as it is produced.
	Execute(ctx context.Context, req AgentRequest, onEvent StreamCallback) (AgentResult, error)
}

// AgentRequest is what the build phase asks of an agent.
type AgentRequest struct {
	WorkspacePath string
	TaskPrompt    string
	// Feedback from the previous iteration's failed verification; empty on
	// the first iteration.
	Feedback string
	// SessionID resumes the agent's own session when the agent supports it.
	SessionID string
	Iteration int
	// Timeout is the time the agent may take: the remainder of the run's
	// wall-clock budget, or the driver's own limit, whichever is smaller.
	// Zero means no limit beyond ctx.
	Timeout     time.Duration
	Constraints AgentConstraints
	// Env holds extra KEY=VALUE entries for this execution's environment
	// (for a subprocess driver: added to its process environment, after
	// the driver's own entries, so that a key given here wins). Nil means
	// none.
	Env []string
	// MCPServers are MCP servers the agent is connected to for this
	// execution (a team's report server, phases/agentmcp). A driver that
	// can configure its agent for them does (agentcmd: Claude Code's
	// --mcp-config, Codex's mcp_servers overrides); others ignore them.
	MCPServers []MCPServer
	// Writable are paths outside WorkspacePath that the agent must be able
	// to write for this execution (a team's result file's directory). A
	// driver that confines its agent (agentcmd's OS sandbox, Claude Code's
	// --add-dir) lets it write these and nothing else beyond the
	// workspace; others ignore them. Nil means none.
	Writable []string
	// OnStart, when non-nil, is called by a driver that runs the agent as a
	// process, once it has started, with its process id (for agentcmd also
	// its process group's id). The worker Runtime uses it to read the CPU
	// time of the agent's processes. It must not block.
	OnStart func(pid int)
}

// MCPServer is an MCP server reached over streamable HTTP.
type MCPServer struct {
	// Name is the server's name in the agent's configuration; an agent
	// names its tools after it (Claude Code: mcp__<name>__<tool>). Letters,
	// digits, '_' and '-'.
	Name string
	// URL is the endpoint.
	URL string
	// BearerToken, when set, is sent as "Authorization: Bearer <token>";
	// BearerTokenEnv names the environment variable the driver puts it in
	// for agents that read it only from there (Codex).
	BearerToken    string
	BearerTokenEnv string
	// Tools are the server's tools the agent may call without asking
	// (Claude Code's --allowedTools); empty allows none in advance.
	Tools []string
}

// AgentConstraints are optional limits a driver passes on to the agent.
type AgentConstraints struct {
	MaxTurns     int
	AllowedTools []string
	Model        string
	// Commands are the commands the agent must be able to run as they are
	// written here (a team passes its gate plan's, so that the agent can
	// check its own work): a driver whose CLI allows shell commands one by
	// one (agentcmd: Claude Code's Bash rules, outside an OS sandbox)
	// allows each, with any further arguments. Nil means none beyond the
	// driver's own.
	Commands []string
}

// AgentResult is the outcome of one agent execution.
type AgentResult struct {
	// Success is true when the agent exited zero and reported no error.
	Success   bool
	ExitCode  int
	SessionID string
	// Result is the agent's final message, when its output format has one.
	Result string
	// Error is the failure the agent reported itself (a Claude Code result
	// with is_error, a Codex turn.failed), even when it exited zero.
	Error string
	// Output holds the last part of the agent's output (bounded by the
	// driver) for diagnostics and error classification.
	Output   string
	Stderr   string
	Tokens   TokenUsage
	CostUSD  float64
	Model    string
	Duration time.Duration
	TimedOut bool
	// Signal names the signal that ended the process, if one did.
	Signal string

	// What the agent's own output said about why it could not go on by
	// itself (see AgentRateLimit, AgentAPIError, AgentPermissionDenial and
	// AgentQuestion). Nil or empty when it said nothing of the kind, or
	// its output format cannot say it.
	RateLimit         *AgentRateLimit
	APIError          *AgentAPIError
	PermissionDenials []AgentPermissionDenial
	Questions         []AgentQuestion
}

// TokenUsage counts tokens reported by an agent.
type TokenUsage struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	CacheRead  int64 `json:"cache_read,omitempty"`
	CacheWrite int64 `json:"cache_write,omitempty"`
}

// Total is every token counted.
func (t TokenUsage) Total() int64 { return t.Input + t.Output + t.CacheRead + t.CacheWrite }

// Add returns the sum of t and o.
func (t TokenUsage) Add(o TokenUsage) TokenUsage {
	return TokenUsage{t.Input + o.Input, t.Output + o.Output, t.CacheRead + o.CacheRead, t.CacheWrite + o.CacheWrite}
}

// StreamKind classifies a line of agent output.
type StreamKind string

// Stream kinds. Parsers that do not understand a line report StreamText.
const (
	StreamText      StreamKind = "text"
	StreamToolUse   StreamKind = "tool_use"
	StreamResult    StreamKind = "result"
	StreamSystem    StreamKind = "system"
	StreamStderr    StreamKind = "stderr"
	StreamReasoning StreamKind = "reasoning"
	// StreamRetry is the agent CLI saying it is waiting to retry a failed
	// model API call by itself (Claude Code's api_retry: a 429 rate limit,
	// a 529 overload, a 5xx): the agent is alive and not stalled, but no
	// work is being done until the provider answers. Its Text names the
	// status, the attempt and the delay.
	StreamRetry StreamKind = "retry"
	// StreamSandbox is the driver, not the agent: what the agent's OS
	// sandbox refused or repaired once the agent was gone (agentcmd: a
	// moved HEAD put back, a forged or foreign ref not carried back, a
	// write into a hidden place's decoy), and what the driver itself
	// stopped (an output flood). No parser of agent output reports it, so
	// an agent cannot print one.
	StreamSandbox StreamKind = "sandbox"
)

// StreamEvent is one line of agent output, as it happens.
type StreamEvent struct {
	Time time.Time
	Kind StreamKind
	// Line is the raw output line; Text is the human-readable part of it
	// when the parser could extract one.
	Line string
	Text string
	// SessionID is the agent's own session id (what its CLI resumes), set
	// on the first event after its output named it, long before the run
	// ends: a host that records it can resume the session after it, or
	// the agent, was killed mid-run. Empty on every other event.
	SessionID string
}

// StreamCallback receives agent output as it is produced. It is called from
// one goroutine at a time and must not block for long.
type StreamCallback func(StreamEvent)

// BeforeState is the workspace as it was when a run (or assignment) began;
// snapshots are measured against it.
type BeforeState struct {
	// BaseCommit is HEAD at the start: commits made since it are the
	// run's commits.
	BaseCommit string `json:"base_commit"`
	// BaseTree, when set, is the content of the working tree at the start
	// (tracked, staged and untracked files, ignored ones excepted), recorded
	// because it differed from BaseCommit. Changes are then counted from it
	// rather than from BaseCommit, so that edits already present before the
	// run are not taken for the agent's. Empty means the workspace was clean
	// and changes are counted from BaseCommit.
	BaseTree string `json:"base_tree,omitempty"`
	// DirtyFiles were already modified, staged or untracked at the start.
	DirtyFiles []string  `json:"dirty_files,omitempty"`
	CapturedAt time.Time `json:"captured_at"`
}

// SnapshotMeta identifies the run a snapshot belongs to.
type SnapshotMeta struct {
	RunID      RunID
	Iteration  int
	TaskPrompt string
}

// Snapshotter records what an agent changed.
type Snapshotter interface {
	// Before records the workspace's starting point.
	Before(ctx context.Context, workspacePath string) (BeforeState, error)
	// Capture records the changes since before, committed or not.
	Capture(ctx context.Context, workspacePath string, before BeforeState, meta SnapshotMeta) (Snapshot, error)
}

// Snapshot is the state of a workspace after a build.
type Snapshot struct {
	ID            string   `json:"id"`
	RunID         RunID    `json:"run_id"`
	Iteration     int      `json:"iteration"`
	WorkspacePath string   `json:"workspace_path"`
	BaseCommit    string   `json:"base_commit"`
	HeadCommit    string   `json:"head_commit"`
	Commits       []Commit `json:"commits,omitempty"`
	// Files is the whole change since the start: since BeforeState.BaseTree
	// when it is set, else since BaseCommit.
	Files []FileDiff `json:"files,omitempty"`
	// Uncommitted lists paths modified, staged or untracked in the working
	// tree; they count as changes. After a dirty start (BeforeState.BaseTree
	// set) it lists only those whose content also differs from the start.
	Uncommitted []string `json:"uncommitted,omitempty"`
	Insertions  int      `json:"insertions"`
	Deletions   int      `json:"deletions"`
	// DiffHash identifies the content of the change (committed and not), so
	// that a run loop can detect an agent producing the same diff again.
	DiffHash   string    `json:"diff_hash"`
	CapturedAt time.Time `json:"captured_at"`
}

// Empty reports whether the snapshot shows no change at all: no new commits
// and nothing uncommitted. An empty snapshot is never evidence of work.
func (s Snapshot) Empty() bool {
	return len(s.Commits) == 0 && len(s.Files) == 0 && len(s.Uncommitted) == 0
}

// Commit is one commit made since the base.
type Commit struct {
	Hash    string `json:"hash"`
	Subject string `json:"subject"`
}

// FileDiff is one file's change since the base.
type FileDiff struct {
	Path       string `json:"path"`
	Status     string `json:"status"` // A, M, D, R, ? (untracked)
	Insertions int    `json:"insertions"`
	Deletions  int    `json:"deletions"`
	Binary     bool   `json:"binary,omitempty"`
}

// Level is a verification level.
type Level string

// The verification levels, run in this order.
const (
	L0Contracts Level = "L0" // types, lint, schemas
	L1Tests     Level = "L1" // unit tests
	L2BlackBox  Level = "L2" // black-box / integration
	L3CI        Level = "L3" // external CI
)

// Levels lists the levels in execution order.
func Levels() []Level { return []Level{L0Contracts, L1Tests, L2BlackBox, L3CI} }

// GateCheck is one named command run in the workspace.
type GateCheck struct {
	Name    string        `json:"name"`
	Argv    []string      `json:"argv"`
	Timeout time.Duration `json:"timeout,omitempty"`
	Env     []string      `json:"env,omitempty"`
}

// GateLevel is the checks of one level.
type GateLevel struct {
	Level  Level       `json:"level"`
	Checks []GateCheck `json:"checks"`
}

// GatePlan says how to verify a change.
type GatePlan struct {
	Levels []GateLevel `json:"levels"`
	// RunAll runs every level even after one fails; by default verification
	// stops at the first failing level.
	RunAll bool `json:"run_all,omitempty"`
}

// VerifyOptions identify the run being verified.
type VerifyOptions struct {
	// RunID is the run being verified, for the verifier's logs. Default:
	// none (logged empty).
	RunID RunID
	// Iteration is the run's iteration being verified, counted from 1.
	// Default: 0 (not known).
	Iteration int
	// Skip records that verification was waived: the verifier reports a pass
	// without running checks, and says so in the report. Default: false.
	Skip bool
}

// Verifier runs a gate plan against a snapshot.
type Verifier interface {
	Verify(ctx context.Context, snapshot Snapshot, plan GatePlan, opts VerifyOptions) (VerificationReport, error)
}

// CheckResult is the outcome of one gate check.
type CheckResult struct {
	Name     string   `json:"name"`
	Level    Level    `json:"level"`
	Argv     []string `json:"argv,omitempty"`
	Passed   bool     `json:"passed"`
	ExitCode int      `json:"exit_code"`
	TimedOut bool     `json:"timed_out,omitempty"`
	// Output is the check's combined output, trimmed to the verifier's limit.
	Output   string        `json:"output,omitempty"`
	Duration time.Duration `json:"duration"`
	// Refused is what the check's sandbox refused or repaired of the
	// check's processes (gates.VerifierConfig.Sandbox), one line each: it
	// ran the code under verification, which reached beyond its
	// workspace. Passed is the check's own verdict all the same.
	Refused []string `json:"refused,omitempty"`
}

// LevelResult is the outcome of one level.
type LevelResult struct {
	Level    Level         `json:"level"`
	Passed   bool          `json:"passed"`
	Skipped  bool          `json:"skipped,omitempty"` // not run because an earlier level failed
	Checks   []CheckResult `json:"checks,omitempty"`
	Duration time.Duration `json:"duration"`
}

// VerificationReport is the outcome of a gate plan.
type VerificationReport struct {
	Passed   bool          `json:"passed"`
	Skipped  bool          `json:"skipped,omitempty"` // verification waived by VerifyOptions.Skip
	Levels   []LevelResult `json:"levels"`
	Duration time.Duration `json:"duration"`
}

// Level returns the result of level l, if it was part of the plan.
func (r VerificationReport) Level(l Level) (LevelResult, bool) {
	for _, lr := range r.Levels {
		if lr.Level == l {
			return lr, true
		}
	}
	return LevelResult{}, false
}

// FailedChecks lists every check that did not pass, in order.
func (r VerificationReport) FailedChecks() []CheckResult {
	var out []CheckResult
	for _, lr := range r.Levels {
		for _, c := range lr.Checks {
			if !c.Passed {
				out = append(out, c)
			}
		}
	}
	return out
}

// FeedbackOptions identify the run feedback is generated for.
type FeedbackOptions struct {
	// RunID is the run the feedback is for. Default: none.
	RunID RunID
	// Iteration is the iteration that failed, counted from 1; the
	// feedback names it when positive. Default: 0 (not named).
	Iteration int
}

// FeedbackGenerator turns a failed verification into instructions for the
// agent's next iteration.
type FeedbackGenerator interface {
	Generate(ctx context.Context, snapshot Snapshot, report VerificationReport, plan GatePlan, opts FeedbackOptions) (string, error)
}

// RunID names one run of the loop.
type RunID string
