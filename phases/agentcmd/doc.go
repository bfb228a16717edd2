// Package agentcmd is the default phases.AgentDriver: it runs any coding
// agent CLI as a subprocess, once per build phase.
//
// # Running the agent
//
// Config.Argv is the command, run with the workspace as working directory
// and the inherited environment plus FOREMAN_WORKSPACE, FOREMAN_ITERATION
// and FOREMAN_SESSION_ID, then Config.Env, then the request's
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
// # Results
//
// Output lines, stdout and stderr, reach the StreamCallback as they arrive,
// one call at a time, each classified by the format's OutputParser. The
// result has the exit code, the signal that ended the agent, whether it
// timed out, the duration, bounded tails of stdout and stderr, and the
// session id, tokens, cost, model and final message where the output has
// them. Success means exit status zero, no timeout or cancellation, and no
// error reported by the agent itself (a Claude Code result with is_error or
// an error subtype, a Codex turn.failed, or a Codex error event not followed
// by a completed turn); when the agent reported an error and gave no final
// message, Result holds the error.
//
// A non-zero exit is a result, not an error. Execute returns an error only
// for system faults: *StartError (binary not found, workspace missing),
// ErrNoCommand, ErrUnknownFormat, or the context ending (then with the
// partial result).
//
// # Formats
//
// FormatClaude parses `claude -p --output-format stream-json --verbose`,
// FormatCodex parses `codex exec --json`, and FormatText (the default) passes
// lines through. Unparseable lines are reported as text and never fail a
// run. Config.NewParser plugs in a parser for another format.
package agentcmd
