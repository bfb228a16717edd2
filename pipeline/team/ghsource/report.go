package ghsource

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-github/v84/github"

	"github.com/agentforeman/foreman/pipeline/team"
)

// marker is the hidden line that names a comment's report, so that the
// same report is never posted twice.
func marker(r team.StoryReport) string {
	return fmt.Sprintf("<!-- foreman:%s:%s -->", r.Story, r.Key)
}

// Report writes a story's state to its issue: a comment (started, paused
// with its cause, merged with its commit), the state label
// (<StateLabels>working, paused, merged; the previous one removed), and,
// on merge, the issue closed as completed. The comment carries a hidden
// marker with the report's key, and Report looks for it among the issue's
// comments before posting, so a report asked again (a host killed between
// the post and its record) posts nothing twice; labels and closing are
// idempotent. A story that is not this Source's is left alone.
func (s *Source) Report(ctx context.Context, r team.StoryReport) error {
	n, ok := s.Issue(r.Story)
	if !ok {
		return nil
	}
	var text, add string
	var remove []string
	lbl := func(state string) string { return s.cfg.StateLabels + state }
	switch r.Kind {
	case team.ReportStarted:
		text = fmt.Sprintf("Foreman started working on this issue as story `%s`.", r.Story)
		add = lbl("working")
	case team.ReportPaused:
		text = fmt.Sprintf("Story `%s` is paused and waits for a person:\n\n%s\n\n"+
			"Decide with `foreman -resolve %s=retry|resume|skip|abandon` (or on the status page).", r.Story, quote(r.Cause), r.Story)
		add, remove = lbl("paused"), []string{lbl("working")}
	case team.ReportMerged:
		text = fmt.Sprintf("Story `%s` is merged as %s.", r.Story, orDefault(r.Commit, "a squash commit"))
		add, remove = lbl("merged"), []string{lbl("working"), lbl("paused")}
	default:
		return fmt.Errorf("ghsource: unknown report kind %q", r.Kind)
	}
	if err := s.commentOnce(ctx, n, text+"\n\n"+marker(r), marker(r)); err != nil {
		return err
	}
	for _, l := range remove {
		if _, err := s.gh.Issues.RemoveLabelForIssue(ctx, s.cfg.Owner, s.cfg.Repo, n, l); err != nil && !notFound(err) {
			return fmt.Errorf("ghsource: removing label %s from #%d: %w", l, n, err)
		}
	}
	if _, _, err := s.gh.Issues.AddLabelsToIssue(ctx, s.cfg.Owner, s.cfg.Repo, n, []string{add}); err != nil {
		return fmt.Errorf("ghsource: labelling #%d %s: %w", n, add, err)
	}
	if r.Kind == team.ReportMerged {
		closed, reason := "closed", "completed"
		if _, _, err := s.gh.Issues.Edit(ctx, s.cfg.Owner, s.cfg.Repo, n, &github.IssueRequest{State: &closed, StateReason: &reason}); err != nil {
			return fmt.Errorf("ghsource: closing #%d: %w", n, err)
		}
	}
	return nil
}

// commentOnce posts body on issue n unless a comment there has mark.
func (s *Source) commentOnce(ctx context.Context, n int, body, mark string) error {
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		cs, resp, err := s.gh.Issues.ListComments(ctx, s.cfg.Owner, s.cfg.Repo, n, opts)
		if err != nil {
			return fmt.Errorf("ghsource: reading the comments of #%d: %w", n, err)
		}
		for _, c := range cs {
			if strings.Contains(c.GetBody(), mark) {
				return nil
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.ListOptions.Page = resp.NextPage
	}
	if _, _, err := s.gh.Issues.CreateComment(ctx, s.cfg.Owner, s.cfg.Repo, n, &github.IssueComment{Body: &body}); err != nil {
		return fmt.Errorf("ghsource: commenting on #%d: %w", n, err)
	}
	return nil
}

func notFound(err error) bool {
	var er *github.ErrorResponse
	return errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusNotFound
}

// maxCause bounds the cause quoted in a comment (GitHub takes 65,536
// characters).
const maxCause = 4000

// quote makes text a Markdown block quote.
func quote(text string) string {
	// The cause may hold an agent's output: no hidden marker of its own
	// (it would pass for a report already posted), and not too long.
	text = strings.ReplaceAll(strings.TrimSpace(text), "<!--", "&lt;!--")
	if len(text) > maxCause {
		text = text[:maxCause] + " [...]"
	}
	if text == "" {
		return "> (no cause given)"
	}
	return "> " + strings.ReplaceAll(text, "\n", "\n> ")
}
