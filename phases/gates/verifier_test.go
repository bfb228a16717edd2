package gates

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/phases"
)

func sh(name, script string) phases.GateCheck {
	return phases.GateCheck{Name: name, Argv: []string{"sh", "-c", script}}
}

func workspace(t *testing.T) phases.Snapshot {
	return phases.Snapshot{WorkspacePath: t.TempDir()}
}

// levelSummary is "L0:pass L1:fail L2:skip" for compact assertions.
func levelSummary(r phases.VerificationReport) string {
	var parts []string
	for _, lr := range r.Levels {
		state := "fail"
		switch {
		case lr.Skipped:
			state = "skip"
		case lr.Passed:
			state = "pass"
		}
		parts = append(parts, string(lr.Level)+":"+state)
	}
	return strings.Join(parts, " ")
}

func TestLevelsRunInOrderAndStopAtFirstFailure(t *testing.T) {
	plan := phases.GatePlan{Levels: []phases.GateLevel{
		{Level: phases.L2BlackBox, Checks: []phases.GateCheck{sh("e2e", "true")}},
		{Level: phases.L1Tests, Checks: []phases.GateCheck{sh("unit", "echo boom; exit 3"), sh("other", "true")}},
		{Level: phases.L0Contracts, Checks: []phases.GateCheck{{Name: "go", Argv: []string{"go", "version"}}}},
	}}
	tests := []struct {
		name    string
		runAll  bool
		summary string
	}{
		{"stops at the first failing level", false, "L0:pass L1:fail L2:skip"},
		{"RunAll runs every level", true, "L0:pass L1:fail L2:pass"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan.RunAll = tt.runAll
			v := NewVerifier(VerifierConfig{})
			report, err := v.Verify(context.Background(), workspace(t), plan, phases.VerifyOptions{})
			require.NoError(t, err)
			assert.False(t, report.Passed)
			assert.False(t, report.Skipped)
			assert.Equal(t, tt.summary, levelSummary(report))

			l1, ok := report.Level(phases.L1Tests)
			require.True(t, ok)
			require.Len(t, l1.Checks, 2, "a level runs all its checks")
			assert.Equal(t, phases.CheckResult{
				Name: "unit", Level: phases.L1Tests, Argv: []string{"sh", "-c", "echo boom; exit 3"},
				ExitCode: 3, Output: "boom\n", Duration: l1.Checks[0].Duration,
			}, l1.Checks[0])
			assert.True(t, l1.Checks[1].Passed)
			l0, _ := report.Level(phases.L0Contracts)
			assert.Contains(t, l0.Checks[0].Output, "go version go1.")
			assert.Equal(t, []string{"unit"}, names(report.FailedChecks()))
		})
	}
}

func names(checks []phases.CheckResult) []string {
	var out []string
	for _, c := range checks {
		out = append(out, c.Name)
	}
	return out
}

func TestAllPassing(t *testing.T) {
	snap := workspace(t)
	plan := phases.GatePlan{Levels: []phases.GateLevel{
		{Level: phases.L0Contracts, Checks: []phases.GateCheck{
			{Name: "env", Argv: []string{"sh", "-c", `test "$(pwd -P)" = "$(cd "$WANT" && pwd -P)" && test "$LEVEL" = zero`}, Env: []string{"LEVEL=zero"}},
		}},
		{Level: phases.L1Tests, Checks: []phases.GateCheck{{Name: "true", Argv: []string{"true"}}}},
	}}
	v := NewVerifier(VerifierConfig{Env: []string{"WANT=" + snap.WorkspacePath}})
	report, err := v.Verify(context.Background(), snap, plan, phases.VerifyOptions{})
	require.NoError(t, err)
	assert.True(t, report.Passed, "%+v", report)
	assert.Equal(t, "L0:pass L1:pass", levelSummary(report))
}

func TestParallelChecksKeepPlanOrder(t *testing.T) {
	var checks []phases.GateCheck
	for i := range 6 {
		checks = append(checks, sh("c"+strconv.Itoa(i), "echo "+strconv.Itoa(i)+"; exit "+strconv.Itoa(i%2)))
	}
	v := NewVerifier(VerifierConfig{Parallelism: 3})
	report, err := v.Verify(context.Background(), workspace(t), phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: checks}}}, phases.VerifyOptions{})
	require.NoError(t, err)
	require.Len(t, report.Levels[0].Checks, 6)
	for i, c := range report.Levels[0].Checks {
		assert.Equal(t, "c"+strconv.Itoa(i), c.Name)
		assert.Equal(t, strconv.Itoa(i)+"\n", c.Output)
		assert.Equal(t, i%2 == 0, c.Passed)
	}
	assert.Equal(t, []string{"c1", "c3", "c5"}, names(report.FailedChecks()))
}

// mkfifo returns a named pipe in dir: a check writes to it and the test
// reads, which blocks until the check has really started.
func mkfifo(t *testing.T, dir string) string {
	p := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(p, 0o600))
	return p
}

func readLine(t *testing.T, path string) string {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	require.NoError(t, err)
	return strings.TrimSpace(line)
}

func TestTimeoutKillsTheWholeProcessGroup(t *testing.T) {
	becomeSubreaper(t)
	fc := clock.NewFake(time.Unix(0, 0))
	snap := workspace(t)
	fifo := mkfifo(t, snap.WorkspacePath)
	// The grandchild (sleep) inherits the output pipe. With a WaitDelay of
	// an hour, Verify can only return once the grandchild is dead too.
	v := NewVerifier(VerifierConfig{Clock: fc, WaitDelay: time.Hour})
	plan := phases.GatePlan{Levels: []phases.GateLevel{
		{Level: phases.L1Tests, Checks: []phases.GateCheck{{
			Name: "hang", Timeout: 30 * time.Second,
			Argv: []string{"sh", "-c", `echo before; sleep 300 & echo $! > fifo; wait`},
		}}},
		{Level: phases.L2BlackBox, Checks: []phases.GateCheck{sh("never", "true")}},
	}}
	done := make(chan phases.VerificationReport)
	go func() {
		report, err := v.Verify(context.Background(), snap, plan, phases.VerifyOptions{})
		assert.NoError(t, err)
		done <- report
	}()
	pid, err := strconv.Atoi(readLine(t, fifo))
	require.NoError(t, err)
	fc.Advance(29 * time.Second)
	select {
	case <-done:
		t.Fatal("check ended before its timeout")
	default:
	}
	fc.Advance(time.Second)
	report := <-done

	check := report.Levels[0].Checks[0]
	assert.True(t, check.TimedOut)
	assert.False(t, check.Passed)
	assert.Equal(t, -1, check.ExitCode)
	assert.Equal(t, "before\nforeman: timed out after 30s; the check's process group was killed", check.Output)
	assert.Equal(t, 30*time.Second, check.Duration)
	assert.Equal(t, "L1:fail L2:skip", levelSummary(report))
	assertKilled(t, pid)
}

// becomeSubreaper makes orphaned descendants of this test process its
// children, so that the test can wait for a check's grandchild to die.
func becomeSubreaper(t *testing.T) {
	const prSetChildSubreaper = 36
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		t.Skipf("prctl(PR_SET_CHILD_SUBREAPER): %v", errno)
	}
	t.Cleanup(func() { syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 0, 0) })
}

// assertKilled waits for the orphaned grandchild pid (reparented to this
// process by becomeSubreaper) and checks that SIGKILL ended it. A live
// process fails the test after a generous bound instead of hanging it.
func assertKilled(t *testing.T, pid int) {
	t.Helper()
	done := make(chan syscall.WaitStatus, 1)
	go func() {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		assert.NoError(t, err)
		done <- ws
	}()
	select {
	case ws := <-done:
		assert.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "grandchild ended with %v", ws)
	case <-time.After(30 * time.Second):
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("grandchild %d still running", pid)
	}
}

func TestDefaultTimeoutApplies(t *testing.T) {
	fc := clock.NewFake(time.Unix(0, 0))
	snap := workspace(t)
	fifo := mkfifo(t, snap.WorkspacePath)
	v := NewVerifier(VerifierConfig{Clock: fc, DefaultTimeout: time.Minute})
	plan := phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L0Contracts, Checks: []phases.GateCheck{
		sh("hang", "echo started > fifo; exec sleep 300"),
	}}}}
	done := make(chan phases.VerificationReport)
	go func() {
		report, err := v.Verify(context.Background(), snap, plan, phases.VerifyOptions{})
		assert.NoError(t, err)
		done <- report
	}()
	readLine(t, fifo)
	fc.Advance(time.Minute)
	report := <-done
	assert.True(t, report.Levels[0].Checks[0].TimedOut)
}

func TestOutputIsTrimmedToTheLimit(t *testing.T) {
	tests := []struct {
		name   string
		script string
		want   string
	}{
		{"at the limit, whole", `printf '%020d' 0`, "00000000000000000000"},
		{"one over, head and tail kept", `printf 'HEAD-12345'; printf x; printf '12345-TAIL'`, "HEAD-12345\n[... 1 bytes omitted ...]\n12345-TAIL"},
		{"large", `printf 'HEAD-12345'; head -c 100000 /dev/zero; printf '12345-TAIL'`, "HEAD-12345\n[... 100000 bytes omitted ...]\n12345-TAIL"},
		{"runes are not split", `printf 'aaaaaaaaaé'; printf 'xxxx'; printf 'éaaaaaaaaa'`, "aaaaaaaaa\n[... 8 bytes omitted ...]\naaaaaaaaa"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := NewVerifier(VerifierConfig{OutputLimit: 20})
			report, err := v.Verify(context.Background(), workspace(t), phases.GatePlan{Levels: []phases.GateLevel{
				{Level: phases.L1Tests, Checks: []phases.GateCheck{sh("out", tt.script)}},
			}}, phases.VerifyOptions{})
			require.NoError(t, err)
			assert.Equal(t, tt.want, report.Levels[0].Checks[0].Output)
		})
	}
}

func TestMissingBinaryIsAFailedCheck(t *testing.T) {
	v := NewVerifier(VerifierConfig{})
	report, err := v.Verify(context.Background(), workspace(t), phases.GatePlan{Levels: []phases.GateLevel{
		{Level: phases.L0Contracts, Checks: []phases.GateCheck{{Name: "lint", Argv: []string{"foreman-no-such-linter", "./..."}}}},
		{Level: phases.L1Tests, Checks: []phases.GateCheck{sh("unit", "true")}},
	}}, phases.VerifyOptions{})
	require.NoError(t, err)
	assert.False(t, report.Passed)
	check := report.Levels[0].Checks[0]
	assert.Equal(t, -1, check.ExitCode)
	assert.Contains(t, check.Output, "foreman: cannot start check:")
	assert.Contains(t, check.Output, "foreman-no-such-linter")
	assert.Equal(t, "L0:fail L1:skip", levelSummary(report))
}

func TestCancellationIsAnError(t *testing.T) {
	t.Run("while a check runs", func(t *testing.T) {
		becomeSubreaper(t)
		snap := workspace(t)
		fifo := mkfifo(t, snap.WorkspacePath)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		type result struct {
			report phases.VerificationReport
			err    error
		}
		done := make(chan result)
		go func() {
			report, err := NewVerifier(VerifierConfig{WaitDelay: time.Hour}).Verify(ctx, snap, phases.GatePlan{Levels: []phases.GateLevel{
				{Level: phases.L0Contracts, Checks: []phases.GateCheck{sh("quick", "true")}},
				{Level: phases.L1Tests, Checks: []phases.GateCheck{sh("hang", "sleep 300 & echo $! > fifo; wait")}},
			}}, phases.VerifyOptions{})
			done <- result{report, err}
		}()
		pid, err := strconv.Atoi(readLine(t, fifo))
		require.NoError(t, err)
		cancel()
		r := <-done
		require.ErrorIs(t, r.err, context.Canceled)
		assert.False(t, r.report.Passed)
		assert.Equal(t, "L0:pass", levelSummary(r.report), "the report holds what finished")
		assertKilled(t, pid)
	})
	t.Run("before starting", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := NewVerifier(VerifierConfig{}).Verify(ctx, workspace(t), phases.GatePlan{Levels: []phases.GateLevel{
			{Level: phases.L0Contracts, Checks: []phases.GateCheck{sh("quick", "true")}},
		}}, phases.VerifyOptions{})
		assert.ErrorIs(t, err, context.Canceled)
	})
}

type fakeCI struct {
	result phases.LevelResult
	err    error
	calls  int
	got    phases.Snapshot
}

func (f *fakeCI) Check(_ context.Context, s phases.Snapshot) (phases.LevelResult, error) {
	f.calls++
	f.got = s
	return f.result, f.err
}

func TestL3UsesTheCIChecker(t *testing.T) {
	ciFailure := errors.New("CI API unreachable")
	tests := []struct {
		name       string
		ci         *fakeCI
		l3Checks   []phases.GateCheck
		wantErr    error
		wantPassed bool
		wantChecks []string
	}{
		{
			name:       "CI passes",
			ci:         &fakeCI{result: phases.LevelResult{Passed: true, Checks: []phases.CheckResult{{Name: "build", Passed: true}}}},
			wantPassed: true, wantChecks: []string{"build"},
		},
		{
			name:       "CI fails with details",
			ci:         &fakeCI{result: phases.LevelResult{Checks: []phases.CheckResult{{Name: "build", Passed: true}, {Name: "e2e", Output: "red"}}}},
			wantChecks: []string{"build", "e2e"},
		},
		{
			name:       "CI fails without details",
			ci:         &fakeCI{result: phases.LevelResult{}},
			wantChecks: []string{"ci"},
		},
		{
			name:       "commands then CI",
			ci:         &fakeCI{result: phases.LevelResult{Passed: true}},
			l3Checks:   []phases.GateCheck{sh("smoke", "true")},
			wantPassed: true, wantChecks: []string{"smoke"},
		},
		{
			name:    "CI cannot be asked",
			ci:      &fakeCI{err: ciFailure},
			wantErr: ciFailure,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := workspace(t)
			snap.HeadCommit = "abc123"
			v := NewVerifier(VerifierConfig{CI: tt.ci})
			report, err := v.Verify(context.Background(), snap, phases.GatePlan{Levels: []phases.GateLevel{
				{Level: phases.L3CI, Checks: tt.l3Checks},
				{Level: phases.L0Contracts, Checks: []phases.GateCheck{sh("vet", "true")}},
			}}, phases.VerifyOptions{})
			assert.Equal(t, 1, tt.ci.calls)
			assert.Equal(t, "abc123", tt.ci.got.HeadCommit)
			if tt.wantErr != nil {
				assert.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantPassed, report.Passed)
			l3, ok := report.Level(phases.L3CI)
			require.True(t, ok)
			assert.Equal(t, tt.wantChecks, names(l3.Checks))
			for _, c := range l3.Checks {
				assert.Equal(t, phases.L3CI, c.Level)
			}
			assert.Equal(t, phases.L3CI, report.Levels[1].Level, "L3 runs after L0")
		})
	}
	t.Run("CI is not asked when an earlier level fails", func(t *testing.T) {
		ci := &fakeCI{result: phases.LevelResult{Passed: true}}
		report, err := NewVerifier(VerifierConfig{CI: ci}).Verify(context.Background(), workspace(t), phases.GatePlan{Levels: []phases.GateLevel{
			{Level: phases.L0Contracts, Checks: []phases.GateCheck{sh("vet", "exit 1")}},
			{Level: phases.L3CI},
		}}, phases.VerifyOptions{})
		require.NoError(t, err)
		assert.Equal(t, "L0:fail L3:skip", levelSummary(report))
		assert.Zero(t, ci.calls)
	})
}

func TestInvalidPlans(t *testing.T) {
	ok := sh("ok", "true")
	tests := []struct {
		name  string
		level phases.GateLevel
		extra []phases.GateLevel
		cause error
	}{
		{name: "L3 without CI or commands", level: phases.GateLevel{Level: phases.L3CI}, cause: ErrNoCIChecker},
		{name: "unknown level", level: phases.GateLevel{Level: "L9", Checks: []phases.GateCheck{ok}}},
		{name: "level twice", level: phases.GateLevel{Level: phases.L0Contracts, Checks: []phases.GateCheck{ok}}, extra: []phases.GateLevel{{Level: phases.L0Contracts}}},
		{name: "check without name", level: phases.GateLevel{Level: phases.L1Tests, Checks: []phases.GateCheck{{Argv: []string{"true"}}}}},
		{name: "name twice", level: phases.GateLevel{Level: phases.L1Tests, Checks: []phases.GateCheck{ok, ok}}},
		{name: "empty argv", level: phases.GateLevel{Level: phases.L1Tests, Checks: []phases.GateCheck{{Name: "x"}}}},
		{name: "negative timeout", level: phases.GateLevel{Level: phases.L1Tests, Checks: []phases.GateCheck{{Name: "x", Argv: []string{"true"}, Timeout: -1}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			marker := filepath.Join(t.TempDir(), "ran")
			plan := phases.GatePlan{Levels: append([]phases.GateLevel{
				{Level: phases.L2BlackBox, Checks: []phases.GateCheck{sh("marker", "touch "+marker)}}, tt.level,
			}, tt.extra...)}
			_, err := NewVerifier(VerifierConfig{}).Verify(context.Background(), workspace(t), plan, phases.VerifyOptions{})
			var pe *PlanError
			require.ErrorAs(t, err, &pe)
			assert.ErrorIs(t, err, ErrInvalidPlan)
			if tt.cause != nil {
				assert.ErrorIs(t, err, tt.cause)
			}
			assert.NoFileExists(t, marker, "nothing runs when the plan is invalid")
		})
	}
	t.Run("no workspace", func(t *testing.T) {
		_, err := NewVerifier(VerifierConfig{}).Verify(context.Background(), phases.Snapshot{},
			phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L0Contracts, Checks: []phases.GateCheck{ok}}}}, phases.VerifyOptions{})
		assert.ErrorIs(t, err, ErrNoWorkspace)
	})
}

func TestSkipRunsNothing(t *testing.T) {
	snap := workspace(t)
	marker := filepath.Join(snap.WorkspacePath, "ran")
	report, err := NewVerifier(VerifierConfig{}).Verify(context.Background(), snap, phases.GatePlan{Levels: []phases.GateLevel{
		{Level: phases.L0Contracts, Checks: []phases.GateCheck{sh("marker", "touch ran; exit 1")}},
	}}, phases.VerifyOptions{Skip: true})
	require.NoError(t, err)
	assert.Equal(t, phases.VerificationReport{Passed: true, Skipped: true}, report)
	assert.NoFileExists(t, marker)
}

// A plan without a single check would pass any change: the Verifier
// itself refuses it before anything runs (a host calling it directly, not
// through phases' verify handler, once merged broken code that way), unless
// the caller waives the gates with Skip.
func TestEmptyPlanIsRefused(t *testing.T) {
	tests := []struct {
		name string
		plan phases.GatePlan
	}{
		{"no levels", phases.GatePlan{}},
		{"levels without checks", phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L0Contracts}, {Level: phases.L1Tests, Checks: []phases.GateCheck{}}}}},
		{"run all, levels without checks", phases.GatePlan{RunAll: true, Levels: []phases.GateLevel{{Level: phases.L2BlackBox}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			report, err := NewVerifier(VerifierConfig{}).Verify(context.Background(), workspace(t), tt.plan, phases.VerifyOptions{})
			require.ErrorIs(t, err, ErrEmptyPlan)
			assert.ErrorIs(t, err, ErrInvalidPlan)
			var pe *PlanError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, "gates: invalid gate plan: "+ErrEmptyPlan.Error(), err.Error())
			assert.False(t, report.Passed, "no pass without checks")
			assert.Empty(t, report.Levels)
		})
	}
	t.Run("skipped", func(t *testing.T) {
		report, err := NewVerifier(VerifierConfig{}).Verify(context.Background(), phases.Snapshot{}, phases.GatePlan{}, phases.VerifyOptions{Skip: true})
		require.NoError(t, err)
		assert.Equal(t, phases.VerificationReport{Passed: true, Skipped: true}, report)
	})
	t.Run("an L3 level alone runs the CIChecker", func(t *testing.T) {
		ci := &fakeCI{result: phases.LevelResult{Passed: true, Checks: []phases.CheckResult{{Name: "ci", Passed: true}}}}
		report, err := NewVerifier(VerifierConfig{CI: ci}).Verify(context.Background(), workspace(t),
			phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L3CI}}}, phases.VerifyOptions{})
		require.NoError(t, err)
		assert.True(t, report.Passed)
		require.Len(t, report.Levels, 1)
		assert.Equal(t, phases.L3CI, report.Levels[0].Level)
		assert.Equal(t, 1, ci.calls)
	})
}
