package team

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
)

func score(n int) *int { return &n }

func TestReportLine(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		stage int
		r     Report
		want  string
		err   string
	}{
		{"plan", 0, Report{Outcome: "complete", Tasks: 3, Score: score(2)}, "Stage 0 COMPLETE for US-1. 3 tasks created. Plan score: 2/4.", ""},
		{"plan defaults", 0, Report{Outcome: "Complete"}, "Stage 0 COMPLETE for US-1. 1 tasks created. Plan score: 4/4.", ""},
		{"go", 1, Report{Outcome: "GO", Score: score(7)}, "Stage 1 COMPLETE for US-1. Verdict: GO. Readiness: 7.", ""},
		{"no-go", 1, Report{Outcome: "no-go", Summary: "unclear\nscope"}, "Stage 1 COMPLETE for US-1. Verdict: NO-GO. Readiness: 0. Reason: unclear scope", ""},
		{"build", 2, Report{Outcome: "complete"}, "Stage 2 COMPLETE for US-1. All tasks Done. Story set to To Review.", ""},
		{"pass", 3, Report{Outcome: "pass", Score: score(90)}, "Stage 3 COMPLETE for US-1. Verdict: PASS. Quality Score: 90/100.", ""},
		{"fail", 3, Report{Outcome: "fail", Summary: "tests fail. Agents: x"}, "Stage 3 COMPLETE for US-1. Verdict: FAIL. Quality Score: 0/100. Issues: tests fail, agents: x", ""},
		{"error", 2, Report{Outcome: "error", Summary: "cannot"}, "Stage 2 ERROR for US-1: cannot", ""},
		{"error without words", 0, Report{Outcome: "error"}, "Stage 0 ERROR for US-1: (no details)", ""},
		{"score out of range", 3, Report{Outcome: "pass", Score: score(101)}, "", "score 101 is not in 0..100"},
		{"negative score", 1, Report{Outcome: "go", Score: score(-1)}, "", "score -1"},
		{"outcome of another stage", 1, Report{Outcome: "complete"}, "", `outcome "complete" is not one of stage 1's`},
		{"unknown outcome", 3, Report{Outcome: "maybe"}, "", "pass, concerns, waived, fail, error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := reportLine("US-1", c.stage, c.r)
			if c.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
			_, perr := message.Parse(got)
			assert.NoError(t, perr, "a report line parses")
		})
	}
}

func TestOneLineKeepsReportsParseable(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 1000)
	for _, in := range []string{"a\nb\tc\x00d", long, "x. Agents: y", "", "\xff\xfe"} {
		line := errorLine("US-1", 2, in)
		_, err := message.Parse(line)
		assert.NoError(t, err, "%q -> %q", in, line)
		assert.LessOrEqual(t, len(line), maxDetail+64)
	}
}

func TestAgentStageLine(t *testing.T) {
	t.Parallel()
	good := &Report{Assignment: "US-1-a1", Outcome: "go", Score: score(8)}
	const key = "0123456789abcdef0123456789abcdef"
	tag := func(line string) string { return taggedLine(line, "US-1-a1", key) }
	cases := []struct {
		name    string
		ev      agentEvidence
		want    []string
		refused []string
	}{
		{"result file", agentEvidence{File: good}, []string{"Verdict: GO. Readiness: 8."}, nil},
		{"the MCP report wins over the file", agentEvidence{MCP: &Report{Assignment: "US-1-a1", Outcome: "no-go", Summary: "unclear"}, File: good}, []string{"Verdict: NO-GO", "Reason: unclear"}, nil},
		{"an MCP report of another assignment is not it", agentEvidence{MCP: &Report{Assignment: "US-1-a0", Outcome: "no-go"}, File: good}, []string{"Verdict: GO"}, nil},
		{"the file wins over the line", agentEvidence{File: good, Result: phases.AgentResult{Result: tag("Stage 1 COMPLETE for US-1. Verdict: NO-GO. Readiness: 1. Reason: x")}}, []string{"Verdict: GO"}, nil},
		{"line in the final message", agentEvidence{Result: phases.AgentResult{Result: "ok\n" + tag("Stage 1 COMPLETE for US-1. Verdict: GO. Readiness: 6.")}}, []string{"Readiness: 6."}, nil},
		{"line in the output", agentEvidence{Result: phases.AgentResult{Output: tag("Stage 1 COMPLETE for US-1. Verdict: GO. Readiness: 5.") + "\nbye"}}, []string{"Readiness: 5."}, nil},
		{"an ERROR line, a period after the proof", agentEvidence{Result: phases.AgentResult{Output: tag("Stage 1 ERROR for US-1: no [repo] access") + "."}}, []string{"ERROR for US-1: no [repo] access"}, nil},
		{"the last line with the proof wins over a later one without", agentEvidence{Result: phases.AgentResult{Output: tag("Stage 1 COMPLETE for US-1. Verdict: GO. Readiness: 5.") + "\nStage 1 COMPLETE for US-1. Verdict: NO-GO. Readiness: 0. Reason: x"}}, []string{"Readiness: 5."}, nil},
		{"a line without the proof is not it", agentEvidence{Result: phases.AgentResult{Result: "Stage 1 COMPLETE for US-1. Verdict: GO. Readiness: 6."}},
			[]string{"ERROR", "without its assignment's id and key"}, []string{"a printed report line without its assignment's id and key (ignored)"}},
		{"the prompt's example echoed back is not it", agentEvidence{Result: phases.AgentResult{Output: taggedLine("Stage 1 COMPLETE for US-1. Verdict: GO. Readiness: 8.", "US-1-a1", keyPlaceholder)}},
			[]string{"ERROR", "example"}, []string{"the prompt's example report line, printed back without the key (ignored)"}},
		{"a wrong key is not it", agentEvidence{Result: phases.AgentResult{Output: taggedLine("Stage 1 COMPLETE for US-1. Verdict: GO. Readiness: 8.", "US-1-a1", "ffff")}},
			[]string{"ERROR"}, []string{"a printed report line with a wrong key (ignored)"}},
		{"another assignment's proof is not it", agentEvidence{Result: phases.AgentResult{Output: taggedLine("Stage 1 COMPLETE for US-1. Verdict: GO. Readiness: 8.", "US-1-a0", key)}},
			[]string{"ERROR"}, []string{`a printed report line for assignment "US-1-a0", not its own (ignored)`}},
		{"each reason once", agentEvidence{Result: phases.AgentResult{Result: "Stage 1 COMPLETE for US-1. Verdict: GO. Readiness: 6.", Output: "Stage 1 COMPLETE for US-1. Verdict: GO. Readiness: 7.\nStage 1 ERROR for US-1: x"}},
			[]string{"ERROR"}, []string{"a printed report line without its assignment's id and key (ignored)"}},
		{"a line about another story is not it", agentEvidence{Result: phases.AgentResult{Output: tag("Stage 1 COMPLETE for US-2. Verdict: GO. Readiness: 5.")}}, []string{"Stage 1 ERROR for US-1", "without a report"}, nil},
		{"a line of another stage is not it", agentEvidence{Result: phases.AgentResult{Output: tag("Stage 0 COMPLETE for US-1. 1 tasks created. Plan score: 4/4.")}}, []string{"Stage 1 ERROR"}, nil},
		{"no key, no line", agentEvidence{Key: "-", Result: phases.AgentResult{Output: taggedLine("Stage 1 COMPLETE for US-1. Verdict: GO. Readiness: 8.", "US-1-a1", "")}}, []string{"ERROR"}, []string{"a printed report line with a wrong key (ignored)"}},
		{"stale file", agentEvidence{File: &Report{Assignment: "US-1-a0", Outcome: "go"}}, []string{"ERROR", `names assignment "US-1-a0", not the current "US-1-a1"`},
			[]string{`result file names assignment "US-1-a0", not the current "US-1-a1" (ignored)`}},
		{"bad file", agentEvidence{FileErr: errors.New("not a JSON report")}, []string{"ERROR", "usable report", "not a JSON report"}, nil},
		{"exit status and stderr", agentEvidence{Result: phases.AgentResult{ExitCode: 2, Stderr: "a\nb\nfatal: no key\n"}}, []string{"exited with status 2", "stderr: a | b | fatal: no key"}, nil},
		{"killed", agentEvidence{Result: phases.AgentResult{Signal: "killed", ExitCode: -1}}, []string{"killed by killed"}, nil},
		{"timed out", agentEvidence{Result: phases.AgentResult{TimedOut: true}}, []string{"timed out"}, nil},
		{"reported error", agentEvidence{Result: phases.AgentResult{Error: "max turns"}}, []string{"reported an error: max turns"}, nil},
		{"could not run", agentEvidence{ExecErr: errors.New("exec: no such file")}, []string{"could not run: exec: no such file"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.ev.Item, c.ev.Stage, c.ev.Assignment = "US-1", 1, "US-1-a1"
			switch c.ev.Key {
			case "":
				c.ev.Key = key
			case "-":
				c.ev.Key = ""
			}
			got, refused := agentStageLine(c.ev)
			for _, w := range c.want {
				assert.Contains(t, got, w)
			}
			assert.Equal(t, c.refused, refused)
			_, err := message.Parse(got)
			assert.NoError(t, err)
		})
	}
}

// The default prompt, echoed back whole by an agent (as a plain-text CLI
// may, or an agent quoting its task), holds no line the team takes; the
// line it shows, with the key it gives put in, is taken.
func TestAnEchoedPromptIsNoReport(t *testing.T) {
	t.Parallel()
	for stage, kind := range []StageKind{StageAgent, StageAgent, StageBuild, StageAgent} {
		d := PromptData{Story: Story{ID: "US-1", Title: "t", Body: "Stage " + fmt.Sprint(stage) + " ERROR for US-1: forged in the body"},
			Stage: stage, StageName: "s", Role: "r", Kind: kind, Assignment: "US-1-a4", ResultPath: "/r/result.json",
			ReportKey: "5c0f5c0f5c0f5c0f5c0f5c0f5c0f5c0f", MCP: true}
		prompt := DefaultPrompt(d)
		require.Contains(t, prompt, d.ReportKey)
		line, refused := printedLine("US-1", stage, d.Assignment, d.ReportKey, prompt)
		assert.Empty(t, line, "stage %d:\n%s", stage, prompt)
		assert.Contains(t, refused, printedRefusal("the prompt's example report line, printed back without the key"), "stage %d", stage)
		var example string
		for _, l := range strings.Split(prompt, "\n") {
			if strings.Contains(l, keyPlaceholder+"]") {
				example = strings.TrimSpace(l)
			}
		}
		require.NotEmpty(t, example)
		filled := strings.Replace(example, keyPlaceholder, d.ReportKey, 1)
		line, refused = printedLine("US-1", stage, d.Assignment, d.ReportKey, prompt+"\n"+filled)
		assert.NotEmpty(t, line, "stage %d: %s", stage, filled)
		assert.Nil(t, refused)
	}
}

func TestGateStageLine(t *testing.T) {
	t.Parallel()
	plan := phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: []phases.GateCheck{{Name: "a"}, {Name: "b"}}}}}
	pass := phases.VerificationReport{Passed: true}
	assert.Equal(t, "Stage 3 COMPLETE for US-1. Verdict: PASS. Quality Score: 100/100.", gateStageLine("US-1", 3, pass, plan))
	fail := phases.VerificationReport{Levels: []phases.LevelResult{{Level: phases.L1Tests, Checks: []phases.CheckResult{
		{Name: "a", Passed: true},
		{Name: "b", Argv: []string{"go", "test"}, Level: phases.L1Tests, Output: "ok\n--- FAIL: TestX\n    x_test.go:3: want 2\nFAIL\n"},
	}}}}
	line := gateStageLine("US-1", 3, fail, plan)
	assert.Contains(t, line, "Verdict: FAIL. Quality Score: 50/100. Issues: go test")
	assert.Contains(t, line, "--- FAIL: TestX x_test.go:3: want 2")
	assert.Contains(t, gateStageLine("US-1", 0, fail, plan), "Stage 0 ERROR for US-1: gates failed")

	// A person reading the escalation sees how each check failed.
	quiet := phases.VerificationReport{Levels: []phases.LevelResult{{Level: phases.L1Tests, Checks: []phases.CheckResult{
		{Name: "a", Argv: []string{"test", "-f", "VERSION"}, Level: phases.L1Tests, ExitCode: 1},
		{Name: "b", Argv: []string{"sleep", "9"}, Level: phases.L1Tests, ExitCode: -1, TimedOut: true, Output: "still going"},
	}}}}
	line = gateStageLine("US-1", 2, quiet, plan)
	assert.Contains(t, line, "test -f VERSION (L1) failed, exit status 1: (no output)")
	assert.Contains(t, line, "sleep 9 (L1) failed, timed out: still going")
}

func TestResolveFeedbackSaysWhyAndWhatIsKept(t *testing.T) {
	t.Parallel()
	pause := &pipeline.Escalation{Message: "Story US-1: gates failed: test -f VERSION (L1) failed, exit status 1: (no output)"}
	tests := []struct {
		action Action
		note   string
		pause  *pipeline.Escalation
		want   []string
		not    []string
	}{
		{Retry, "VERSION is written by make version", pause,
			[]string{"sent this stage back to work", "Their note: VERSION is written by make version", "Why the story had paused: Story US-1: gates failed", "worktree keeps the earlier attempt's work"}, nil},
		{Resume, "", pause, []string{"resumed this story after fixing it by hand", "Why the story had paused"}, []string{"Their note"}},
		{Retry, "  ", nil, []string{"worktree keeps"}, []string{"Their note", "Why the story"}},
	}
	for _, tt := range tests {
		got := resolveFeedback(tt.action, tt.note, tt.pause)
		for _, w := range tt.want {
			assert.Contains(t, got, w)
		}
		for _, w := range tt.not {
			assert.NotContains(t, got, w)
		}
	}
}

func TestBuildStageLine(t *testing.T) {
	t.Parallel()
	ok := phases.RunResult{State: phases.StateSucceeded}
	assert.Equal(t, "Stage 2 COMPLETE for US-1. All tasks Done. Story set to To Review.", buildStageLine("US-1", 2, ok, nil))
	assert.Contains(t, buildStageLine("US-1", 0, ok, nil), "Stage 0 COMPLETE")
	assert.Contains(t, buildStageLine("US-1", 2, phases.RunResult{}, errors.New("git missing")), "Stage 2 ERROR for US-1: the build could not run: git missing")
	failed := phases.RunResult{State: phases.StateFailed, Reason: phases.ReasonMaxIterations, Message: "3 iterations",
		Iterations: []phases.IterationRecord{{Result: phases.IterationResult{Phases: phases.IterationPhases{
			Build:  &phases.BuildPhaseResult{AgentResult: &phases.AgentResult{ExitCode: 1, Stderr: "boom"}},
			Verify: &phases.VerifyPhaseResult{Report: &phases.VerificationReport{Levels: []phases.LevelResult{{Checks: []phases.CheckResult{{Argv: []string{"make"}, Output: "error: x"}}}}}},
		}}}}}
	line := buildStageLine("US-1", 2, failed, nil)
	for _, w := range []string{"build failed after 1 iteration(s) (max_iterations): 3 iterations", "exited with status 1", "stderr: boom", "failing checks: make", "error: x"} {
		assert.Contains(t, line, w)
	}
}

func TestBoardAfterRecordsWhatTheFlowChecks(t *testing.T) {
	t.Parallel()
	flow := pipeline.StoryFlow(pipeline.StoryConfig{})
	b, ok := boardAfterLine(flow, 0, "Stage 0 COMPLETE for US-1. 3 tasks created. Plan score: 4/4.", boardRecord{})
	assert.True(t, ok)
	assert.Equal(t, boardRecord{Tasks: 3}, b)
	b, ok = boardAfterLine(flow, 1, "Stage 1 COMPLETE for US-1. Verdict: GO. Readiness: 9.", b)
	assert.True(t, ok)
	assert.Equal(t, boardRecord{Tasks: 3, Status: pipeline.BoardTodo}, b)
	b, ok = boardAfterLine(flow, 2, "Stage 2 COMPLETE for US-1. All tasks Done. Story set to To Review.", b)
	assert.True(t, ok)
	assert.Equal(t, pipeline.BoardToReview, b.Status)
	_, ok = boardAfterLine(flow, 2, "Stage 2 ERROR for US-1: x", b)
	assert.False(t, ok, "an error claims nothing")
	_, ok = boardAfterLine(flow, 3, "Stage 3 COMPLETE for US-1. Verdict: PASS. Quality Score: 100/100.", b)
	assert.False(t, ok, "the quality stage checks no board")
	_, ok = boardAfterLine(flow, 0, "garbage", b)
	assert.False(t, ok)
}

func TestSpawnMoveAndGraphMove(t *testing.T) {
	t.Parallel()
	retry, skip := &decision{Action: Retry}, &decision{Action: Skip}
	cases := []struct {
		name string
		st   pipeline.State
		d    *decision
		want storyMove
	}{
		{"new", pipeline.State{Status: pipeline.StatusNew}, nil, moveStart},
		{"paused with a retry", pipeline.State{Status: pipeline.StatusPaused}, retry, moveResolve},
		{"paused with a resume", pipeline.State{Status: pipeline.StatusPaused}, &decision{Action: Resume}, moveResolve},
		{"paused, skipped", pipeline.State{Status: pipeline.StatusPaused}, skip, moveNothing},
		{"paused, undecided", pipeline.State{Status: pipeline.StatusPaused}, nil, moveNothing},
		{"active", pipeline.State{Status: pipeline.StatusActive, Assignment: "a"}, nil, moveRespawn},
		{"active, crash protocol running", pipeline.State{Status: pipeline.StatusActive, Assignment: "a", Crash: health.State{Phase: health.Suspicious}}, nil, moveNothing},
		{"active, probed by the crashed process", pipeline.State{Status: pipeline.StatusActive, Assignment: "a", Crash: health.State{Phase: health.Probing}}, nil, moveProbeLost},
		{"active without an assignment (merging)", pipeline.State{Status: pipeline.StatusActive}, nil, moveNothing},
		{"done", pipeline.State{Status: pipeline.StatusDone}, nil, moveNothing},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, spawnMove(c.st, c.d), c.name)
	}
	assert.Equal(t, graphComplete, graphMoveFor(pipeline.State{Status: pipeline.StatusDone}))
	assert.Equal(t, graphPark, graphMoveFor(pipeline.State{Status: pipeline.StatusPaused}))
	assert.Equal(t, graphNothing, graphMoveFor(pipeline.State{Status: pipeline.StatusActive}))
}

func TestResolveStage(t *testing.T) {
	t.Parallel()
	assert.Equal(t, 2, resolveStage(Retry, 2, 4))
	assert.Equal(t, 3, resolveStage(Resume, 2, 4))
	assert.Equal(t, 3, resolveStage(Resume, 3, 4), "the last stage again re-checks and merges")
	assert.Equal(t, 0, resolveStage(Resume, 0, 1))
}

func TestReviewVerdict(t *testing.T) {
	cur := foreman.AssignmentID("A-a3")
	cases := []struct {
		name     string
		rep      *Report
		fileErr  error
		res      phases.AgentResult
		approved bool
		feedback string
		err      string
	}{
		{"approve", &Report{Assignment: cur, Outcome: "Approve", Summary: "fine"}, nil, phases.AgentResult{}, true, "fine", ""},
		{"reject", &Report{Assignment: cur, Outcome: "reject", Summary: "add tests"}, nil, phases.AgentResult{}, false, "add tests", ""},
		{"reject without a reason", &Report{Assignment: cur, Outcome: "rejected"}, nil, phases.AgentResult{}, false, "rejected without a reason", ""},
		{"unknown outcome", &Report{Assignment: cur, Outcome: "lgtm"}, nil, phases.AgentResult{}, false, "", `"lgtm" is not approve or reject`},
		{"stale report", &Report{Assignment: "A-a1", Outcome: "approve"}, nil, phases.AgentResult{}, false, "", `names assignment "A-a1"`},
		{"no report, failed agent", nil, nil, phases.AgentResult{ExitCode: 4, Stderr: "quota"}, false, "", "exited with status 4"},
		{"unreadable report", nil, errors.New("not JSON"), phases.AgentResult{}, false, "", "not JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ok, fb, err := reviewVerdict(c.rep, c.fileErr, c.res, cur)
			assert.Equal(t, c.approved, ok)
			assert.Equal(t, c.feedback, fb)
			if c.err == "" {
				assert.NoError(t, err)
			} else {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.err)
			}
		})
	}
}

func TestPaceFor(t *testing.T) {
	assert.Equal(t, 0, paceFor(4, 0), "no bound without rate limits")
	assert.Equal(t, 3, paceFor(4, 1))
	assert.Equal(t, 1, paceFor(4, 3))
	assert.Equal(t, 1, paceFor(4, 9), "at least one")
}

func TestHeldByPoolAndPersonLine(t *testing.T) {
	limited := phases.AgentResult{RateLimit: &phases.AgentRateLimit{Message: "limit"}}
	assert.True(t, heldByPool(limited))
	limited.Success = true
	assert.False(t, heldByPool(limited), "a run that succeeded anyway stands")
	assert.Empty(t, personLine("US-1", 1, phases.AgentResult{Success: true}))
	line := personLine("US-1", 1, phases.AgentResult{Questions: []phases.AgentQuestion{{Text: "Which database?"}}})
	assert.Equal(t, "Stage 1 ERROR for US-1: the agent waits for a person: Which database?", line)
	line = personLine("US-1", 2, phases.AgentResult{PermissionDenials: []phases.AgentPermissionDenial{{Tool: "Bash", Input: "rm -rf /"}}})
	assert.Contains(t, line, "Permission refused: Bash rm -rf /")
}

func TestAGateFailureKeepsTheDecisiveLine(t *testing.T) {
	panicked := `--- FAIL: TestDivide (0.00s)
panic: runtime error: integer divide by zero [recovered]
	panic: runtime error: integer divide by zero

goroutine 7 [running]:
testing.tRunner.func1.2({0x5c6e40, 0x7a3c90})
	/usr/local/go/src/testing/testing.go:1734 +0x21c
testing.tRunner.func1()
	/usr/local/go/src/testing/testing.go:1737 +0x35e
panic({0x5c6e40?, 0x7a3c90?})
	/usr/local/go/src/runtime/panic.go:792 +0x132
example.com/calc.Divide(...)
	/work/repo/.worktrees/US-001/calc.go:4
example.com/calc.TestDivide(0xc000102a80?)
	/work/repo/.worktrees/US-001/calc_test.go:6 +0x9
created by testing.(*T).Run in goroutine 1
	/usr/local/go/src/testing/testing.go:1792 +0x3f3
FAIL	example.com/calc	0.004s
`
	rep := phases.VerificationReport{Levels: []phases.LevelResult{{Level: phases.L1Tests, Checks: []phases.CheckResult{
		{Name: "test", Level: phases.L1Tests, Argv: []string{"go", "test", "./..."}, ExitCode: 1, Output: panicked},
	}}}}
	got := failureSummary(rep)
	assert.Contains(t, got, "panic: runtime error: integer divide by zero")
	assert.Contains(t, got, "calc.go:4")
	assert.NotContains(t, got, "testing.go", "the trace's frames are left out")
}
