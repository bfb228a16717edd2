package gates

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
)

var feedbackPlan = phases.GatePlan{Levels: []phases.GateLevel{
	{Level: phases.L0Contracts, Checks: []phases.GateCheck{{Name: "vet", Argv: []string{"go", "vet", "./..."}}}},
	{Level: phases.L1Tests, Checks: []phases.GateCheck{
		{Name: "unit", Argv: []string{"go", "test", "-run", "Test Foo", "./..."}, Timeout: 5 * time.Minute},
		{Name: "race", Argv: []string{"go", "test", "-race", "./..."}},
	}},
	{Level: phases.L2BlackBox, Checks: []phases.GateCheck{{Name: "e2e", Argv: []string{"./e2e.sh"}}}},
}}

var feedbackSnapshot = phases.Snapshot{
	Files: []phases.FileDiff{
		{Path: "calc.go", Status: "M", Insertions: 12, Deletions: 3},
		{Path: "calc_test.go", Status: "?", Insertions: 20},
		{Path: "logo.png", Status: "A", Binary: true},
	},
	Commits:     []phases.Commit{{Hash: "abc", Subject: "add calc"}},
	Uncommitted: []string{"calc_test.go"},
	Insertions:  32, Deletions: 3,
}

func failedReport() phases.VerificationReport {
	return phases.VerificationReport{Levels: []phases.LevelResult{
		{Level: phases.L0Contracts, Passed: true, Checks: []phases.CheckResult{{Name: "vet", Level: phases.L0Contracts, Passed: true}}},
		{Level: phases.L1Tests, Checks: []phases.CheckResult{
			{Name: "unit", Level: phases.L1Tests, Argv: []string{"go", "test", "-run", "Test Foo", "./..."}, ExitCode: -1, TimedOut: true,
				Output: "=== RUN   TestFoo\n"},
			{Name: "race", Level: phases.L1Tests, ExitCode: 1,
				Output: "--- FAIL: TestAdd (0.00s)\n    calc_test.go:9: Add(2, 2) = 5, want 4\nFAIL\n"},
		}},
		{Level: phases.L2BlackBox, Skipped: true},
	}}
}

func TestFeedbackText(t *testing.T) {
	g := NewFeedbackGenerator(FeedbackConfig{})
	text, err := g.Generate(context.Background(), feedbackSnapshot, failedReport(), feedbackPlan, phases.FeedbackOptions{RunID: "r", Iteration: 2})
	require.NoError(t, err)
	assert.Equal(t, `Verification failed on iteration 2: 2 checks failed (L1).
Not run because an earlier level failed: L2.

[L1] unit: timed out after 5m0s
Command: go test -run 'Test Foo' ./...
Output:
=== RUN   TestFoo

[L1] race: exit code 1
Command: go test -race ./...
Output:
--- FAIL: TestAdd (0.00s)
    calc_test.go:9: Add(2, 2) = 5, want 4
FAIL

Changes since the base: 3 files (+32 -3), 1 commit, 1 uncommitted path:
  M calc.go (+12 -3)
  ? calc_test.go (+20 -0)
  A logo.png (binary)

What to do: fix the code so that every failing check above passes, and keep the checks that passed passing. Do not weaken, skip or delete the checks themselves.
`, text)

	again, err := g.Generate(context.Background(), feedbackSnapshot, failedReport(), feedbackPlan, phases.FeedbackOptions{RunID: "r", Iteration: 2})
	require.NoError(t, err)
	assert.Equal(t, text, again, "deterministic")
}

func TestFeedbackSmallCases(t *testing.T) {
	ciFailed := phases.VerificationReport{Levels: []phases.LevelResult{{Level: phases.L3CI, Checks: []phases.CheckResult{
		{Name: "ci", Level: phases.L3CI, ExitCode: -1},
	}}}}
	manyFiles := phases.Snapshot{Insertions: 5}
	for i := range 5 {
		manyFiles.Files = append(manyFiles.Files, phases.FileDiff{Path: fmt.Sprintf("f%d.go", i), Status: "M", Insertions: 1})
	}
	tests := []struct {
		name     string
		cfg      FeedbackConfig
		snapshot phases.Snapshot
		want     string
	}{
		{
			name: "nothing changed, no output, custom instruction",
			cfg:  FeedbackConfig{Instruction: "Try again."},
			want: "Verification failed: 1 check failed (L3).\n\n[L3] ci: exit code -1\nOutput: (none)\n\n" +
				"Changes since the base: none. The last iteration changed nothing.\n\nTry again.\n",
		},
		{
			name:     "files beyond MaxFiles are counted",
			cfg:      FeedbackConfig{MaxFiles: 2, Instruction: "Fix it."},
			snapshot: manyFiles,
			want: "Verification failed: 1 check failed (L3).\n\n[L3] ci: exit code -1\nOutput: (none)\n\n" +
				"Changes since the base: 5 files (+5 -0):\n  M f0.go (+1 -0)\n  M f1.go (+1 -0)\n  ... and 3 more\n\nFix it.\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, err := NewFeedbackGenerator(tt.cfg).Generate(context.Background(), tt.snapshot, ciFailed, phases.GatePlan{}, phases.FeedbackOptions{})
			require.NoError(t, err)
			assert.Equal(t, tt.want, text)
		})
	}
}

func TestFeedbackBudget(t *testing.T) {
	big := func(i, n int) string {
		return fmt.Sprintf("HEAD-%d\n", i) + strings.Repeat(fmt.Sprintf("noise line of check %d\n", i), n/20) + fmt.Sprintf("TAIL-%d", i)
	}
	report := func(checks, outputBytes int) phases.VerificationReport {
		lr := phases.LevelResult{Level: phases.L1Tests}
		for i := range checks {
			lr.Checks = append(lr.Checks, phases.CheckResult{
				Name: fmt.Sprintf("check-%03d", i), Level: phases.L1Tests, ExitCode: 1,
				Argv: []string{"sh", "-c", strings.Repeat("x", 1000)}, Output: big(i, outputBytes),
			})
		}
		return phases.VerificationReport{Levels: []phases.LevelResult{lr}}
	}
	manyFiles := phases.Snapshot{}
	for i := range 500 {
		manyFiles.Files = append(manyFiles.Files, phases.FileDiff{Path: fmt.Sprintf("dir/some/long/path/file%04d.go", i), Status: "M"})
	}
	tests := []struct {
		name        string
		maxBytes    int
		checks      int
		outputBytes int
		wantAllHT   bool // every check's head and tail marks present
		wantMore    bool // some checks summarised as "more failing checks"
	}{
		{"one huge output", 0, 1, 1 << 20, true, false},
		{"a few large outputs", 0, 5, 100 << 10, true, false},
		{"mixed sizes", 4096, 3, 2000, true, false},
		{"many failures", 0, 300, 1000, false, true},
		{"minimum budget", 1, 10, 10000, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewFeedbackGenerator(FeedbackConfig{MaxBytes: tt.maxBytes, MaxFiles: 1000})
			text, err := g.Generate(context.Background(), manyFiles, report(tt.checks, tt.outputBytes), phases.GatePlan{}, phases.FeedbackOptions{})
			require.NoError(t, err)
			limit := max(orDefault(tt.maxBytes, DefaultFeedbackBytes), MinFeedbackBytes)
			assert.LessOrEqual(t, len(text), limit)
			assert.Greater(t, len(text), limit*3/4, "the budget is used, not wasted")
			assert.True(t, strings.HasSuffix(text, DefaultInstruction+"\n"), "the instruction is always kept")
			assert.Contains(t, text, "[L1] check-000: exit code 1")
			assert.Contains(t, text, "HEAD-0\n")
			if tt.wantAllHT {
				for i := range tt.checks {
					assert.Contains(t, text, fmt.Sprintf("HEAD-%d\n", i))
					assert.Contains(t, text, fmt.Sprintf("TAIL-%d\n", i))
				}
			}
			assert.Equal(t, tt.wantMore, strings.Contains(text, "more failing checks not shown"))
		})
	}
	t.Run("short outputs leave room for long ones", func(t *testing.T) {
		r := report(2, 0)
		r.Levels[0].Checks[0].Output = "short"
		r.Levels[0].Checks[1].Output = big(1, 20000)
		text, err := NewFeedbackGenerator(FeedbackConfig{MaxBytes: 3000}).Generate(context.Background(), phases.Snapshot{}, r, phases.GatePlan{}, phases.FeedbackOptions{})
		require.NoError(t, err)
		assert.Contains(t, text, "\nshort\n")
		assert.Greater(t, len(text), 2900)
		assert.LessOrEqual(t, len(text), 3000)
	})
}

func TestFeedbackInvalidInput(t *testing.T) {
	g := NewFeedbackGenerator(FeedbackConfig{})
	_, err := g.Generate(context.Background(), phases.Snapshot{}, phases.VerificationReport{Passed: true}, phases.GatePlan{}, phases.FeedbackOptions{})
	assert.ErrorIs(t, err, ErrReportPassed)
	_, err = g.Generate(context.Background(), phases.Snapshot{}, phases.VerificationReport{Passed: true, Skipped: true}, phases.GatePlan{}, phases.FeedbackOptions{})
	assert.ErrorIs(t, err, ErrReportPassed)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = g.Generate(ctx, phases.Snapshot{}, failedReport(), feedbackPlan, phases.FeedbackOptions{})
	assert.ErrorIs(t, err, context.Canceled)
}

func TestFeedbackFromARealVerification(t *testing.T) {
	plan := phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: []phases.GateCheck{
		{Name: "unit", Argv: []string{"sh", "-c", "echo 'want 4, got 5' >&2; exit 2"}},
	}}}}
	report, err := NewVerifier(VerifierConfig{}).Verify(context.Background(), workspace(t), plan, phases.VerifyOptions{})
	require.NoError(t, err)
	text, err := NewFeedbackGenerator(FeedbackConfig{}).Generate(context.Background(), phases.Snapshot{}, report, plan, phases.FeedbackOptions{})
	require.NoError(t, err)
	assert.Contains(t, text, "[L1] unit: exit code 2\nCommand: sh -c 'echo '\\''want 4, got 5'\\'' >&2; exit 2'\nOutput:\nwant 4, got 5\n")
}

func TestTrimMiddle(t *testing.T) {
	lines := strings.Repeat("0123456789\n", 100)
	tests := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"fits", "short", 10, "short"},
		{"too small for the marker", strings.Repeat("x", 100), 10, ""},
		{"cuts on line breaks", lines, 80, "0123456789\n0123456789\n\n[... 1056 bytes omitted ...]\n0123456789\n0123456789\n"},
		{"keeps runes whole", strings.Repeat("é", 100), 60, strings.Repeat("é", 7) + "\n[... 170 bytes omitted ...]\n" + strings.Repeat("é", 8)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := trimMiddle(tt.in, tt.max)
			assert.Equal(t, tt.want, got)
			assert.LessOrEqual(t, len(got), tt.max)
		})
	}
}
