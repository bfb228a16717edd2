package message

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
)

// canonical pairs every canonical line of the seeds with its message. Each
// line is exactly what Format prints.
var canonical = []struct {
	name string
	line string
	msg  Message
}{
	// phase4_handlers.md (seed 000) ON lines, and worker_prompts.md.
	{"stage 0 complete", "Stage 0 COMPLETE for PROJ-42. 3 tasks created. Plan score: 4/4.",
		Stage0Complete{Item: "PROJ-42", Tasks: 3, PlanScore: 4}},
	{"stage 0 error", "Stage 0 ERROR for PROJ-42: ln-300 found no acceptance criteria",
		Stage0Error{Item: "PROJ-42", Details: "ln-300 found no acceptance criteria"}},
	{"stage 1 go", "Stage 1 COMPLETE for PROJ-42. Verdict: GO. Readiness: 8.",
		Stage1Complete{Item: "PROJ-42", Verdict: VerdictGo, Readiness: 8}},
	{"stage 1 no-go", "Stage 1 COMPLETE for PROJ-42. Verdict: NO-GO. Readiness: 3. Reason: acceptance criteria are untestable",
		Stage1Complete{Item: "PROJ-42", Verdict: VerdictNoGo, Readiness: 3, Reason: "acceptance criteria are untestable"}},
	{"stage 2 complete", "Stage 2 COMPLETE for PROJ-42. All tasks Done. Story set to To Review.",
		Stage2Complete{Item: "PROJ-42"}},
	{"stage 2 error", "Stage 2 ERROR for PROJ-42: task PROJ-45 stuck after 3 attempts",
		Stage2Error{Item: "PROJ-42", Details: "task PROJ-45 stuck after 3 attempts"}},
	{"stage 3 pass", "Stage 3 COMPLETE for PROJ-42. Verdict: PASS. Quality Score: 92/100.",
		Stage3Complete{Item: "PROJ-42", Verdict: VerdictPass, Score: 92}},
	{"stage 3 concerns", "Stage 3 COMPLETE for PROJ-42. Verdict: CONCERNS. Quality Score: 75/100.",
		Stage3Complete{Item: "PROJ-42", Verdict: VerdictConcerns, Score: 75}},
	{"stage 3 waived", "Stage 3 COMPLETE for PROJ-42. Verdict: WAIVED. Quality Score: 60/100.",
		Stage3Complete{Item: "PROJ-42", Verdict: VerdictWaived, Score: 60}},
	{"stage 3 fail", "Stage 3 COMPLETE for PROJ-42. Verdict: FAIL. Quality Score: 41/100. Issues: no tests for the error path, lint fails",
		Stage3Complete{Item: "PROJ-42", Verdict: VerdictFail, Score: 41, Issues: "no tests for the error path, lint fails"}},
	// message_protocol.md forms with the Agents field.
	{"stage 1 go agents", "Stage 1 COMPLETE for PROJ-42. Verdict: GO. Readiness: 8. Agents: codex(2/3),gemini(1/2).",
		Stage1Complete{Item: "PROJ-42", Verdict: VerdictGo, Readiness: 8, Agents: "codex(2/3),gemini(1/2)"}},
	{"stage 1 no-go agents", "Stage 1 COMPLETE for PROJ-42. Verdict: NO-GO. Readiness: 2. Reason: scope unclear. Agents: codex(1/2),gemini(FAILED).",
		Stage1Complete{Item: "PROJ-42", Verdict: VerdictNoGo, Readiness: 2, Reason: "scope unclear", Agents: "codex(1/2),gemini(FAILED)"}},
	{"stage 3 pass agents", "Stage 3 COMPLETE for PROJ-42. Verdict: PASS. Quality Score: 95/100. Agents: SKIPPED(fast-track).",
		Stage3Complete{Item: "PROJ-42", Verdict: VerdictPass, Score: 95, Agents: "SKIPPED(fast-track)"}},
	{"stage 3 fail agents", "Stage 3 COMPLETE for PROJ-42. Verdict: FAIL. Quality Score: 30/100. Issues: 2 failing tests. Agents: SKIPPED(no agents available).",
		Stage3Complete{Item: "PROJ-42", Verdict: VerdictFail, Score: 30, Issues: "2 failing tests", Agents: "SKIPPED(no agents available)"}},
	// ERROR lines the seed's regex admits for stages without an ERROR row.
	{"stage 1 error", "Stage 1 ERROR for PROJ-42: ln-310 crashed", Stage1Error{Item: "PROJ-42", Details: "ln-310 crashed"}},
	{"stage 3 error", "Stage 3 ERROR for PROJ-42: ln-500 crashed", Stage3Error{Item: "PROJ-42", Details: "ln-500 crashed"}},
	// Diagnostic response and the coordinator's commands.
	{"status reply", "Status for PROJ-42: Stage 2 EXECUTING. Current step: running tests for task 3.",
		StatusReply{health.StatusReply{Item: "PROJ-42", Stage: 2, Status: health.StatusExecuting, Step: "running tests for task 3"}}},
	{"status reply waiting", "Status for PROJ-42: Stage 0 WAITING. Current step: waiting for ACK.",
		StatusReply{health.StatusReply{Item: "PROJ-42", Stage: 0, Status: health.StatusWaiting, Step: "waiting for ACK"}}},
	{"status reply error", "Status for PROJ-42: Stage 3 ERROR. Current step: ln-500 failed.",
		StatusReply{health.StatusReply{Item: "PROJ-42", Stage: 3, Status: health.StatusError, Step: "ln-500 failed"}}},
	{"ack", "ACK Stage 1 for PROJ-42", Ack{Stage: 1, Item: "PROJ-42"}},
	{"execute", "Execute Stage 0 for PROJ-42", ExecuteStage{Stage: 0, Item: "PROJ-42"}},
	{"probe", "Status check: are you still working on Stage 2 for PROJ-42?", StatusCheck{Stage: 2, Item: "PROJ-42"}},
	{"shutdown", "Pipeline complete for PROJ-42. Shutting down.", Shutdown{Item: "PROJ-42"}},
	// Seed 003 callbacks (Foreman's canonical form; the seed fixes only the tag).
	{"callback", "[executor] IMPL-001 completed", Callback{Role: RoleExecutor, Subject: "IMPL-001", Status: CallbackCompleted}},
	{"callback text", "[fe-qa] QA-FE-001 failed: 2 of 9 checks fail",
		Callback{Role: RoleFEQA, Subject: "QA-FE-001", Status: CallbackFailed, Text: "2 of 9 checks fail"}},
	{"callback progress", "[writer] DRAFT-002 in_progress: chapter 3 of 5",
		Callback{Role: RoleWriter, Subject: "DRAFT-002", Status: CallbackInProgress, Text: "chapter 3 of 5"}},
	// Ids beyond the seed's [A-Z]+-\d+, and periods inside free text.
	{"dotted id", "Stage 0 COMPLETE for v1.2. 1 tasks created. Plan score: 0/4.",
		Stage0Complete{Item: "v1.2", Tasks: 1, PlanScore: 0}},
	{"reason with periods", "Stage 1 COMPLETE for x. Verdict: NO-GO. Readiness: 10. Reason: see doc. Section 2. Agents: a. b.",
		Stage1Complete{Item: "x", Verdict: VerdictNoGo, Readiness: 10, Reason: "see doc. Section 2", Agents: "a. b"}},
	{"empty details", "Stage 2 ERROR for PROJ-42: ", Stage2Error{Item: "PROJ-42"}},
	// Reports of any stage (Report).
	{"report", "Stage 5 REPORT for PROJ-42: PASS. Score: 90. Tasks: 2. Details: two findings",
		Report{Item: "PROJ-42", Stage: 5, Outcome: "PASS", Score: 90, HasScore: true, Tasks: 2, Detail: "two findings"}},
	{"report complete", "Stage 11 REPORT for PROJ-42: COMPLETE.", Report{Item: "PROJ-42", Stage: 11, Outcome: "COMPLETE"}},
	{"ack of a later stage", "ACK Stage 11 for PROJ-42", Ack{Stage: 11, Item: "PROJ-42"}},
}

func TestParseCanonicalLines(t *testing.T) {
	for _, tc := range canonical {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.line)
			require.NoError(t, err)
			assert.Equal(t, tc.msg, got)
		})
	}
}

func TestFormatCanonicalLines(t *testing.T) {
	for _, tc := range canonical {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.line
			if tc.name == "empty details" {
				want = "Stage 2 ERROR for PROJ-42: " // Format keeps the separator's space
			}
			assert.Equal(t, want, Format(tc.msg))
		})
	}
}

func TestRoundTripEveryKind(t *testing.T) {
	seen := map[Kind]bool{}
	for _, tc := range canonical {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(Format(tc.msg))
			require.NoError(t, err)
			assert.Equal(t, tc.msg, got)
			assert.NoError(t, Validate(tc.msg))
		})
		seen[tc.msg.Kind()] = true
	}
	for k := KindStage0Complete; k <= KindReport; k++ {
		assert.True(t, seen[k], "no round-trip case for %v", k)
	}
}

func TestParseTolerance(t *testing.T) {
	tests := []struct {
		name string
		line string
		want Message
	}{
		{"surrounding whitespace", "  \tACK Stage 1 for PROJ-42 \n", Ack{Stage: 1, Item: "PROJ-42"}},
		{"stage 0 without final period", "Stage 0 COMPLETE for PROJ-42. 3 tasks created. Plan score: 4/4",
			Stage0Complete{Item: "PROJ-42", Tasks: 3, PlanScore: 4}},
		{"stage 0 no space after id (seed regex \\.\\s*)", "Stage 0 COMPLETE for PROJ-42.3 tasks created. Plan score: 4/4.",
			Stage0Complete{Item: "PROJ-42", Tasks: 3, PlanScore: 4}},
		{"stage 0 extra spaces after id", "Stage 0 COMPLETE for PROJ-42.   3 tasks created. Plan score: 4/4.",
			Stage0Complete{Item: "PROJ-42", Tasks: 3, PlanScore: 4}},
		{"stage 1 go without final period", "Stage 1 COMPLETE for PROJ-42. Verdict: GO. Readiness: 8",
			Stage1Complete{Item: "PROJ-42", Verdict: VerdictGo, Readiness: 8}},
		{"stage 1 no-go reason with final period", "Stage 1 COMPLETE for PROJ-42. Verdict: NO-GO. Readiness: 3. Reason: too big.",
			Stage1Complete{Item: "PROJ-42", Verdict: VerdictNoGo, Readiness: 3, Reason: "too big."}},
		{"agents without final period", "Stage 3 COMPLETE for PROJ-42. Verdict: PASS. Quality Score: 90/100. Agents: SKIPPED(agents disabled)",
			Stage3Complete{Item: "PROJ-42", Verdict: VerdictPass, Score: 90, Agents: "SKIPPED(agents disabled)"}},
		{"stage 2 without final period", "Stage 2 COMPLETE for PROJ-42. All tasks Done. Story set to To Review",
			Stage2Complete{Item: "PROJ-42"}},
		{"error with no space after colon", "Stage 0 ERROR for PROJ-42:boom", Stage0Error{Item: "PROJ-42", Details: "boom"}},
		{"tab and non-ASCII in free text", "Stage 0 ERROR for PROJ-42: ln-300:\tdépendance manquante", Stage0Error{Item: "PROJ-42", Details: "ln-300:\tdépendance manquante"}},
		{"leading zeros", "Stage 3 COMPLETE for PROJ-42. Verdict: PASS. Quality Score: 090/100.",
			Stage3Complete{Item: "PROJ-42", Verdict: VerdictPass, Score: 90}},
		{"callback role case", "[Executor] IMPL-001 completed", Callback{Role: RoleExecutor, Subject: "IMPL-001", Status: CallbackCompleted}},
		{"status reply without final period", "Status for PROJ-42: Stage 1 WAITING. Current step: idle",
			StatusReply{health.StatusReply{Item: "PROJ-42", Stage: 1, Status: health.StatusWaiting, Step: "idle"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.line)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name      string
		line      string
		invalidID bool
	}{
		{"empty", "", false},
		{"chatter", "I finished stage 0, all good!", false},
		{"lowercase keyword", "Stage 0 complete for PROJ-42. 3 tasks created. Plan score: 4/4.", false},
		{"stage out of range", "Stage 4 COMPLETE for PROJ-42. All tasks Done. Story set to To Review.", false},
		{"error stage out of range", "Stage 7 ERROR for PROJ-42: boom", false},
		{"two-digit stage", "Stage 10 ERROR for PROJ-42: boom", false},
		{"plan score above 4", "Stage 0 COMPLETE for PROJ-42. 3 tasks created. Plan score: 5/4.", false},
		{"plan score out of 5", "Stage 0 COMPLETE for PROJ-42. 3 tasks created. Plan score: 3/5.", false},
		{"task count too big", "Stage 0 COMPLETE for PROJ-42. 99999999999999999999 tasks created. Plan score: 3/4.", false},
		{"one task (singular)", "Stage 0 COMPLETE for PROJ-42. 1 task created. Plan score: 3/4.", false},
		{"quality above 100", "Stage 3 COMPLETE for PROJ-42. Verdict: PASS. Quality Score: 101/100.", false},
		{"readiness above 10", "Stage 1 COMPLETE for PROJ-42. Verdict: GO. Readiness: 11.", false},
		{"unknown verdict", "Stage 3 COMPLETE for PROJ-42. Verdict: MAYBE. Quality Score: 50/100.", false},
		{"stage 1 verdict of stage 3", "Stage 1 COMPLETE for PROJ-42. Verdict: PASS. Readiness: 5.", false},
		{"junk after readiness", "Stage 1 COMPLETE for PROJ-42. Verdict: GO. Readiness: 8, great", false},
		{"unknown field", "Stage 1 COMPLETE for PROJ-42. Verdict: GO. Readiness: 8. Notes: fine", false},
		{"empty reason", "Stage 1 COMPLETE for PROJ-42. Verdict: NO-GO. Readiness: 3. Reason: . Agents: a.", false},
		{"empty agents", "Stage 3 COMPLETE for PROJ-42. Verdict: FAIL. Quality Score: 3/100. Issues: x. Agents: .", false},
		{"stage 2 wrong body", "Stage 2 COMPLETE for PROJ-42. Most tasks Done.", false},
		{"two lines", "ACK Stage 1 for PROJ-42\nACK Stage 2 for PROJ-42", false},
		{"ack without id", "ACK Stage 1 for", false},
		{"invalid utf-8", "Stage 0 ERROR for PROJ-42: \xff\xfe", false},
		{"nul byte", "Stage 0 ERROR for PROJ-42: a\x00b", false},
		{"escape sequence", "Stage 2 ERROR for PROJ-42: \x1b[2Jgone", false},
		{"C1 control", "Stage 2 ERROR for PROJ-42: a\u0085b", false},
		{"probe without question mark", "Status check: are you still working on Stage 2 for PROJ-42", false},
		{"status reply stage out of range", "Status for PROJ-42: Stage 1000 EXECUTING. Current step: x.", false},
		{"ack stage out of range", "ACK Stage 1000 for PROJ-42", false},
		{"ack stage with a leading zero", "ACK Stage 01 for PROJ-42", false},
		{"status reply unknown status", "Status for PROJ-42: Stage 1 SLEEPING. Current step: x.", false},
		{"callback unknown status", "[executor] IMPL-001 done", false},
		{"shutdown without period", "Pipeline complete for PROJ-42. Shutting down", false},
		{"invalid id (path traversal)", "Stage 0 ERROR for ../etc: boom", true},
		{"invalid id (too long)", "ACK Stage 0 for " + string(make65()), true},
		{"invalid callback subject", "[executor] -IMPL completed", true},
		{"invalid status reply id", "Status for a..b: Stage 1 EXECUTING. Current step: x.", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.line)
			require.Error(t, err)
			assert.Nil(t, got)
			assert.ErrorIs(t, err, ErrUnparseable)
			var pe *ParseError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, tc.line, pe.Line)
			assert.NotEmpty(t, pe.Reason)
			assert.Equal(t, tc.invalidID, errors.Is(err, foreman.ErrInvalidID), "reason: %s", pe.Reason)
		})
	}
}

func make65() []byte {
	b := make([]byte, 65)
	for i := range b {
		b[i] = 'a'
	}
	return b
}

func TestFormatNil(t *testing.T) {
	assert.Equal(t, "", Format(nil))
	var p *Ack
	assert.Equal(t, "", Format(p))
	assert.Error(t, Validate(nil))
}

func TestValidateRejectsMessagesThatDoNotRoundTrip(t *testing.T) {
	bad := []Message{
		Stage0Complete{Item: "PROJ-42", Tasks: 3, PlanScore: 5},
		Stage0Complete{Item: "bad id", Tasks: 3, PlanScore: 1},
		Stage1Complete{Item: "PROJ-42", Verdict: "MAYBE", Readiness: 3},
		Stage3Complete{Item: "PROJ-42", Verdict: VerdictPass, Score: -1},
		Stage3Complete{Item: "PROJ-42", Verdict: VerdictFail, Score: 10, Issues: "a. Agents: b"},
		Stage2Error{Item: "PROJ-42", Details: " leading space"},
		Stage2Error{Item: "PROJ-42", Details: "two\nlines"},
		Ack{Stage: MaxStage + 1, Item: "PROJ-42"},
		Callback{Role: "Executor", Subject: "IMPL-1", Status: CallbackCompleted},
		Callback{Role: RoleExecutor, Subject: "IMPL-1", Status: "done"},
		&Ack{Stage: 1, Item: "PROJ-42"},
	}
	for _, m := range bad {
		assert.Error(t, Validate(m), "%#v", m)
	}
}

func TestKind(t *testing.T) {
	assert.Equal(t, "Stage3Complete", KindStage3Complete.String())
	assert.Equal(t, "Kind(0)", Kind(0).String())
	for k := KindStage0Complete; k <= KindReport; k++ {
		assert.NotContains(t, k.String(), "Kind(")
	}
	assert.True(t, KindStage0Error.IsReport())
	assert.True(t, KindStage0Error.FromWorker())
	assert.False(t, KindStatusReply.IsReport())
	assert.True(t, KindStatusReply.FromWorker())
	assert.True(t, KindCallback.FromWorker())
	assert.False(t, KindAck.FromWorker())
	assert.False(t, KindStatusCheck.FromWorker())
	assert.True(t, KindReport.IsReport())
	assert.True(t, KindReport.FromWorker())
}

func TestMessageAccessors(t *testing.T) {
	for _, tc := range canonical {
		m := tc.msg
		switch cb := m.(type) {
		case Callback:
			assert.Equal(t, NoStage, m.StageNum())
			assert.Equal(t, cb.Subject, m.ItemID())
		case Shutdown:
			assert.Equal(t, NoStage, m.StageNum())
		default:
			assert.GreaterOrEqual(t, m.StageNum(), 0, tc.name)
			assert.LessOrEqual(t, m.StageNum(), MaxStage, tc.name)
			assert.Contains(t, tc.line, "Stage "+strconv.Itoa(m.StageNum())+" ", tc.name)
		}
		assert.Contains(t, tc.line, string(m.ItemID()), tc.name)
	}
}

func TestAckFor(t *testing.T) {
	ack, ok := AckFor(Stage3Complete{Item: "PROJ-42", Verdict: VerdictFail, Score: 10})
	require.True(t, ok)
	assert.Equal(t, Ack{Stage: 3, Item: "PROJ-42"}, ack)
	assert.Equal(t, "ACK Stage 3 for PROJ-42", Format(ack))

	_, ok = AckFor(StatusCheck{Stage: 1, Item: "PROJ-42"})
	assert.False(t, ok)
	_, ok = AckFor(nil)
	assert.False(t, ok)
}

func TestAgentsOrNA(t *testing.T) {
	assert.Equal(t, AgentsNA, Stage1Complete{}.AgentsOrNA())
	assert.Equal(t, "codex(1/1)", Stage3Complete{Agents: "codex(1/1)"}.AgentsOrNA())
}

func TestOpen(t *testing.T) {
	at := time.Date(2026, 3, 9, 12, 0, 0, 0, time.UTC)
	env, err := Open("story-PROJ-42-s1", "a-7", "Stage 1 COMPLETE for PROJ-42. Verdict: GO. Readiness: 8.", at)
	require.NoError(t, err)
	assert.Equal(t, Envelope{
		Sender: "story-PROJ-42-s1", Assignment: "a-7", ReceivedAt: at,
		Raw:  "Stage 1 COMPLETE for PROJ-42. Verdict: GO. Readiness: 8.",
		Body: Stage1Complete{Item: "PROJ-42", Verdict: VerdictGo, Readiness: 8},
	}, env)

	env, err = Open("story-PROJ-42-s1", "a-7", "done!", at)
	assert.ErrorIs(t, err, ErrUnparseable)
	assert.Nil(t, env.Body)
	assert.Equal(t, "done!", env.Raw)
	assert.Equal(t, foreman.WorkerID("story-PROJ-42-s1"), env.Sender)

	_, err = Open("bad sender", "a-7", "ACK Stage 1 for PROJ-42", at)
	assert.ErrorIs(t, err, foreman.ErrInvalidID)
	assert.NotErrorIs(t, err, ErrUnparseable)
	_, err = Open("w", "", "ACK Stage 1 for PROJ-42", at)
	assert.ErrorIs(t, err, foreman.ErrInvalidID)
}

func TestParseStatusReplyKeepsHealthError(t *testing.T) {
	_, err := Parse("Status for PROJ-42: Stage 1 SLEEPING. Current step: x.")
	assert.ErrorIs(t, err, health.ErrUnparseableReply)
}
