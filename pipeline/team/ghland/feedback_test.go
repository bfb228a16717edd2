package ghland_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/fakegithub"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team/ghland"
)

// ciOn is a CI whose check "test" fails while one.txt says "bad", with
// a long log ending in the failure.
func ciOn(w **world) func(string, string) fakegithub.CheckResult {
	return func(name, sha string) fakegithub.CheckResult {
		content := gitShow((*w).remote, sha, "one.txt")
		if name == "test" && strings.Contains(content, "bad") {
			var log strings.Builder
			for i := range 100 {
				fmt.Fprintf(&log, "setup %03d\n", i)
			}
			log.WriteString("--- FAIL: TestOne (0.00s)\n    one_test.go:9: one.txt says bad\nFAIL\n")
			return fakegithub.CheckResult{Conclusion: "failure", Title: "1 test failed", Summary: "TestOne", Log: log.String()}
		}
		return fakegithub.CheckResult{Conclusion: "success", Log: "ok\n"}
	}
}

// TestAFailingCheckGoesBackThenTheFixLands: the failing check's name and
// log tail come back as the builder's feedback (EventLandRejected); the
// fix is pushed to the same pull request and lands.
func TestAFailingCheckGoesBackThenTheFixLands(t *testing.T) {
	ctx := context.Background()
	var w *world
	w = newWorld(t, fakegithub.Config{Checks: []string{"lint", "test"}, CI: ciOn(&w)})
	wt := w.story(t, "US-1", "one.txt", "bad\n")
	l := w.lander(t, nil)
	_, err := l.Merge(ctx, pipeline.MergeRequest{Item: "US-1", Title: "Add one"})
	require.NoError(t, err)
	var r reports
	ticks := w.watch(t, l, &r, 20, func() bool { return len(r.all()) > 0 })
	evs := r.all()
	require.Len(t, evs, 1)
	ev := evs[0].ev
	assert.Equal(t, pipeline.EventLandRejected, ev.Kind)
	assert.Equal(t, pipeline.Fail, ev.Outcome)
	assert.Contains(t, ev.Detail, `The check "test" failed (failure)`)
	assert.Contains(t, ev.Detail, "1 test failed")
	assert.Contains(t, ev.Detail, "--- FAIL: TestOne (0.00s)\n    one_test.go:9: one.txt says bad\nFAIL")
	assert.NotContains(t, ev.Detail, "setup 000", "only the log's tail")
	assert.Contains(t, ev.Detail, "setup 099")
	assert.NotContains(t, ev.Detail, `"lint"`, "the passing check is not feedback")
	t.Logf("feedback after %d poll intervals (check runs complete at the third read of the head's check runs)", ticks)

	// The builder fixes it; the flow merges again: the same pull request.
	require.NoError(t, os.WriteFile(filepath.Join(wt, "one.txt"), []byte("good\n"), 0o644))
	out, err := l.Merge(ctx, pipeline.MergeRequest{Item: "US-1", Title: "Add one"})
	require.NoError(t, err)
	assert.True(t, out.Landing)
	r = reports{}
	w.watch(t, l, &r, 20, func() bool { return len(r.all()) > 0 })
	evs = r.all()
	require.Len(t, evs, 1)
	assert.Equal(t, pipeline.EventMerged, evs[0].ev.Kind)
	require.Len(t, w.gh.Pulls(), 1, "one pull request")
	assert.Equal(t, "good", gitShow(w.remote, "main", "one.txt"))
}

// TestAReviewRequestingChangesGoesBack: a review requesting changes on
// the head comes back with its body and comments; a review of an older
// head does not hold the fix back.
func TestAReviewRequestingChangesGoesBack(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, fakegithub.Config{Checks: []string{"test"}})
	wt := w.story(t, "US-1", "one.txt", "one\n")
	l := w.lander(t, nil)
	_, err := l.Merge(ctx, pipeline.MergeRequest{Item: "US-1", Title: "Add one"})
	require.NoError(t, err)
	n, _ := l.PullRequest("US-1")
	w.gh.Review(n, "hubot", "APPROVED", "fine by me")
	w.gh.Review(n, "octocat", "CHANGES_REQUESTED", "Please name it 1.txt.",
		fakegithub.ReviewComment{Path: "one.txt", Line: 1, Body: "rename this file"})
	var r reports
	w.watch(t, l, &r, 20, func() bool { return len(r.all()) > 0 })
	evs := r.all()
	require.Len(t, evs, 1)
	assert.Equal(t, pipeline.EventLandRejected, evs[0].ev.Kind)
	assert.Contains(t, evs[0].ev.Detail, "A review by @octocat requested changes on pull request #")
	assert.Contains(t, evs[0].ev.Detail, "Please name it 1.txt.")
	assert.Contains(t, evs[0].ev.Detail, "- one.txt:1: rename this file")
	assert.False(t, w.gh.Pull(n).Merged)

	git(t, wt, "mv", "one.txt", "1.txt")
	_, err = l.Merge(ctx, pipeline.MergeRequest{Item: "US-1", Title: "Add one"})
	require.NoError(t, err)
	r = reports{}
	w.watch(t, l, &r, 20, func() bool { return len(r.all()) > 0 })
	evs = r.all()
	require.Len(t, evs, 1)
	assert.Equal(t, pipeline.EventMerged, evs[0].ev.Kind, "the old head's review does not hold the fix back")
}

// TestAPullRequestAPersonClosesPausesTheStory: closed without merging,
// the story pauses with that cause; resumed, its pull request is reopened
// and lands.
func TestAPullRequestAPersonClosesPausesTheStory(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, fakegithub.Config{Checks: []string{"test"}, CheckReads: 6})
	w.story(t, "US-1", "one.txt", "one\n")
	l := w.lander(t, nil)
	_, err := l.Merge(ctx, pipeline.MergeRequest{Item: "US-1", Title: "Add one"})
	require.NoError(t, err)
	n, _ := l.PullRequest("US-1")
	w.gh.ClosePull(n)
	var r reports
	w.watch(t, l, &r, 20, func() bool { return len(r.all()) > 0 })
	evs := r.all()
	require.Len(t, evs, 1)
	assert.Equal(t, pipeline.EventMergeFailed, evs[0].ev.Kind)
	assert.Contains(t, evs[0].ev.Detail, "was closed without merging")

	// A person resumes the story: the flow merges again.
	_, err = l.Merge(ctx, pipeline.MergeRequest{Item: "US-1", Title: "Add one"})
	require.NoError(t, err)
	assert.Equal(t, "open", w.gh.Pull(n).State, "reopened")
	r = reports{}
	w.watch(t, l, &r, 30, func() bool { return len(r.all()) > 0 })
	require.Len(t, r.all(), 1)
	assert.Equal(t, pipeline.EventMerged, r.all()[0].ev.Kind)
	assert.Len(t, w.gh.Pulls(), 1)
}

// TestABranchSomeoneElsePushedToPausesTheStory: the lander does not merge
// a head it did not push.
func TestABranchSomeoneElsePushedToPausesTheStory(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, fakegithub.Config{Checks: []string{"test"}})
	wt := w.story(t, "US-1", "one.txt", "one\n")
	l := w.lander(t, nil)
	_, err := l.Merge(ctx, pipeline.MergeRequest{Item: "US-1", Title: "Add one"})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(wt, "other.txt"), []byte("someone\n"), 0o644))
	git(t, wt, "add", "other.txt")
	git(t, wt, "commit", "-qm", "someone else's")
	git(t, wt, "push", "-q", w.remote, "HEAD:refs/heads/foreman/US-1")
	var r reports
	w.watch(t, l, &r, 20, func() bool { return len(r.all()) > 0 })
	require.Len(t, r.all(), 1)
	assert.Equal(t, pipeline.EventMergeFailed, r.all()[0].ev.Kind)
	assert.Contains(t, r.all()[0].ev.Detail, "was pushed to by someone else")
	assert.Zero(t, w.gh.Stats().ByRoute["PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge"])
}

// TestABranchTouchingAProtectedPathIsRefusedBeforeThePush: an agent that
// forces the team's state into its commits gets no pull request; the
// story pauses with the paths.
func TestABranchTouchingAProtectedPathIsRefusedBeforeThePush(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, fakegithub.Config{})
	wt := w.story(t, "US-1", "one.txt", "one\n")
	require.NoError(t, os.MkdirAll(filepath.Join(wt, ".Foreman"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(wt, ".Foreman", "secret"), []byte("x\n"), 0o644))
	git(t, wt, "add", "-f", ".")
	git(t, wt, "commit", "-qm", "sneaky")
	l := w.lander(t, func(c *ghland.Config) { c.Protected = []string{".foreman", ".worktrees"} })
	out, err := l.Merge(ctx, pipeline.MergeRequest{Item: "US-1", Title: "Add one"})
	require.NoError(t, err)
	assert.Contains(t, out.Refused, "touches protected paths")
	assert.Contains(t, out.Refused, ".Foreman/secret")
	assert.Empty(t, w.gh.Pulls())
	assert.Empty(t, gitShow(w.remote, "foreman/US-1", "one.txt"), "nothing pushed")
}
