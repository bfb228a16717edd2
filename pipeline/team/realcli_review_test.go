package team_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/realagent"
	"github.com/agentforeman/foreman/modeltest"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/team"
)

// The reviewer's prompt names its result file and its assignment.
var (
	reviewFileRE       = regexp.MustCompile(`Write JSON to the file (\S+) `)
	reviewAssignmentRE = regexp.MustCompile(`\{"assignment": "([^"]+)"`)
)

// reviewVerdict is a reviewer's turn writing its verdict to its result file.
func reviewVerdict(outcome, summary string) modeltest.Turn {
	return modeltest.Turn{Reply: func(in modeltest.Input) modeltest.Turn {
		file, a := reviewFileRE.FindStringSubmatch(in.Prompt), reviewAssignmentRE.FindStringSubmatch(in.Prompt)
		if file == nil || a == nil {
			return modeltest.Say("no result file or assignment in the reviewer's prompt")
		}
		b, _ := json.Marshal(map[string]string{"assignment": a[1], "outcome": outcome, "summary": summary})
		return modeltest.Do(modeltest.WriteFile(file[1], string(b)))
	}}
}

// A reviewer (the real CLI too) rejects the first build with feedback; the
// build goes to a fresh worker whose prompt carries it, the CLI does what it
// says, the second review approves, and the story merges once.
func TestARealCLIReviewerRejectsThenApproves(t *testing.T) {
	for _, cli := range realCLIs() {
		t.Run(string(cli.name), func(t *testing.T) {
			realagent.Require(t, cli.name) // before the CLIs' directory is looked at
			const feedback = "v.txt must say hello, not v1"
			var reviews atomic.Int32
			build := modeltest.Turn{Reply: func(in modeltest.Input) modeltest.Turn {
				a, _ := realagent.ReadAssignment(in.Prompt)
				content := "v1\n"
				if strings.Contains(in.Prompt, feedback) {
					content = "hello\n"
				}
				return modeltest.Do(modeltest.WriteFile(filepath.Join(a.Workspace, "v.txt"), content))
			}}
			srv := modeltest.Start(t,
				modeltest.Script{Name: "plan", Match: "You are the planner", Turns: []modeltest.Turn{
					realagent.SayLine("Stage 0 COMPLETE for %s. 1 tasks created. Plan score: 4/4.")}},
				modeltest.Script{Name: "validate", Match: "You are the validator", Turns: []modeltest.Turn{
					realagent.SayLine("Stage 1 COMPLETE for %s. Verdict: GO. Readiness: 9.")}},
				modeltest.Script{Name: "build", Match: "You are the builder", Turns: []modeltest.Turn{build,
					modeltest.Do(modeltest.Shell("git add v.txt && git commit -qm 'write v.txt'")),
					realagent.ReportTool(realagent.Report{Outcome: "complete", Summary: "v.txt written"}), modeltest.Say("built")}},
				modeltest.Script{Name: "review", Match: "You are the reviewer for story V:", Turns: []modeltest.Turn{
					{Reply: func(in modeltest.Input) modeltest.Turn {
						if reviews.Add(1) == 1 {
							return reviewVerdict("reject", feedback).Reply(in)
						}
						return reviewVerdict("approve", "").Reply(in)
					}}, modeltest.Say("reviewed")}},
			)
			dir, err := realagent.Dir()
			require.NoError(t, err)
			modules, err := filepath.EvalSymlinks(filepath.Join(dir, ".."))
			require.NoError(t, err)
			tm, repo := realTeam(t, cli, srv, func(c *team.Config) {
				c.Reviewer = cli.driver(t, srv.URL(), agentcmd.Config{Format: cli.format,
					Sandbox: agentcmd.Sandbox{Binds: []agentcmd.Bind{{Source: modules}}}})
			})
			require.NoError(t, tm.Add(context.Background(), team.Story{ID: "V", Title: "write v.txt"}))

			res := runReal(t, tm)

			st, err := tm.Status(context.Background())
			require.NoError(t, err)
			require.Equal(t, 1, res.Merged, "%s\n%s", res.String(), st.Text())
			assert.Equal(t, []string{"V"}, trailers(t, repo))
			var verdicts []string
			for _, e := range tm.Events(0) {
				if e.Kind == team.EventReviewed {
					verdicts = append(verdicts, string(e.Outcome)+": "+e.Detail)
				}
			}
			assert.Equal(t, []string{"REJECTED: " + feedback, "APPROVED: "}, verdicts)
			var told int
			for _, r := range srv.Requests() {
				if r.Script == "build" && strings.Contains(r.Prompt, feedback) {
					told++
				}
			}
			assert.Positive(t, told, "the second build's prompt carried the reviewer's feedback to the model")
			assert.Empty(t, srv.Unmatched())
		})
	}
}
