// Package agentcmd is the default phases.AgentDriver: it runs any coding
// agent CLI as a subprocess, once per build phase.
//
// # Running the agent
//
// Config.Argv is the command, run with the workspace as working directory,
// in an OS sandbox where one is available (below). The prompt (the task,
// then the previous iteration's feedback under a heading; Config.Prompt
// changes that) goes where an argument says {prompt} (or {task} and
// {feedback} separately); else, for Claude Code and Codex, on stdin (codex
// exec gets "-" as its prompt, which tells it to read stdin; both CLIs were
// checked to take the prompt that way, resumed sessions included); else as
// one final argument. PromptStdin and PromptArg choose. An argument is at
// most MaxArgLen bytes: a longer prompt for Claude Code or Codex goes to
// stdin anyway, and one placed by a placeholder is a *PromptTooLongError
// (never E2BIG). {session}, {workspace} and {iteration} are expanded too.
// A placeholder inside the code an interpreter runs (sh -c '... {prompt}',
// bash -lc, python -c, node -e, ...) is refused with a
// *ScriptPlaceholderError before anything starts: the prompt, written by
// whoever wrote the story, would run as code. Pass it as an argument of
// its own after the script (sh -c 'agent "$1"' sh {prompt}) or on stdin.
// When the request carries a session id, the format's resume arguments are
// added (Claude Code: --resume <id>; Codex: resume <id>); Config.ResumeArgs
// replaces them. A session id must look like one the CLI issues (Claude
// Code's and Codex's are UUIDs; others 1 to 128 of [A-Za-z0-9._:-], never
// starting with "-"): a request with another is a *SessionIDError, and one
// read from an agent's output is dropped from the result.
// An agent that prints more than Config.MaxOutputBytes (256 MiB by
// default), stdout and stderr together, is stopped at once: nothing past
// the bound is parsed or kept, the result fails saying so, and a
// phases.StreamSandbox note ("agentcmd: output: stopped the agent: ...")
// tells the host (a team counts it as a refusal).
// The first stream event after the agent's output names its session
// carries it (phases.StreamEvent.SessionID), long before the run ends, so
// that a host can record it and resume the session after a crash.
//
// # The agent's environment
//
// The environment is built, not inherited. From the host's environment
// the agent gets only the variables DefaultPassEnv(Format) names (PATH,
// locale, TERM, TZ, USER, SHELL, proxies and CA files, git's identity
// variables, Go's module settings, and the CLI's own API variables:
// ANTHROPIC_* and CLAUDE_CODE_* for Claude Code, OPENAI_* and CODEX_* for
// Codex, those and GEMINI_* and GOOGLE_GEMINI_* for a text agent) and
// Config.PassEnv adds, never one DefaultSecretEnv or Config.SecretEnv
// names (FOREMAN_NOTIFY_SECRET, DATABASE_URL, PGPASSWORD, the reapers'
// owner marks). The host's own FOREMAN_* variables do not pass unless
// PassEnv names them. The driver adds FOREMAN_WORKSPACE,
// FOREMAN_ITERATION, FOREMAN_SESSION_ID and FOREMAN_AGENT_OWNER
// (AgentOwnerEnv: which host started it, for the orphan reaper), and in a
// sandbox HOME (the agent's own), TMPDIR=/tmp and IS_SANDBOX=1 (which lets
// Claude Code take --dangerously-skip-permissions as root); then come
// Config.Env, the MCP variables, and the request's AgentRequest.Env, a
// later entry for a key winning. A host that names a secret in PassEnv,
// or sets one in Env, hands it to the agent; an API key the CLI needs is
// such a secret, handed over on purpose.
//
// A proxy's credentials are not handed over. When a proxy variable of the
// built environment (HTTP_PROXY, HTTPS_PROXY or ALL_PROXY, in any case,
// wherever it came from) has userinfo (http://user:secret@proxy:3128), the
// driver serves, for that one Execute (or contained check, until its Done),
// a forwarding proxy on the host's 127.0.0.1 and gives the agent
// http://127.0.0.1:PORT instead: it passes CONNECT tunnels and plain-HTTP
// proxy requests to the real proxy with a Proxy-Authorization built from
// the userinfo, and drops any Proxy-Authorization of the agent's. It
// serves loopback clients only, bounds headers (64 KiB) and idle time (10
// minutes), and closes every connection when the run ends. Without
// userinfo a proxy variable passes unchanged, as NO_PROXY always does.
// Where the sandbox has no network (Sandbox.UnshareNet; ChecksOffline for
// checks) no proxy starts and the variable passes without its userinfo.
// A value without a scheme (user:secret@proxy:3128) is read as http://, as
// Go's and curl's clients read it. The real proxy with credentials must be
// http:// or https://: credentials for another kind
// (socks5://user:pass@...), or a value the driver cannot read, fail
// Execute and Contain with a *ProxyURLError before anything starts. Any
// process on the host's loopback can use the local proxy while it runs
// (as it can use the host's network), but none can read the credentials
// from it. GOPROXY is left as it is: its URLs are module proxies, and one
// with a password hands it to the agent. This covers the environment the
// driver builds, not what the agent can read elsewhere: a sandbox shows
// the host's /etc read-only (a password in /etc/environment or an apt
// proxy file is readable there), and an unsandboxed agent runs as the
// host's user (it can read the host process's environment in /proc), as
// a check run without a Sandbox gets the host's whole environment. The
// local proxy answers TRACE with 405 (a proxy echoes it, credentials
// included), drops Max-Forwards, and serves at most 256 connections at
// once.
//
// A sandboxed agent's git reads no ~/.gitconfig (the host's home is
// hidden), so the driver gives it a git identity: each of
// GIT_AUTHOR_NAME, GIT_AUTHOR_EMAIL, GIT_COMMITTER_NAME and
// GIT_COMMITTER_EMAIL that none of the above sets (non-empty) is added,
// with what the host's git says in the workspace (git config user.name
// and user.email, run by the host with its environment: repo-local,
// global and system configuration alike), else FallbackGitName and
// FallbackGitEmail ("Foreman agent" <agent@foreman.invalid>). A variable
// the host sets (in its environment, Config.Env or the request's Env)
// wins. Without it the agent's first commit failed "Author identity
// unknown", and an agent following git's hint (git config user.email
// without --global) wrote the repository's config, a refusal. An
// unsandboxed agent gets none of them: its git reads the host's own
// configuration.
//
// # The sandbox
//
// With Config.Sandbox at its default (SandboxAuto), each agent runs in a
// bubblewrap (bwrap) sandbox where bwrap is installed and can create
// namespaces (the driver tries once, and remembers); elsewhere it runs
// unsandboxed, and Driver.Containment says why ("none: bwrap not found
// ..."). SandboxOff turns it off, SandboxRequired makes its absence an
// error (ErrNoSandbox); the FOREMAN_SANDBOX environment variable (off,
// auto, required) sets the mode for a Config that leaves it empty.
// Driver.Sandboxed tells a host whether the CLI's own permission prompts
// can be off. In the sandbox:
//
//   - the host's file system is read-only, and readable as the host's
//     user reads it (run the host as an ordinary user: an agent of a root
//     host reads what root reads), except: the system's secret files
//     (/etc/shadow, /etc/gshadow and their backups, the SSH host keys) are
//     empty; the repository's config in the agent's copy has no remote
//     URL's password, no http extraheader and no credential helper; /tmp
//     is the agent's own, empty; the host's home ($HOME), /root, /run, the lease directory and
//     Sandbox.Hide (pipeline/team hides its state directory, the worktree
//     root and the main checkout) are empty, so the host's credentials,
//     ssh and gpg agents, the team's database and other agents' leases
//     are out of reach. With a Config.LeaseDir each of them is a decoy: an
//     empty directory of the execution (under <LeaseDir>/decoys, which no
//     agent sees) bound writable, so a write there succeeds and changes
//     nothing real; once the agent is gone the driver lists what it made
//     in each (not the mount points bwrap made there; at most 1,000
//     entries; links not followed) and reports one phases.StreamSandbox
//     note per place written ("agentcmd: sandbox: wrote "EVIL", "go.mod"
//     into the hidden main checkout (/srv/app): a decoy, nothing real
//     changed"; Sandbox.HideNames names the places), then removes the
//     decoys. Each decoy holds empty canaries where secrets are usually
//     kept (.env, .netrc, .git-credentials, .pgpass, .npmrc, .ssh/, .aws/,
//     ...: names no agent CLI looks for outside its own home). An inotify
//     watch on the decoys while the agent runs adds what that listing
//     cannot see: what it made and removed again before it exited ("tmp"
//     (removed)), and a canary file it opened ("opened ".env" in the
//     hidden main checkout (...): a decoy, nothing real to see"), and the
//     canaries it removed ("removed ".aws/", ".env" ... from the hidden
//     state directory": an rm -rf). What it opened (a canary read, a
//     listing) is counted only where the driver runs as root: a fanotify
//     group then holds each open of a decoy until the driver has read the
//     opener's PID namespace, so the host's own reads and walks are told
//     from the agent's (without root nothing opened is counted: it could
//     be the host's). A lookup of a name that is not
//     there touches nothing a watch sees; Sandbox.Mirror makes a hidden directory's
//     decoy repeat its entries' names, empty (pipeline/team mirrors its
//     worktree root: the other stories' worktrees). Without a LeaseDir every hidden directory is
//     read-only: a write there fails (EROFS) unseen;
//   - it writes its workspace; its home (Sandbox.HomeDir, default
//     <LeaseDir>/homes/<hash of the workspace>, kept so that a CLI resumes
//     its sessions, until Driver.RemoveHome, which pipeline/team calls as
//     it removes a story's worktree; without LeaseDir a fresh directory
//     per execution), which the agent sees at /run/agent/home, its HOME,
//     whatever its path on the host (that path would name the team's
//     state directory); the
//     request's AgentRequest.Writable paths (a team's result directory);
//     and Sandbox.Binds marked Writable;
//   - in a git worktree it writes what a commit needs: an object directory
//     of its own that borrows the repository's (read-only, through
//     info/alternates; once the agent is gone the driver carries back each
//     loose object whose content is the object its name says, and each
//     pack git index-pack --strict accepts: a forged one is refused and
//     reported, and no agent can delete the real store; what else it
//     leaves there that git does not write, its alternates changed, a
//     commit-graph or multi-pack-index the host's git does not verify,
//     is reported too) and, in a linked
//     worktree, the worktree's own admin directory (.git/worktrees/<name>; its commondir and gitdir files, and
//     the worktree's .git file, stay read-only: the host's gits read them
//     after the agent). The rest of the repository's git directory is a
//     private copy of the execution (with the real one, read-only, at
//     <git directory>/.foreman-host, which the copy's links to the real
//     refs and its borrowed object store go through; its config is the
//     copy's): config, HEAD, hooks, info, the loose refs and packed-refs
//     copied (other worktrees' admin directories and
//     any other directory are the real ones, read-only; logs is empty). In
//     the main worktree (a plain clone handed to the driver) its own files
//     there are the agent's in the copy (HEAD, the index, a merge's or
//     rebase's state, not reported); the index alone is carried back, with
//     what the agent staged. Git writes a file by making <name>.lock
//     beside it and renaming, so a read-only bind would refuse each write
//     unseen; in the copy the agent may move main or any other ref, tag,
//     set config or plant a hook, and none of it reaches the host's gits.
//     Once it is gone the driver carries its own branch, and only it, back
//     with git update-ref (checking the old value; git refuses a missing
//     object or a non-commit; a branch the agent packed is read from its
//     packed-refs), puts the worktree's HEAD back on its branch if the
//     agent moved it, and compares the copy with what it copied: refs by
//     value ("refused the agent's move of refs/heads/main (another branch):
//     not carried back", "new ref refs/tags/v9"), files by type, mode and
//     content ("wrote "config", "hooks/post-merge" into the repository's
//     git directory (...): a private copy, nothing real changed"; with the
//     watch, "config (put back)" and "(removed)" too); git's own
//     housekeeping (FETCH_HEAD, gc.pid, gc.log, locks) is not noted. What
//     it refused or repaired is logged and reported to the StreamCallback
//     as a phases.StreamSandbox event, a line starting "agentcmd: sandbox:"
//     (a kind no parser of agent output reports: pipeline/team counts each
//     as a refusal of the story's agent). An agent in a repository's main
//     worktree (no linked worktree) writes its .git, except config, hooks,
//     info, refs and packed-refs, which are read-only (its writes there
//     fail unseen), and a private copy of its branch's ref directory;
//   - it runs in its own pid, IPC and UTS namespaces, with no
//     capabilities (as root, bwrap keeps them unless dropped, and a
//     remount would make / writable), in a session of its own (no
//     controlling terminal to push input into), and dies with its host
//     (--die-with-parent). It cannot see or signal the host's other
//     processes, nor read other agents' environments (their MCP tokens).
//
// The network is shared: the agent reaches the model API and the team's
// MCP server on 127.0.0.1, and so does everything else on the host's
// loopback (a database that trusts local connections). Sandbox.UnshareNet
// cuts the agent off from every network, loopback included. Other limits:
// the real object store is readable, so an agent can read what other
// stories committed or staged; a team's result
// directory is shared by its assignments; the agent runs as the host's
// user. The gates run the agent's code (a test it wrote): Driver.Contain,
// a gates.Sandbox, runs each check in the same sandbox with the agent's
// rights, a home of its own and an environment built from
// DefaultCheckPassEnv, and reports what it refused. A CLI installed under the host's home needs a Bind of its
// directory (the agent's program, its directory and an npm install's
// node_modules, and the PATH directories, are bound read-only
// automatically), and a CLI logged in through its own login keeps its
// credentials in the host's home: use its API key variable, or Bind the
// login (Target "~/.claude") on purpose. For Codex bind its files
// (~/.codex/auth.json, config.toml), not the directory: Codex 0.169
// agents sharing one writable ~/.codex in several sandboxes at once hung
// after their turns (each sandbox keeps its own ~/.codex in its home).
// Starting the sandbox costs about 10 ms per execution
// (BenchmarkSandboxStartup), 10-30 ms a stage of Claude Code or Codex,
// 2-4 % of it (BenchmarkSandboxRealCLIStage); the decoys add 20-60 ms a
// stage on a loaded machine, mostly making and removing their directories
// (BenchmarkSandboxDecoys, docs/performance.md).
//
// # Permissions
//
// An agent CLI in a non-interactive run refuses what its own permission
// rules do not grant (Claude Code in -p mode refuses every edit and
// command and still ends "success"; codex exec runs read-only). With the
// format's default command (Config.Argv empty; Config.Permissions changes
// it) the driver grants each CLI what a stage needs, its permission
// profile:
//   - in the OS sandbox, the sandbox is the boundary and the CLI's own
//     prompts are off: Claude Code --permission-mode bypassPermissions
//     (IS_SANDBOX=1 lets it as root), Codex
//     --dangerously-bypass-approvals-and-sandbox (Gemini CLI's default
//     command runs --approval-mode yolo, its only mode offering a shell,
//     sandboxed or not: run it in the sandbox);
//   - unsandboxed, Claude Code gets --permission-mode acceptEdits (edits
//     in the workspace), --add-dir for the request's Writable paths (a
//     team's result directory) and --allowedTools for git's everyday
//     commands (ClaudeGitTools), the request's Constraints.Commands (a
//     team's gate commands; never a shell or an interpreter) and its MCP
//     servers' tools; Codex gets --sandbox workspace-write, approval
//     policy never, and --add-dir for the worktree's own git directory,
//     the object store, its branch's ref directories and the Writable
//     paths (Codex keeps a workspace's .git read-only).
//
// A host widens a profile with Constraints.AllowedTools and Commands (or
// Config.Env, Sandbox.Binds), narrows it with its own Argv and
// PermissionsNone, or keeps it with its own Argv and PermissionsProfile.
// What the CLI refused anyway is in AgentResult.PermissionDenials; a team
// pauses a build that was refused and changed nothing at once, naming the
// tools. A CLI retrying a refused key (a 401 or 403: Claude Code's api_retry,
// Codex's "Reconnecting...") is stopped at its first retry, the cause in
// AgentResult.Error and APIError; other retries (a 429, a 529) are
// phases.StreamRetry events, and the CLI goes on (Gemini CLI announces its
// retries on stderr only: the driver hands stderr lines to its parser).
//
// # Stopping it
//
// The agent runs in a process group of its own (in a sandbox, with bwrap
// as its leader). When the timeout
// (AgentRequest.Timeout, else Config.Timeout) expires or the context ends,
// the whole group gets SIGTERM and, Config.KillGrace later (default 5s),
// SIGKILL, so children the agent spawned go with it. (In a sandbox SIGTERM
// goes to the group's processes but bwrap, whose death would SIGKILL the
// sandbox at once; an agent killed by signal n, which bwrap reports as
// exit status 128+n, is reported as killed by n.) When the agent exits
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
// whose pid now belongs to another process, is removed and reported with
// no PIDs: its agent ended with its host (a sandboxed agent dies with it)
// and may have left half-done work, such as git's lock files. Each reap is
// logged and reported to Config.OnReap. Driver.ReapStale does the same for
// every lease in LeaseDir before any agent runs (a team calls it when a
// Run starts).
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
// Linux only: the reaper reads /proc. A sandboxed agent does not outlive
// its host: bwrap kills the sandbox when its parent dies
// (--die-with-parent), so the reaper finds nothing to do.
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
// ErrNoCommand, ErrUnknownFormat, ErrLeaseHeld, *OrphanError,
// ErrNoSandbox, *SandboxError (the sandbox could not be set up; then with
// the partial result), *ScriptPlaceholderError, *PromptTooLongError,
// *SessionIDError, or the context ending (then with the partial result).
//
// # Formats
//
// FormatClaude parses `claude -p --output-format stream-json --verbose`:
// tokens are the result line's modelUsage summed over the models, which
// counts subagents and matches total_cost_usd (its usage field counts the
// main conversation only). FormatCodex parses `codex exec --json`, both the
// ThreadEvent stream (thread.started, turn.completed, item.completed, ...)
// and the {"id","msg"} stream of versions before it. FormatGemini parses
// `gemini --output-format stream-json` (Gemini CLI 0.61): tokens are the
// result's stats, the run's own (its model router's request included, and
// a resumed run's only); its default command (GeminiArgs) runs in yolo
// approval mode with the prompt on stdin, the request's Writable paths as
// --include-directories (its file tools refuse anything outside its
// workspace directories) and the MCP servers in a settings file of its own
// (GeminiSettingsEnv). Gemini CLI prints its retries of a 429 or 5xx on
// stderr only. FormatText (the default) passes lines through. Unparseable lines are reported as text and
// never fail a run. Config.NewParser plugs in a parser for another format.
// testdata/README.md names the published output each parser is tested on.
package agentcmd
