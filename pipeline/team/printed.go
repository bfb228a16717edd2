package team

import (
	"crypto/subtle"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/message"
)

// A report line an agent prints is the last of its ways to report, and the
// easiest to forge: anything that reaches the agent's output (its prompt
// echoed back, a file it reads, a tool's answer) can hold a canonical line
// (pipeline/message), and a canonical line names a story and a stage but
// no assignment. So the team takes a printed line only with a proof after
// it, in brackets:
//
//	Stage 1 COMPLETE for US-001. Verdict: GO. Readiness: 8. [assignment US-001-a3 key 5c0f…]
//
// The assignment is the agent's own (FOREMAN_ASSIGNMENT) and the key its
// report key (FOREMAN_REPORT_KEY, also given in the prompt): 128 bits
// derived from a secret of the team's for that assignment alone, which no
// story body, no file in the repository and no other story's agent can
// know, since it exists only once the assignment does. The prompt's
// example line carries the placeholder keyPlaceholder, never the key, and
// the key is given on a line of its own that is no report line: a prompt
// echoed back, whole or in part, holds no line that is taken.
const keyPlaceholder = "<your report key>"

// tagRE splits a printed line into the canonical line and its proof; a
// final period after the bracket is tolerated.
var tagRE = regexp.MustCompile(`^(.*\S)\s*\[assignment (\S+) key ([^\]]*)\]\.?$`)

// taggedLine is the canonical line with its proof, as an agent prints it.
func taggedLine(line string, a foreman.AssignmentID, key string) string {
	return fmt.Sprintf("%s [assignment %s key %s]", line, a, key)
}

// printedRefusal says why a printed report line about the stage was not
// taken: it would have been before the lines needed their proof.
type printedRefusal string

// printedReport finds the last line of text that is a canonical report
// about item's stage carrying the proof of assignment a (key), and reads it
// as a Report (message.ReportOf): this is where a printed line is parsed,
// once. When none does, it also returns why the report lines about the
// stage that were there are not taken (each reason once, at most three).
func printedReport(item foreman.ItemID, stage int, a foreman.AssignmentID, key, text string) (message.Report, bool, []printedRefusal) {
	var refused []printedRefusal
	lines := strings.Split(strings.TrimSpace(text), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "Stage ") {
			continue
		}
		canonical, proof := l, ""
		var id, got string
		if m := tagRE.FindStringSubmatch(l); m != nil {
			canonical, id, got, proof = m[1], m[2], strings.TrimSpace(m[3]), "tagged"
		}
		msg, err := message.Parse(canonical)
		if err != nil {
			continue
		}
		r, ok := message.ReportOf(msg)
		if !ok || r.Item != item || r.Stage != stage {
			continue
		}
		var why printedRefusal
		switch {
		case proof == "":
			why = "a printed report line without its assignment's id and key"
		case got == keyPlaceholder:
			why = "the prompt's example report line, printed back without the key"
		case id != string(a):
			why = printedRefusal(fmt.Sprintf("a printed report line for assignment %q, not its own", id))
		case key == "" || subtle.ConstantTimeCompare([]byte(got), []byte(key)) != 1:
			why = "a printed report line with a wrong key"
		default:
			return r, true, nil
		}
		if len(refused) < 3 && !slices.Contains(refused, why) {
			refused = append(refused, why)
		}
	}
	return message.Report{}, false, refused
}
