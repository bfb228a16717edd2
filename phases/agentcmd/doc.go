// Package agentcmd is the default phases.AgentDriver: it runs any coding
// agent CLI as a subprocess, once per build phase.
//
// # Running the agent
//
// Config.Argv is the command, run with the workspace as working directory
// and the inherited environment plus FOREMAN_WORKSPACE, FOREMAN_ITERATION,
// FOREMAN_SESSION_ID and FOREMAN_AGENT_OWNER (AgentOwnerEnv: which host
// started it, for the orphan reaper), then Config.Env, then the request's
// AgentRequest.Env (a later entry for a key wins). The prompt (the task,
// then the previous iteration's feedback under a heading; Config.Prompt
// changes that) goes where an argument says {prompt} (or {task} and {feedback}
// separately), else as one final argument, or on stdin with PromptStdin.
// {session}, {workspace} and {iteration} are expanded too. When the request
// carries a session id, the format's resume arguments are added (Claude
// Code: --resume <id>; Codex: resume <id>); Config.ResumeArgs replaces them.
//
// # Stopping it
//
// The agent runs in a process group of its own. When the timeout
// (AgentRequest.Timeout, else Config.Timeout) expires or the context ends,
// the whole group gets SIGTERM and, Config.KillGrace later (default 5s),
// SIGKILL, so children the agent spawned go with it. When the agent exits
// while processes it started still hold its output, they get the same
// treatment; then anything left in the group is killed. A process that left
// the group (setsid) and still holds the output pipes is abandoned one more
// grace period after SIGKILL, so Execute never hangs on it.
//
// # Orphans of a crashed host
//
// A host that dies hard (SIGKILL, OOM) cannot stop its agent: the agent's
// process group is orphaned and goes on editing the workspace, and a new
// agent started there on restart would edit it beside the orphan. With
// Config.LeaseDir set, Execute keeps a lease file per workspace in that
// directory (named after a hash of the workspace's absolute path; nothing
// is written in the workspace), holding the agent's pid, process group,
// start time (from /proc/<pid>/stat) and FOREMAN_* environment, written
// atomically just after the agent starts and removed once its group has
// been waited for and killed. Before starting an agent, Execute reads the
// workspace's lease: if the recorded agent still runs (same pid and start
// time) or any process of its group does, the group gets SIGTERM and,
// KillGrace later, SIGKILL, and Execute waits (polling /proc, at most
// another KillGrace) until it is gone; one that will not die is an
// *OrphanError and no agent starts. A lease whose processes are gone, or
// whose pid now belongs to another process, is removed silently. Each reap
// is logged and reported to Config.OnReap.
//
// Executions in one workspace are serialized: through one Driver the second
// waits for the first; an flock on a lock file beside the lease (kept, one
// per workspace) makes Execute fail at once with ErrLeaseHeld while any
// other holder, another Driver in this process or another process, has an
// agent there. Share one Driver for the agents a host runs in turn in a
// workspace; the same goes for Codex token accounting (below), which
// remembers running totals per Driver. A host that dies in the instant
// between starting the agent and writing its lease leaves no lease, but
// its agent carries FOREMAN_AGENT_OWNER (the host's pid and start time):
// after the lease, Execute also stops, the same way, any process working
// in the workspace whose owner is gone, and reports it to Config.OnReap.
// Linux only: the reaper reads /proc.
//
// # MCP servers
//
// A request's AgentRequest.MCPServers (a team's report server,
// phases/agentmcp) reach the agent through its own configuration: Claude
// Code gets --mcp-config=<file>, a JSON file of "mcpServers" entries
// ("type": "http", "url", an Authorization header for the bearer token)
// written readable by its owner only and removed after the run, and the
// servers' Tools pre-allowed in --allowedTools (mcp__<server>__<tool>);
// Codex gets -c mcp_servers.<name>.url=... and, for a token,
// -c mcp_servers.<name>.bearer_token_env_var=<variable>, the variable set
// in its environment. Nothing is written to the user's own configuration.
// A text agent gets nothing beyond its environment. Claude Code's options
// that take several values are passed as --flag=value, so that the prompt
// after them is never read as one more value.
//
// # Results
//
// Output lines, stdout and stderr, reach the StreamCallback as they arrive,
// one call at a time, each classified by the format's OutputParser. The
// result has the exit code, the signal that ended the agent, whether it
// timed out, the duration, bounded tails of stdout and stderr, and the
// session id, tokens, cost, model and final message where the output has
// them. Success means exit status zero, no timeout or cancellation, and no
// error reported by the agent itself (a Claude Code result with is_error or
// an error subtype, or an API error with no result after it; a Codex
// turn.failed, or a Codex error event not followed by a completed turn);
// AgentResult.Error holds that error.
//
// # Why an agent stopped
//
// The result also says, as typed fields, what the agent's own output told
// about why it could not go on by itself (testdata/README.md cites the
// published formats):
//   - RateLimit: Claude Code's rate_limit_event with status rejected (its
//     resetsAt is the reset), an assistant message with error rate_limit,
//     or a result with api_error_status 429; Codex's "You've hit your usage
//     limit" or a 429 retry limit. A reset named only in words ("resets
//     12pm (America/Chicago)", Codex's "try again at 3:28 PM", read in the
//     location of the driver clock's Now, the machine's local zone for the
//     real clock) is read against Config.Clock; zero when none is named.
//   - APIError: Claude Code's other assistant error codes
//     (authentication_failed, billing_error, server_error, ...) and a
//     result's api_error_status; every other unrecovered Codex turn failure,
//     Code guessed from its text (billing_error, server_error,
//     authentication_failed, context_window_exceeded, connection_error).
//   - PermissionDenials: the result's permission_denials (a refused
//     AskUserQuestion excepted); Codex commands with status declined.
//   - Questions, for a person: an AskUserQuestion with no successful result
//     (refused in a non-interactive run, or still open when the run ended),
//     a can_use_tool permission prompt (control_request) nobody answered, a
//     tool call a hook deferred (deferred_tool_use); Codex's
//     request_user_input.
//
// A limit or error that the run got past (a successful result after it) is
// not reported. Success is unchanged by these fields; what to do about them
// is the caller's decision (the worker package retries a rate-limited
// assignment after the reset and escalates a question to a person).
// Execute calls AgentRequest.OnStart with the agent's pid (also its process
// group id) once it runs.
//
// Tokens are what this execution used. Codex reports the running total of
// its thread instead, carried over from the runs it resumed, so for a
// resumed session the driver subtracts the total it last saw for that
// session (it remembers up to 1024 sessions, forgetting the oldest); a
// session it did not run, or forgot, is charged its whole total.
//
// A non-zero exit is a result, not an error. Execute returns an error only
// for system faults: *StartError (binary not found, workspace missing),
// ErrNoCommand, ErrUnknownFormat, ErrLeaseHeld, *OrphanError, or the
// context ending (then with the partial result).
//
// # Formats
//
// FormatClaude parses `claude -p --output-format stream-json --verbose`:
// tokens are the result line's modelUsage summed over the models, which
// counts subagents and matches total_cost_usd (its usage field counts the
// main conversation only). FormatCodex parses `codex exec --json`, both the
// ThreadEvent stream (thread.started, turn.completed, item.completed, ...)
// and the {"id","msg"} stream of versions before it. FormatText (the
// default) passes lines through. Unparseable lines are reported as text and
// never fail a run. Config.NewParser plugs in a parser for another format.
// testdata/README.md names the published output each parser is tested on.
package agentcmd
