package gates

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unicode/utf8"

	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/phases"
)

// runCheck runs one check. A check that fails, times out or cannot start is
// a result; only the end of ctx is an error.
func (v *Verifier) runCheck(ctx context.Context, dir string, level phases.Level, check phases.GateCheck) (res phases.CheckResult, _ error) {
	res = phases.CheckResult{Name: check.Name, Level: level, Argv: check.Argv, ExitCode: -1}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("gates: %s check %q: %w", level, check.Name, err)
	}
	timeout := check.Timeout
	if timeout == 0 {
		timeout = v.defaultTimeout
	}
	checkCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var timedOut atomic.Bool
	timer := v.clock.AfterFunc(timeout, func() {
		timedOut.Store(true)
		cancel()
	})
	defer timer.Stop()

	run := CheckCommand{Dir: dir, Argv: check.Argv, Env: append(slices.Clone(v.env), check.Env...)}
	env := append(gitexec.WithoutOwner(os.Environ()), run.Env...)
	if v.sandbox != nil {
		contained, err := v.sandbox.Contain(checkCtx, run)
		if err != nil {
			return res, fmt.Errorf("gates: %s check %q: %w: %w", level, check.Name, ErrNotContained, err)
		}
		if len(contained.Argv) == 0 {
			return res, fmt.Errorf("gates: %s check %q: %w: the sandbox returned no command", level, check.Name, ErrNotContained)
		}
		if contained.Done != nil {
			defer func() {
				// Even when ctx ended: what the sandbox made goes.
				res.Refused = contained.Done(context.WithoutCancel(ctx))
			}()
		}
		run, env = contained.CheckCommand, contained.Env
	}

	out := newHeadTail(v.outputLimit)
	cmd := exec.CommandContext(checkCtx, run.Argv[0], run.Argv[1:]...)
	cmd.Dir = run.Dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so that killing it on timeout also kills
	// whatever it started (go test's test binaries, a dev server, ...).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = v.waitDelay

	start := v.clock.Now()
	err := cmd.Run()
	res.Duration = v.clock.Since(start)
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		res.Passed, res.ExitCode = true, 0
	case ctx.Err() != nil:
		return res, fmt.Errorf("gates: %s check %q: %w", level, check.Name, ctx.Err())
	case timedOut.Load():
		res.TimedOut = true
		out.note(fmt.Sprintf("foreman: timed out after %s; the check's process group was killed", timeout))
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			out.note("foreman: killed by signal " + ws.Signal().String())
		}
	case cmd.Process == nil:
		out.note("foreman: cannot start check: " + err.Error())
	default:
		out.note("foreman: check failed: " + err.Error())
	}
	res.Output = out.String()
	v.log.LogAttrs(ctx, slog.LevelDebug, "gate check", slog.String("level", string(level)), slog.String("check", check.Name),
		slog.Bool("passed", res.Passed), slog.Int("exit_code", res.ExitCode), slog.Bool("timed_out", res.TimedOut),
		slog.Duration("duration", res.Duration))
	return res, nil
}

// headTail keeps the first and last bytes written to it, up to limit in
// all, and counts what it drops in between.
type headTail struct {
	mu       sync.Mutex
	headCap  int
	tailCap  int
	head     []byte
	tail     []byte // may grow to 2*tailCap before being cut back
	total    int
	trailing string // a note of Foreman's own, always kept
}

func newHeadTail(limit int) *headTail {
	return &headTail{headCap: limit / 2, tailCap: limit - limit/2}
}

func (b *headTail) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	b.total += n
	if room := b.headCap - len(b.head); room > 0 {
		take := min(room, len(p))
		b.head = append(b.head, p[:take]...)
		p = p[take:]
	}
	b.tail = append(b.tail, p...)
	if len(b.tail) > 2*b.tailCap {
		b.tail = append(b.tail[:0], b.tail[len(b.tail)-b.tailCap:]...)
	}
	return n, nil
}

func (b *headTail) note(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.trailing = s
}

// String returns the kept output, with a marker where bytes were dropped.
func (b *headTail) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	tail := b.tail
	if len(tail) > b.tailCap {
		tail = tail[len(tail)-b.tailCap:]
	}
	s := joinCut(string(b.head), string(tail), b.total-len(b.head)-len(tail))
	if b.trailing != "" {
		if s != "" && s[len(s)-1] != '\n' {
			s += "\n"
		}
		s += b.trailing
	}
	return s
}

// joinCut joins head and tail around a marker for the omitted bytes, moving
// the cut points to rune boundaries so that no character is split.
func joinCut(head, tail string, omitted int) string {
	if omitted <= 0 {
		return head + tail
	}
	// A rune is at most utf8.UTFMax bytes: only the last few can be cut.
	for i := len(head) - 1; i >= 0 && i >= len(head)-utf8.UTFMax; i-- {
		if utf8.RuneStart(head[i]) {
			if !utf8.FullRuneInString(head[i:]) {
				omitted += len(head) - i
				head = head[:i]
			}
			break
		}
	}
	for i := 0; i < utf8.UTFMax-1 && len(tail) > 0 && !utf8.RuneStart(tail[0]); i++ {
		tail = tail[1:]
		omitted++
	}
	return head + omissionMarker(omitted) + tail
}

func omissionMarker(n int) string {
	return "\n[... " + strconv.Itoa(n) + " bytes omitted ...]\n"
}

// lineSnapBytes is how far trimMiddle moves a cut to land on a line break.
const lineSnapBytes = 120

// trimMiddle shortens s to at most max bytes, marker included, keeping its
// head and tail.
func trimMiddle(s string, maxLen int) string {
	if len(s) <= maxLen {
		return s
	}
	keep := maxLen - len(omissionMarker(len(s)))
	if keep <= 0 {
		return ""
	}
	head, tail := s[:keep/2], s[len(s)-(keep-keep/2):]
	// Prefer whole lines when a line break is near the cut.
	if i := strings.LastIndexByte(head, '\n'); i >= 0 && len(head)-i <= lineSnapBytes {
		head = head[:i+1]
	}
	if i := strings.IndexByte(tail, '\n'); i >= 0 && i < lineSnapBytes {
		tail = tail[i+1:]
	}
	out := joinCut(head, tail, len(s)-len(head)-len(tail))
	for len(out) > maxLen { // the cut moved to rune boundaries can only shrink, but be sure
		out = out[:maxLen]
	}
	return out
}
