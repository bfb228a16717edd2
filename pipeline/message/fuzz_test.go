package message

import (
	"testing"

	"github.com/agentforeman/foreman"
)

// nearMisses are lines one edit away from canonical ones.
var nearMisses = []string{
	"Stage 0 COMPLETE for PROJ-42. 3 tasks created. Plan score: 5/4.",
	"Stage 0 COMPLETE for PROJ-42 3 tasks created. Plan score: 4/4.",
	"Stage 1 COMPLETE for PROJ-42. Verdict: GO. Readiness: 8. Reason: . Agents: .",
	"Stage 1 COMPLETE for PROJ-42. Verdict: NO-GO. Readiness: 3. Reason: a. Agents: b. Agents: c.",
	"Stage 1 COMPLETE for PROJ-42. Verdict: GO. Readiness: 8. Agents: x. Agents: y.",
	"Stage 3 COMPLETE for PROJ-42. Verdict: FAIL. Quality Score: 100/100. Issues: a.. Agents: b..",
	"Stage 3 COMPLETE for a.. Verdict: PASS. Quality Score: 0/100.",
	"Stage 9 ERROR for PROJ-42: x",
	"Stage 2 ERROR for PROJ-42:",
	"Status for PROJ-42:: Stage 1 EXECUTING. Current step: .",
	"Status for PROJ-42: Stage 99999999999999999999 EXECUTING. Current step: x.",
	"Status check: are you still working on Stage 1 for PROJ-42??",
	"ACK Stage 1 for PROJ-42.",
	"[executor] IMPL-001 completed:",
	"[executor] IMPL-001 completed: \u00a0x",
	"[coordinator] Pipeline Status",
	"Pipeline complete for PROJ-42.. Shutting down.",
	"Stage 0 COMPLETE for PROJ-42.\u00a03 tasks created. Plan score: 4/4.",
	"Stage 1 ERROR for PROJ-42: a\rb",
	"\xff\xfe",
	"Stage 5 REPORT for PROJ-42: PASS. Score: 90. Tasks: 0.",
	"Stage 5 REPORT for PROJ-42: pass. Score: 90.",
	"Stage 5 REPORT for PROJ-42: PASS. Score: 90. Details: ",
	"Stage 5 REPORT for PROJ-42: PASS.. Score: 90.",
	"Stage 05 REPORT for PROJ-42: PASS.",
	"Stage 4 COMPLETE for PROJ-42. All tasks Done. Story set to To Review.",
	"Stage 1000 REPORT for PROJ-42: PASS.",
}

// FuzzParse checks that Parse never panics and that whatever it accepts
// survives the round trip through Format.
func FuzzParse(f *testing.F) {
	for _, tc := range canonical {
		f.Add(tc.line)
	}
	for _, line := range nearMisses {
		f.Add(line)
	}
	f.Fuzz(func(t *testing.T, line string) {
		m, err := Parse(line)
		if err != nil {
			if m != nil {
				t.Fatalf("Parse(%q) returned %#v with error %v", line, m, err)
			}
			return
		}
		text := Format(m)
		again, err := Parse(text)
		if err != nil {
			t.Fatalf("Parse(%q) = %#v, but its Format %q does not parse: %v", line, m, text, err)
		}
		if again != m {
			t.Fatalf("Parse(%q) = %#v; Format = %q; re-parsed = %#v", line, m, text, again)
		}
		_ = Route(line)
	})
}

func TestNearMissesDoNotPanic(t *testing.T) {
	for _, line := range nearMisses {
		m, err := Parse(line)
		if err == nil {
			again, err := Parse(Format(m))
			if err != nil || again != m {
				t.Errorf("%q: round trip %#v → %q → %#v, %v", line, m, Format(m), again, err)
			}
		}
	}
}

// FuzzReport checks the typed side of the grammar: every Report that
// validates is read back from its line, and from the line Line prints (the
// story flow's own when Canonical finds one) through ReportOf.
func FuzzReport(f *testing.F) {
	f.Add("US-1", 0, "COMPLETE", 4, true, 3, "")
	f.Add("US-1", 1, "NO-GO", 3, true, 0, "too big")
	f.Add("US-1", 2, "COMPLETE", 0, false, 0, "")
	f.Add("US-1", 3, "FAIL", 40, true, 0, "no tests. Agents: x")
	f.Add("US-1", 3, "ERROR", 0, false, 0, "")
	f.Add("US-1", 5, "APPROVED", 9, true, 2, "fine")
	f.Add("US-1", 999, "X", 9999, true, 9999, " lead")
	f.Fuzz(func(t *testing.T, item string, stage int, outcome string, score int, hasScore bool, tasks int, detail string) {
		r := Report{Item: foreman.ItemID(item), Stage: stage, Outcome: outcome, Score: score, HasScore: hasScore, Tasks: tasks, Detail: detail}
		if Validate(r) != nil {
			return
		}
		m, err := Parse(Line(r))
		if err != nil {
			t.Fatalf("%#v: its line %q does not parse: %v", r, Line(r), err)
		}
		back, ok := ReportOf(m)
		if !ok || back != r {
			t.Fatalf("%#v: line %q reads back as %#v", r, Line(r), back)
		}
	})
}
