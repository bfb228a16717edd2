package agentcmd

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/phases"
)

// Format names an agent's output format. It selects the OutputParser, the
// default command, how a session is resumed and how AgentConstraints become
// flags.
type Format string

// The formats the driver understands.
const (
	// FormatText treats output as plain text. It has no default command, no
	// resume arguments and passes no constraint flags. It is the default.
	FormatText Format = "text"
	// FormatClaude parses Claude Code's `--output-format stream-json
	// --verbose` output. Default command:
	// claude -p --output-format stream-json --verbose. Resume: --resume <id>.
	// Constraints: --model, --max-turns, --allowedTools.
	FormatClaude Format = "claude-stream-json"
	// FormatCodex parses Codex's `codex exec --json` JSONL events. Default
	// command: codex exec --json. Resume: resume <id> (after the options,
	// before the prompt). Constraints: --model.
	FormatCodex Format = "codex-json"
	// FormatGemini parses Gemini CLI's `--output-format stream-json`
	// output. Default command: gemini --output-format stream-json
	// --skip-trust --approval-mode yolo, the prompt on stdin (see
	// NewGeminiParser and GeminiArgs). Resume: --resume <id>. Constraints:
	// --model.
	FormatGemini Format = "gemini-stream-json"
)

// PromptVia says how the prompt reaches the agent.
type PromptVia string

// Prompt delivery modes.
const (
	// PromptArg puts the prompt in argv: wherever an argument contains
	// {prompt}, {task} or {feedback}, or, when none does, as one extra final
	// argument (then, for FormatClaude, FormatCodex and FormatGemini, on stdin instead
	// when it is too long for argv). Linux limits one argument to
	// MaxArgLen bytes; a longer one is a *PromptTooLongError. A prompt in
	// argv is visible to every user of the machine (ps).
	PromptArg PromptVia = "arg"
	// PromptStdin writes the prompt to the agent's stdin and then closes it
	// (for FormatCodex with "-" as its prompt argument, which tells codex
	// exec to read stdin).
	PromptStdin PromptVia = "stdin"
)

// Defaults applied to zero Config fields.
const (
	DefaultKillGrace    = 5 * time.Second
	DefaultOutputLimit  = 64 << 10
	DefaultStderrLimit  = 16 << 10
	DefaultMaxLineBytes = 8 << 20
	// DefaultMaxOutputBytes is far above what a CLI prints in a long stage
	// (its stream of events, tool results among them), and far below what
	// would keep the driver busy parsing for long.
	DefaultMaxOutputBytes = 256 << 20
)

// Config configures a Driver. The zero value of every field means its
// documented default; the zero Config runs nothing (FormatText has no default
// command) and Execute reports ErrNoCommand.
type Config struct {
	// Argv is the agent command: Argv[0] is looked up in PATH (a relative
	// path with a slash is taken from the workspace), the rest are its
	// arguments. Every element may hold placeholders, expanded once per
	// execution: {prompt} (the composed prompt), {task} (the task prompt),
	// {feedback}, {session} (the session id, possibly empty), {workspace}
	// and {iteration}. Default: the Format's default command (none for
	// FormatText: Execute then fails with ErrNoCommand).
	Argv []string
	// Format selects the output parser and the format's resume and
	// constraint arguments. Default: FormatText.
	Format Format
	// ResumeArgs are added after Argv (and the constraint flags) when the
	// request carries a SessionID; they may use the same placeholders as
	// Argv. An empty non-nil slice disables resuming. Default: the
	// Format's own resume arguments (--resume {session} for Claude Code and
	// Gemini CLI, resume {session} for Codex, none for FormatText).
	ResumeArgs []string
	// Permissions says whether the driver grants the agent CLI what a
	// stage's work needs through the CLI's own permission flags (the
	// format's profile: permissions.go; Claude Code and Codex have one).
	// Default: PermissionsAuto (the profile with the format's default
	// command, nothing with a command of Argv's).
	Permissions Permissions
	// PromptVia says how the prompt is delivered. Default: PromptArg when
	// an argument places the prompt ({prompt}, {task}, {feedback}) or the
	// format is FormatText, else (Claude Code, Codex, Gemini CLI)
	// PromptStdin.
	PromptVia PromptVia
	// Prompt composes the prompt from a request. Default: DefaultPrompt
	// (the task prompt, followed, when there is feedback, by a "Feedback
	// from the previous iteration" section holding it).
	Prompt func(phases.AgentRequest) string
	// Env holds extra KEY=VALUE entries added to the agent's environment
	// (after the host's variables it passes and the driver's own
	// FOREMAN_WORKSPACE, FOREMAN_ITERATION, FOREMAN_SESSION_ID,
	// FOREMAN_AGENT_OWNER, and in a sandbox HOME, TMPDIR and IS_SANDBOX); a
	// key given here wins over those, and a key of the request's
	// AgentRequest.Env wins over one given here. A secret set here is the
	// agent's. Default: none.
	Env []string
	// PassEnv names further variables of the host's environment the agent
	// gets, beside DefaultPassEnv(Format): exact names, or prefixes ending
	// in "*" ("AWS_*"). A host naming a secret here hands it to the agent
	// (but not a proxy URL's credentials, in Env either: the agent gets a
	// local proxy that adds them; see the package doc). Default: none
	// (DefaultPassEnv(Format) only).
	PassEnv []string
	// SecretEnv names further variables (or "*" prefixes) of the host's
	// environment no agent gets, beside DefaultSecretEnv(), whatever
	// PassEnv says. Default: none (DefaultSecretEnv() only).
	SecretEnv []string
	// Sandbox configures the OS sandbox each agent runs in. Default: the
	// zero Sandbox, which runs agents in bubblewrap where it works (unless
	// the FOREMAN_SANDBOX environment variable says otherwise: see
	// Sandbox.Mode).
	Sandbox Sandbox
	// Timeout limits an execution whose request has no Timeout. Default:
	// none (zero or negative: no limit beyond the context).
	Timeout time.Duration
	// KillGrace is how long the process group has between SIGTERM and
	// SIGKILL, and how long, after SIGKILL, the driver still waits for the
	// output pipes to close before abandoning them. Default:
	// DefaultKillGrace, 5s (for a negative value too).
	KillGrace time.Duration
	// OutputLimit bounds AgentResult.Output, the tail of stdout, in bytes
	// (plus a one-line marker saying how much was omitted). Default:
	// DefaultOutputLimit, 64 KiB (for a negative value too).
	OutputLimit int
	// StderrLimit bounds AgentResult.Stderr, in bytes. Default:
	// DefaultStderrLimit, 16 KiB (for a negative value too).
	StderrLimit int
	// MaxLineBytes is the longest line handed to the parser in one piece;
	// a longer line is split and its pieces reported as text. Default:
	// DefaultMaxLineBytes, 8 MiB (for a negative value too).
	MaxLineBytes int
	// MaxOutputBytes bounds what one execution may print, stdout and
	// stderr together, in bytes: past it the driver stops the agent at
	// once (its process group: SIGTERM, SIGKILL after KillGrace), the
	// result fails ("stopped at once: the agent printed more than ...: an
	// output flood"), and a phases.StreamSandbox event says so (a team
	// counts it as a refusal). Default: DefaultMaxOutputBytes, 256 MiB;
	// negative for no bound.
	MaxOutputBytes int64
	// NewParser overrides the Format's parser, for agents with formats of
	// their own. It is called once per execution. Default: the Format's
	// own parser.
	NewParser func() OutputParser
	// Clock times executions and timeouts. Default: the wall clock.
	Clock foreman.Clock
	// Logger receives start, exit and termination records. Default: none
	// (nil: the records are discarded).
	Logger *slog.Logger
	// LeaseDir, when set, turns on the orphan reaper. Execute then keeps,
	// for each workspace, a lease file in this directory (named after a
	// hash of the workspace's absolute path) recording the running agent's
	// pid, process group and start time, and removes it once the group is
	// gone. A driver that finds a lease whose agent group still runs, left
	// by a host that died without cleaning up, kills that group (SIGTERM,
	// KillGrace, SIGKILL) before it starts another agent in the workspace,
	// and fails with *OrphanError if it will not die. It also kills, the
	// same way, any agent process still working in the workspace whose
	// AgentOwnerEnv names a host that is gone: one started by a host that
	// died before it wrote the lease. Executions in one
	// workspace are serialized: through one Driver the second waits for the
	// first; any other holder of the workspace's lock (another Driver, in
	// this process or another) makes Execute fail at once with
	// ErrLeaseHeld, so a host running several agents in turn in one
	// workspace should share a Driver (per-call settings go in
	// AgentRequest.Env). The directory must outlive the host process and
	// must not be inside a workspace. Default: none (empty: no leases and
	// no reaping).
	LeaseDir string
	// OnReap, when set, is called (from Execute, before the new agent
	// starts) for each orphaned agent group the reaper killed, and for
	// each lease left by an agent already gone (its host died; a sandboxed
	// agent dies with it), with no PIDs: what it was doing in the
	// workspace may have been cut off. Default: none (nil: no call).
	OnReap func(Reaped)
}

// adapter is what a Format contributes to an execution.
type adapter struct {
	defaultArgv []string
	resumeArgs  []string
	constraints func(phases.AgentConstraints) []string
	// endOfOptions puts "--" before a prompt appended as the last argument,
	// so that a prompt starting with "-" is not read as a flag.
	endOfOptions bool
	newParser    func() OutputParser
}

// adapterFor returns the adapter of f, or false for an unknown format.
func adapterFor(f Format) (adapter, bool) {
	switch f {
	case "", FormatText:
		return adapter{newParser: NewTextParser}, true
	case FormatClaude:
		return adapter{
			defaultArgv: []string{"claude", "-p", "--output-format", "stream-json", "--verbose"},
			resumeArgs:  []string{"--resume", "{session}"},
			constraints: claudeConstraintArgs,
			newParser:   NewClaudeParser,
		}, true
	case FormatCodex:
		return adapter{
			defaultArgv:  []string{"codex", "exec", "--json"},
			resumeArgs:   []string{"resume", "{session}"},
			constraints:  codexConstraintArgs,
			endOfOptions: true,
			newParser:    NewCodexParser,
		}, true
	case FormatGemini:
		return adapter{
			defaultArgv:  GeminiArgs(),
			resumeArgs:   []string{"--resume", "{session}"},
			constraints:  codexConstraintArgs, // --model
			endOfOptions: true,
			newParser:    NewGeminiParser,
		}, true
	}
	return adapter{}, false
}

func claudeConstraintArgs(c phases.AgentConstraints) []string {
	var args []string
	if c.Model != "" {
		args = append(args, "--model", c.Model)
	}
	if c.MaxTurns > 0 {
		args = append(args, "--max-turns", strconv.Itoa(c.MaxTurns))
	}
	if len(c.AllowedTools) > 0 {
		// --allowedTools takes several values (<tools...>): in the
		// "--flag value" form, Claude Code's option parser (commander)
		// would take the prompt after it for one more tool; with "=" it
		// takes exactly one.
		args = append(args, "--allowedTools="+strings.Join(c.AllowedTools, ","))
	}
	return args
}

func codexConstraintArgs(c phases.AgentConstraints) []string {
	if c.Model != "" {
		return []string{"--model", c.Model}
	}
	return nil
}

// DefaultPrompt is the prompt composition used when Config.Prompt is nil.
func DefaultPrompt(req phases.AgentRequest) string {
	if strings.TrimSpace(req.Feedback) == "" {
		return req.TaskPrompt
	}
	return req.TaskPrompt + "\n\n## Feedback from the previous iteration\n\n" + req.Feedback
}

// withDefaults returns cfg with its zero fields resolved.
func (cfg Config) withDefaults() Config {
	if cfg.Format == "" {
		cfg.Format = FormatText
	}
	if cfg.Prompt == nil {
		cfg.Prompt = DefaultPrompt
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	if cfg.OutputLimit <= 0 {
		cfg.OutputLimit = DefaultOutputLimit
	}
	if cfg.StderrLimit <= 0 {
		cfg.StderrLimit = DefaultStderrLimit
	}
	if cfg.MaxLineBytes <= 0 {
		cfg.MaxLineBytes = DefaultMaxLineBytes
	}
	if cfg.MaxOutputBytes == 0 {
		cfg.MaxOutputBytes = DefaultMaxOutputBytes
	}
	cfg.Clock = clock.OrReal(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// ParseFormat reads a format name as a person would type it: the Format
// values themselves, or the short names "claude", "codex" and "gemini". An
// unknown name is an error matching ErrUnknownFormat.
func ParseFormat(name string) (Format, error) {
	switch f := Format(name); f {
	case "claude":
		return FormatClaude, nil
	case "codex":
		return FormatCodex, nil
	case "gemini":
		return FormatGemini, nil
	default:
		if _, ok := adapterFor(f); ok {
			return f, nil
		}
		return "", fmt.Errorf("%w: %q (want text, claude, codex or gemini)", ErrUnknownFormat, name)
	}
}
