package gates

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentforeman/foreman/phases"
)

// Defaults for FeedbackConfig's zero values.
const (
	DefaultFeedbackBytes = 8 << 10
	MinFeedbackBytes     = 1 << 10
	DefaultFeedbackFiles = 20
	// DefaultInstruction ends every feedback text.
	DefaultInstruction = "What to do: fix the code so that every failing check above passes, and keep the checks " +
		"that passed passing. Do not weaken, skip or delete the checks themselves."
)

// FeedbackConfig configures a FeedbackGenerator. The zero value is ready to
// use.
type FeedbackConfig struct {
	// MaxBytes bounds the whole text, never less than MinFeedbackBytes
	// (1 KiB). Default: 8 KiB (DefaultFeedbackBytes).
	MaxBytes int
	// MaxFiles bounds the changed files listed. Default: 20
	// (DefaultFeedbackFiles).
	MaxFiles int
	// Instruction is the closing line telling the agent what to do.
	// Default: DefaultInstruction.
	Instruction string
}

// FeedbackGenerator is the default phases.FeedbackGenerator.
type FeedbackGenerator struct {
	maxBytes    int
	maxFiles    int
	instruction string
}

var _ phases.FeedbackGenerator = (*FeedbackGenerator)(nil)

// NewFeedbackGenerator returns a FeedbackGenerator configured by cfg.
func NewFeedbackGenerator(cfg FeedbackConfig) *FeedbackGenerator {
	g := &FeedbackGenerator{
		maxBytes:    max(orDefault(cfg.MaxBytes, DefaultFeedbackBytes), MinFeedbackBytes),
		maxFiles:    orDefault(cfg.MaxFiles, DefaultFeedbackFiles),
		instruction: cfg.Instruction,
	}
	if g.instruction == "" {
		g.instruction = DefaultInstruction
	}
	return g
}

// ErrReportPassed is returned when feedback is asked for a verification that
// passed (or was skipped): there is nothing to fix.
var ErrReportPassed = errors.New("gates: no feedback for a verification that passed")

const (
	// maxCommandBytes bounds how much of a check's command line is quoted.
	maxCommandBytes = 300
	// minExcerptBytes is the least output shown for a failing check; checks
	// that do not fit with that much are counted, not shown.
	minExcerptBytes = 400
)

// Generate writes feedback for report. Its output is deterministic and at
// most the configured number of bytes: the text around the failures is kept
// whole and the failing outputs share what is left, each keeping its head
// and tail.
func (g *FeedbackGenerator) Generate(ctx context.Context, snapshot phases.Snapshot, report phases.VerificationReport, plan phases.GatePlan, opts phases.FeedbackOptions) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("gates: %w", err)
	}
	if report.Passed {
		return "", ErrReportPassed
	}
	failed := report.FailedChecks()
	header := g.header(report, failed, opts)
	closing := "\n" + g.instruction + "\n"
	budget := g.maxBytes - len(header) - len(closing)
	changes := trimLines(g.changes(snapshot), max(budget/5, 0))
	budget -= len(changes)

	// Each shown check costs its description; the outputs share the rest.
	blocks := make([]checkBlock, 0, len(failed))
	reserve := budget
	for i, c := range failed {
		b := newCheckBlock(c, plan)
		more := ""
		if i < len(failed)-1 {
			more = moreChecks(len(failed) - i - 1)
		}
		// A check is shown only with room for a useful excerpt of its
		// output, except the first, which gets whatever room there is.
		excerpt := min(len(b.output), minExcerptBytes)
		if i == 0 {
			excerpt = 0
		}
		if b.fixedLen()+excerpt+len(more) > reserve {
			break
		}
		reserve -= b.fixedLen() + excerpt
		budget -= b.fixedLen()
		blocks = append(blocks, b)
	}
	if omitted := len(failed) - len(blocks); omitted > 0 {
		budget -= len(moreChecks(omitted))
	}
	shareOutputs(blocks, budget)

	var sb strings.Builder
	sb.WriteString(header)
	for _, b := range blocks {
		b.write(&sb)
	}
	if omitted := len(failed) - len(blocks); omitted > 0 {
		sb.WriteString(moreChecks(omitted))
	}
	sb.WriteString(changes)
	sb.WriteString(closing)
	text := sb.String()
	if len(text) > g.maxBytes { // only a custom instruction far longer than the budget gets here
		text = trimMiddle(text, g.maxBytes)
	}
	return text, nil
}

func moreChecks(n int) string {
	return fmt.Sprintf("\n(%d more failing %s not shown for lack of space.)\n", n, plural(n, "check", "checks"))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func (g *FeedbackGenerator) header(report phases.VerificationReport, failed []phases.CheckResult, opts phases.FeedbackOptions) string {
	var sb strings.Builder
	sb.WriteString("Verification failed")
	if opts.Iteration > 0 {
		fmt.Fprintf(&sb, " on iteration %d", opts.Iteration)
	}
	var failedLevels, skipped []string
	for _, lr := range report.Levels {
		switch {
		case lr.Skipped:
			skipped = append(skipped, string(lr.Level))
		case !lr.Passed:
			failedLevels = append(failedLevels, string(lr.Level))
		}
	}
	fmt.Fprintf(&sb, ": %d %s failed", len(failed), plural(len(failed), "check", "checks"))
	if len(failedLevels) > 0 {
		fmt.Fprintf(&sb, " (%s)", strings.Join(failedLevels, ", "))
	}
	sb.WriteString(".\n")
	if len(skipped) > 0 {
		fmt.Fprintf(&sb, "Not run because an earlier level failed: %s.\n", strings.Join(skipped, ", "))
	}
	return sb.String()
}

// changes summarises what the last iteration changed.
func (g *FeedbackGenerator) changes(s phases.Snapshot) string {
	if s.Empty() {
		return "\nChanges since the base: none. The last iteration changed nothing.\n"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nChanges since the base: %d %s (+%d -%d)", len(s.Files), plural(len(s.Files), "file", "files"), s.Insertions, s.Deletions)
	if len(s.Commits) > 0 {
		fmt.Fprintf(&sb, ", %d %s", len(s.Commits), plural(len(s.Commits), "commit", "commits"))
	}
	if len(s.Uncommitted) > 0 {
		fmt.Fprintf(&sb, ", %d uncommitted %s", len(s.Uncommitted), plural(len(s.Uncommitted), "path", "paths"))
	}
	sb.WriteString(":\n")
	for i, f := range s.Files {
		if i == g.maxFiles {
			fmt.Fprintf(&sb, "  ... and %d more\n", len(s.Files)-i)
			break
		}
		if f.Binary {
			fmt.Fprintf(&sb, "  %s %s (binary)\n", f.Status, f.Path)
		} else {
			fmt.Fprintf(&sb, "  %s %s (+%d -%d)\n", f.Status, f.Path, f.Insertions, f.Deletions)
		}
	}
	return sb.String()
}

// trimLines cuts s at a line boundary to at most maxLen bytes.
func trimLines(s string, maxLen int) string {
	if len(s) <= maxLen {
		return s
	}
	cut := strings.LastIndexByte(s[:maxLen], '\n')
	if cut < 0 {
		return ""
	}
	return s[:cut+1]
}

// checkBlock is one failing check as the feedback shows it.
type checkBlock struct {
	title   string // "[L1] unit: exit code 1\n"
	command string // "Command: go test ./...\n" or ""
	output  string // the full output; excerpt is what fits
	excerpt string
}

const (
	outputOpen  = "Output:\n"
	outputClose = "\n"
	noOutput    = "Output: (none)\n"
)

func newCheckBlock(c phases.CheckResult, plan phases.GatePlan) checkBlock {
	argv, timeout := c.Argv, ""
	for _, gl := range plan.Levels {
		if gl.Level != c.Level {
			continue
		}
		for _, pc := range gl.Checks {
			if pc.Name == c.Name {
				if len(argv) == 0 {
					argv = pc.Argv
				}
				if pc.Timeout > 0 {
					timeout = " after " + pc.Timeout.String()
				}
			}
		}
	}
	status := fmt.Sprintf("exit code %d", c.ExitCode)
	if c.TimedOut {
		status = "timed out" + timeout
	}
	b := checkBlock{title: fmt.Sprintf("\n[%s] %s: %s\n", c.Level, c.Name, status), output: strings.TrimRight(c.Output, "\n")}
	if len(argv) > 0 {
		cmd := quoteArgv(argv)
		if len(cmd) > maxCommandBytes {
			cmd = trimMiddle(cmd, maxCommandBytes)
		}
		b.command = "Command: " + strings.ReplaceAll(cmd, "\n", " ") + "\n"
	}
	return b
}

// fixedLen is the block's size without any output excerpt.
func (b checkBlock) fixedLen() int {
	if b.output == "" {
		return len(b.title) + len(b.command) + len(noOutput)
	}
	return len(b.title) + len(b.command) + len(outputOpen) + len(outputClose)
}

func (b checkBlock) write(sb *strings.Builder) {
	sb.WriteString(b.title)
	sb.WriteString(b.command)
	if b.output == "" {
		sb.WriteString(noOutput)
		return
	}
	if b.excerpt == "" { // cannot happen with minExcerptBytes reserved, but never print an empty block
		sb.WriteString("Output: (omitted for lack of space)\n")
		return
	}
	sb.WriteString(outputOpen)
	sb.WriteString(b.excerpt)
	sb.WriteString(outputClose)
}

// shareOutputs gives each block an excerpt of its output so that all fit in
// budget: short outputs are kept whole and what they leave is shared among
// the longer ones.
func shareOutputs(blocks []checkBlock, budget int) {
	order := make([]int, 0, len(blocks))
	for i, b := range blocks {
		if b.output != "" {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return len(blocks[a].output) - len(blocks[b].output) })
	for k, i := range order {
		share := max(budget, 0) / (len(order) - k)
		blocks[i].excerpt = trimMiddle(blocks[i].output, share)
		budget -= len(blocks[i].excerpt)
	}
}

// quoteArgv renders argv as a POSIX shell would need it typed.
func quoteArgv(argv []string) string {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
			quoted[i] = a
		} else {
			quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(quoted, " ")
}
