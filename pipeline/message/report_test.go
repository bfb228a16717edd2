package message

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
)

// reportLines pairs Report lines with their reports; each line is exactly
// what Format prints.
var reportLines = []struct {
	line string
	r    Report
}{
	{"Stage 4 REPORT for US-001: COMPLETE.", Report{Item: "US-001", Stage: 4, Outcome: OutcomeComplete}},
	{"Stage 5 REPORT for US-001: PASS. Score: 90.", Report{Item: "US-001", Stage: 5, Outcome: "PASS", Score: 90, HasScore: true}},
	{"Stage 0 REPORT for US-001: APPROVED. Score: 0.", Report{Item: "US-001", Stage: 0, Outcome: "APPROVED", HasScore: true}},
	{"Stage 12 REPORT for US-001: COMPLETE. Score: 3. Tasks: 7.", Report{Item: "US-001", Stage: 12, Outcome: OutcomeComplete, Score: 3, HasScore: true, Tasks: 7}},
	{"Stage 999 REPORT for US-001: NEEDS_WORK. Details: the API has no tests. Score: 3 is not a field here",
		Report{Item: "US-001", Stage: 999, Outcome: "NEEDS_WORK", Detail: "the API has no tests. Score: 3 is not a field here"}},
	{"Stage 6 REPORT for US-001: ERROR. Details: the agent exited with status 1", Report{Item: "US-001", Stage: 6, Outcome: OutcomeError, Detail: "the agent exited with status 1"}},
	{"Stage 3 REPORT for US-001: NO-GO. Tasks: 2. Details: x", Report{Item: "US-001", Stage: 3, Outcome: "NO-GO", Tasks: 2, Detail: "x"}},
}

func TestReportLines(t *testing.T) {
	for _, tc := range reportLines {
		t.Run(tc.line, func(t *testing.T) {
			m, err := Parse(tc.line)
			require.NoError(t, err)
			assert.Equal(t, tc.r, m)
			assert.Equal(t, tc.line, Format(tc.r))
			require.NoError(t, Validate(tc.r))
			assert.Equal(t, KindReport, m.Kind())
			assert.Equal(t, tc.r.Stage, m.StageNum())
			assert.Equal(t, tc.r.Item, m.ItemID())
			back, ok := ReportOf(m)
			assert.True(t, ok)
			assert.Equal(t, tc.r, back)
			ack, ok := AckFor(m)
			assert.True(t, ok)
			assert.Equal(t, Ack{Stage: tc.r.Stage, Item: tc.r.Item}, ack)
		})
	}
}

func TestReportLineTolerance(t *testing.T) {
	for line, want := range map[string]Report{
		"Stage 4 REPORT for US-1: COMPLETE":                 {Item: "US-1", Stage: 4, Outcome: OutcomeComplete},
		"  Stage 4 REPORT for US-1: PASS Score: 9 Tasks: 2": {Item: "US-1", Stage: 4, Outcome: "PASS", Score: 9, HasScore: true, Tasks: 2},
		"Stage 4 REPORT for US-1: PASS. Score: 09.":         {Item: "US-1", Stage: 4, Outcome: "PASS", Score: 9, HasScore: true},
	} {
		m, err := Parse(line)
		require.NoError(t, err, line)
		assert.Equal(t, want, m, line)
	}
}

func TestReportLineRejects(t *testing.T) {
	for _, line := range []string{
		"Stage 4 REPORT for US-1:",
		"Stage 4 REPORT for US-1: pass.",
		"Stage 4 REPORT for US-1: PASS. Score: 10000.",
		"Stage 4 REPORT for US-1: PASS. Score: 9.5.",
		"Stage 4 REPORT for US-1: PASS. Tasks: 0.",
		"Stage 4 REPORT for US-1: PASS. Tasks: 2. Score: 3.",
		"Stage 4 REPORT for US-1: PASS. Details:",
		"Stage 4 REPORT for US-1: PASS. Notes: x",
		"Stage 1000 REPORT for US-1: PASS.",
		"Stage 04 REPORT for US-1: PASS.",
		"Stage 4 REPORT for ../x: PASS.",
		"Stage 4 REPORT for US-1: " + strings.Repeat("A", 33) + ".",
		// The story flow's own lines are for its own stages only.
		"Stage 4 COMPLETE for US-1. All tasks Done. Story set to To Review.",
		"Stage 4 ERROR for US-1: boom",
		"Stage 12 ERROR for US-1: boom",
	} {
		m, err := Parse(line)
		assert.ErrorIs(t, err, ErrUnparseable, line)
		assert.Nil(t, m, line)
	}
}

func TestValidOutcome(t *testing.T) {
	for _, o := range []string{"COMPLETE", "NO-GO", "NEEDS_WORK", "A", "V2"} {
		assert.True(t, ValidOutcome(o), o)
	}
	for _, o := range []string{"", "pass", "2X", "NO GO", "-X", strings.Repeat("A", 33)} {
		assert.False(t, ValidOutcome(o), o)
	}
}

// TestCanonicalIsTheStoryLineWhenOneSaysTheSame checks both ways: every
// story-flow report of the canonical table is the Canonical of its
// ReportOf, and a Report no story-flow line says stays a Report.
func TestCanonicalIsTheStoryLineWhenOneSaysTheSame(t *testing.T) {
	for _, tc := range canonical {
		if !tc.msg.Kind().IsReport() {
			continue
		}
		r, ok := ReportOf(tc.msg)
		require.True(t, ok, tc.name)
		want := tc.msg
		switch m := tc.msg.(type) { // Agents is not a Report's
		case Stage1Complete:
			m.Agents = ""
			want = m
		case Stage3Complete:
			m.Agents = ""
			want = m
		}
		assert.Equal(t, want, r.Canonical(), tc.name)
		assert.Equal(t, Format(want), Line(r), tc.name)
	}
	for _, r := range []Report{
		{Item: "US-1", Stage: 4, Outcome: OutcomeComplete},
		{Item: "US-1", Stage: 2, Outcome: OutcomeComplete, HasScore: true, Score: 3},
		{Item: "US-1", Stage: 2, Outcome: "PASS", HasScore: true, Score: 3},
		{Item: "US-1", Stage: 0, Outcome: OutcomeComplete},
		{Item: "US-1", Stage: 0, Outcome: OutcomeComplete, HasScore: true, Score: 5},
		{Item: "US-1", Stage: 1, Outcome: "GO", HasScore: true, Score: 11},
		{Item: "US-1", Stage: 1, Outcome: "GO", HasScore: true, Score: 8, Tasks: 1},
		{Item: "US-1", Stage: 3, Outcome: "PASS", HasScore: true, Score: 100, Detail: "a. Agents: b"},
		{Item: "US-1", Stage: 3, Outcome: OutcomeError, Detail: "x", HasScore: true},
	} {
		assert.Equal(t, r, r.Canonical(), "%+v", r)
		assert.Equal(t, Format(r), Line(r))
	}
	assert.Equal(t, "ACK Stage 4 for US-1", Line(Ack{Stage: 4, Item: "US-1"}))
}

func TestErrorReportFitsALine(t *testing.T) {
	r := ErrorReport("US-1", 7, "boom\n\x1b[2J. Agents: x", 0)
	require.NoError(t, Validate(r))
	assert.Equal(t, "boom [2J, agents: x", r.Detail)
	for stage := range 5 {
		line := Line(ErrorReport("US-1", stage, "", 10))
		m, err := Parse(line)
		require.NoError(t, err, line)
		back, _ := ReportOf(m)
		assert.Equal(t, fmt.Sprint(stage), fmt.Sprint(back.Stage))
		assert.Equal(t, OutcomeError, back.Outcome)
	}
}

func TestWrap(t *testing.T) {
	r := Report{Item: "US-1", Stage: 2, Outcome: OutcomeComplete}
	env, err := Wrap("w-1", "US-1-a3", r, time.Time{})
	require.NoError(t, err)
	assert.Equal(t, Message(r), env.Body)
	assert.Equal(t, "Stage 2 COMPLETE for US-1. All tasks Done. Story set to To Review.", env.Raw)
	env, err = Wrap("w 1", "US-1-a3", r, time.Time{})
	assert.ErrorIs(t, err, foreman.ErrInvalidID)
	assert.Nil(t, env.Body)
	_, err = Wrap("w-1", "../a", r, time.Time{})
	assert.ErrorIs(t, err, foreman.ErrInvalidID)
	_, err = Wrap("w-1", "US-1-a3", nil, time.Time{})
	assert.Error(t, err)
}
