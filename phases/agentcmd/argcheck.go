package agentcmd

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

// ErrPromptInScript is matched by a *ScriptPlaceholderError.
var ErrPromptInScript = errors.New("agentcmd: placeholder inside a script argument")

// ScriptPlaceholderError means the command puts a placeholder inside the
// code an interpreter runs (sh -c '... {prompt}', python -c, node -e, ...):
// the prompt, written by whoever wrote the story, would be pasted into a
// script and run as code. Pass it as a separate argument instead
// (sh -c 'agent "$1"' sh {prompt}: the shell never parses it), or through
// stdin (PromptStdin).
type ScriptPlaceholderError struct {
	// Arg is the script argument as configured; Placeholder the one found.
	Arg, Placeholder string
}

func (e *ScriptPlaceholderError) Error() string {
	return fmt.Sprintf("agentcmd: %s inside the script argument %q would be run as code: pass it as an argument of its own after the script (sh -c '... \"$1\"' sh %s) or on stdin (PromptStdin)",
		e.Placeholder, truncate(e.Arg, 120), e.Placeholder)
}

func (e *ScriptPlaceholderError) Unwrap() error { return ErrPromptInScript }

// placeholders are the names Argv expands.
func placeholders() []string {
	return []string{"{prompt}", "{task}", "{feedback}", "{session}", "{workspace}", "{iteration}"}
}

// codeFlags are the options of interpreter name whose argument is code.
func codeFlags(name string) []string {
	switch name {
	case "python", "python2", "python3":
		return []string{"-c"}
	case "perl":
		return []string{"-e", "-E"}
	case "ruby":
		return []string{"-e"}
	case "node", "nodejs":
		return []string{"-e", "--eval", "-p", "--print"}
	case "deno":
		return []string{"eval"}
	case "bun":
		return []string{"-e", "--eval"}
	case "php":
		return []string{"-r"}
	}
	return nil
}

// isShell reports whether name is a POSIX-like shell, whose -c runs its
// first operand.
func isShell(name string) bool {
	switch name {
	case "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "fish", "busybox":
		return true
	}
	return false
}

// checkScriptPlaceholders refuses an argv template that expands a
// placeholder inside an interpreter's code argument.
func checkScriptPlaceholders(argv []string) error {
	argv = skipWrappers(argv)
	if len(argv) == 0 {
		return nil
	}
	name := filepath.Base(argv[0])
	var script string
	found := false
	switch {
	case isShell(name):
		args := argv[1:]
		if name == "busybox" && len(args) > 0 {
			args = args[1:] // busybox sh -c ...
		}
		cflag := false
		for i := 0; i < len(args); i++ {
			a := args[i]
			if a == "--" {
				if cflag && i+1 < len(args) {
					script, found = args[i+1], true
				}
				break
			}
			if a == "-o" || a == "+o" || a == "-O" || a == "+O" {
				i++
				continue
			}
			if len(a) > 1 && (a[0] == '-' || a[0] == '+') && !strings.HasPrefix(a, "--") {
				if strings.ContainsRune(a[1:], 'c') {
					cflag = true
				}
				continue
			}
			if strings.HasPrefix(a, "--") {
				continue
			}
			if cflag {
				script, found = a, true
			}
			break
		}
	default:
		flags := codeFlags(pythonVersionless(name))
		for i := 1; i < len(argv) && !found; i++ {
			for _, f := range flags {
				switch {
				case argv[i] == f && i+1 < len(argv):
					script, found = argv[i+1], true
				case strings.HasPrefix(argv[i], f+"=") && strings.HasPrefix(f, "--"):
					script, found = strings.TrimPrefix(argv[i], f+"="), true
				}
			}
		}
	}
	if !found {
		return nil
	}
	for _, p := range placeholders() {
		if strings.Contains(script, p) {
			return &ScriptPlaceholderError{Arg: script, Placeholder: p}
		}
	}
	return nil
}

// pythonVersionless turns python3.12 into python3.
func pythonVersionless(name string) string {
	if strings.HasPrefix(name, "python") {
		if i := strings.IndexByte(name, '.'); i > 0 {
			return name[:i]
		}
	}
	return name
}

// skipWrappers drops commands that run their arguments as a command (env,
// with its options and assignments; nice; nohup; setsid; timeout's
// duration).
func skipWrappers(argv []string) []string {
	for len(argv) > 0 {
		switch filepath.Base(argv[0]) {
		case "env":
			argv = argv[1:]
			for len(argv) > 0 && (strings.HasPrefix(argv[0], "-") || strings.Contains(argv[0], "=")) {
				argv = argv[1:]
			}
		case "nice", "nohup", "setsid", "stdbuf", "exec":
			argv = argv[1:]
			for len(argv) > 0 && strings.HasPrefix(argv[0], "-") {
				argv = argv[1:]
			}
		case "timeout":
			argv = argv[1:]
			for len(argv) > 0 && strings.HasPrefix(argv[0], "-") {
				argv = argv[1:]
			}
			if len(argv) > 0 {
				argv = argv[1:] // the duration
			}
		default:
			return argv
		}
	}
	return argv
}

// ErrPromptTooLong is matched by a *PromptTooLongError.
var ErrPromptTooLong = errors.New("agentcmd: prompt too long for the command line")

// PromptTooLongError means the command line, with the prompt in it, is
// beyond what the kernel takes (one argument at most MaxArgLen bytes, all
// of them and the environment at most about a quarter of the stack
// limit), and the driver could not move the prompt to stdin: the prompt is
// placed by a placeholder, or the agent's format is not known to read
// stdin. Use PromptStdin.
type PromptTooLongError struct {
	// Bytes is the longest argument's length; Total that of the whole
	// command line and environment; Limit the one exceeded.
	Bytes, Total, Limit int
}

func (e *PromptTooLongError) Error() string {
	return fmt.Sprintf("agentcmd: the command line is too long for the kernel (longest argument %d bytes, all %d bytes, limit %d): deliver the prompt on stdin (Config.PromptVia PromptStdin)",
		e.Bytes, e.Total, e.Limit)
}

func (e *PromptTooLongError) Unwrap() error { return ErrPromptTooLong }

// MaxArgLen is the longest single argument Linux passes to a program
// (MAX_ARG_STRLEN, 32 pages, with its terminating NUL).
const MaxArgLen = 32*4096 - 1

// argSpaceReserve is left free of the kernel's total for the sandbox's own
// arguments and what the kernel puts beside them.
const argSpaceReserve = 64 << 10

// argSpace is the room for argv and the environment together: a quarter
// of the stack limit, as Linux allows, at most 6 MiB here, at least 128 KiB.
func argSpace() int {
	var rl syscall.Rlimit
	limit := 2 << 20
	if err := syscall.Getrlimit(syscall.RLIMIT_STACK, &rl); err == nil && rl.Cur > 0 {
		q := rl.Cur / 4
		if q > 6<<20 {
			q = 6 << 20
		}
		limit = int(q)
	}
	return max(limit, 128<<10)
}

// checkArgSize reports a command line the kernel would refuse (E2BIG).
func checkArgSize(argv, env []string) error {
	longest, total := 0, 0
	for _, a := range argv {
		longest = max(longest, len(a))
		total += len(a) + 1 + 8 // the string, its NUL and its pointer
	}
	for _, kv := range env {
		if len(kv) > MaxArgLen {
			return &PromptTooLongError{Bytes: len(kv), Total: total, Limit: MaxArgLen}
		}
		total += len(kv) + 1 + 8
	}
	if longest > MaxArgLen {
		return &PromptTooLongError{Bytes: longest, Total: total, Limit: MaxArgLen}
	}
	if limit := argSpace() - argSpaceReserve; total > limit {
		return &PromptTooLongError{Bytes: longest, Total: total, Limit: limit}
	}
	return nil
}

// ErrInvalidSessionID is matched by a *SessionIDError.
var ErrInvalidSessionID = errors.New("agentcmd: invalid session id")

// SessionIDError means a session id (read from an agent's output, or given
// in a request) is not one the format's CLI issues, so it is not passed to
// --resume: Claude Code's and Codex's are UUIDs; other formats' are 1 to
// 128 of [A-Za-z0-9._:-], not starting with "-".
type SessionIDError struct {
	ID     string
	Format Format
}

func (e *SessionIDError) Error() string {
	return fmt.Sprintf("agentcmd: session id %q is not a valid %s session id", truncate(e.ID, 80), e.Format)
}

func (e *SessionIDError) Unwrap() error { return ErrInvalidSessionID }

var (
	uuidPattern      = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:][A-Za-z0-9._:-]{0,127}$`)
)

// checkSessionID reports a session id format f's CLI would not have issued.
func checkSessionID(f Format, id string) error {
	ok := false
	switch f {
	case FormatClaude, FormatCodex, FormatGemini:
		ok = uuidPattern.MatchString(id)
	default:
		ok = sessionIDPattern.MatchString(id)
	}
	if !ok {
		return &SessionIDError{ID: id, Format: f}
	}
	return nil
}
