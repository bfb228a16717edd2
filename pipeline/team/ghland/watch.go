package ghland

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/google/go-github/v84/github"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
)

// Report is how Watch tells the host a landing's end (team.Team passes
// its pipeline's Handle).
type Report = func(ctx context.Context, item foreman.ItemID, ev pipeline.Event) error

// Watch follows the pull requests Merge opened, this process's and those
// of a process before it (the records in StateDir), every Interval, until
// ctx ends. While a pull request waits, each look sends one conditional
// request (a 304 costs no rate limit): its head's check runs, and every
// third look the pull request itself instead (a person closing it, its
// mergeability, a merge queue's merge), and its reviews when it changed.
// Once the checks have completed it acts at once:
//
//   - a check that failed: EventLandRejected with Config.Outcome and the
//     check's name, conclusion, output and last Config.LogTail lines of
//     its log (an Actions job's log) as the builder's feedback;
//   - a review requesting changes on the head: EventLandRejected with the
//     review's body and comments;
//   - all passed and mergeable: merged with the method (the intent is
//     recorded first; a merged pull request is never merged again), then
//     EventMerged with the merge commit; MethodWait waits for the
//     repository to merge it;
//   - closed without merging by a person: EventMergeFailed, which pauses
//     the story with that cause.
//
// A report the story no longer takes (a *pipeline.TransitionError: it was
// taken before a crash) counts as made. Errors of one look are logged and
// the look is tried again at the next interval.
func (l *Lander) Watch(ctx context.Context, report Report) error {
	for {
		items, err := l.landings()
		if err != nil {
			return err
		}
		for _, item := range items {
			if err := l.look(ctx, item, report); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				l.cfg.Logger.Warn("ghland: looking at a landing", "story", item, "err", err)
			}
		}
		next := l.cfg.Clock.NewTimer(l.cfg.Interval)
		select {
		case <-ctx.Done():
			next.Stop()
			return ctx.Err()
		case <-next.C():
		}
	}
}

// tell reports ev; a report the story no longer takes was taken before.
func tell(ctx context.Context, report Report, item foreman.ItemID, ev pipeline.Event) error {
	err := report(ctx, item, ev)
	if errors.Is(err, pipeline.ErrInvalidTransition) {
		return nil
	}
	return err
}

// look is one look at a story's landing.
func (l *Lander) look(ctx context.Context, item foreman.ItemID, report Report) error {
	defer l.lock(item)()
	rec, err := l.load(item)
	if err != nil || !rec.Landing {
		return err
	}
	end := func(ev pipeline.Event, change func(*record)) error {
		if err := tell(ctx, report, item, ev); err != nil {
			return err
		}
		rec.Landing = false
		if change != nil {
			change(&rec)
		}
		return l.save(item, rec)
	}
	if rec.Merged != "" { // merged before a crash kept it from being reported
		l.synced(ctx)
		return end(pipeline.Event{Kind: pipeline.EventMerged, Commit: rec.Merged}, nil)
	}
	rec.Polls++
	if !rec.ChecksDone && !rec.Merging && rec.Polls%3 != 0 {
		done, fb, err := l.checks(ctx, rec.Head)
		if err != nil || !done {
			return errors.Join(err, l.save(item, rec))
		}
		if fb != "" {
			return end(l.rejected(fb), nil)
		}
		rec.ChecksDone = true
		if err := l.save(item, rec); err != nil {
			return err
		}
	}
	pr, _, err := l.gh.PullRequests.Get(ctx, l.cfg.Owner, l.cfg.Repo, rec.PR)
	if err != nil {
		return errors.Join(fmt.Errorf("ghland: reading #%d: %w", rec.PR, err), l.save(item, rec))
	}
	switch {
	case pr.GetMerged():
		rec.Merged = pr.GetMergeCommitSHA()
		if err := l.save(item, rec); err != nil {
			return err
		}
		l.synced(ctx)
		return end(pipeline.Event{Kind: pipeline.EventMerged, Commit: rec.Merged}, nil)
	case pr.GetState() == "closed":
		closed := stamp(pr.ClosedAt)
		return end(pipeline.Event{Kind: pipeline.EventMergeFailed, Detail: fmt.Sprintf(
			"its pull request #%d was closed without merging (%s); reopen it or resolve the story to land it again", rec.PR, pr.GetHTMLURL())},
			func(r *record) { r.ClosedAt = closed })
	}
	if updated := stamp(pr.UpdatedAt); updated != rec.Updated || (rec.ChecksDone && !rec.Reviewed) {
		fb, id, err := l.changesRequested(ctx, rec)
		if err != nil {
			return errors.Join(err, l.save(item, rec))
		}
		if fb != "" {
			return end(l.rejected(fb), func(r *record) { r.Reviews = append(r.Reviews, id) })
		}
		rec.Updated, rec.Reviewed = updated, rec.ChecksDone
	}
	if !rec.ChecksDone || l.cfg.Method == MethodWait {
		return l.save(item, rec)
	}
	if pr.GetHead().GetSHA() != rec.Head {
		// Someone else pushed to the story's branch: a person decides.
		return end(pipeline.Event{Kind: pipeline.EventMergeFailed, Detail: fmt.Sprintf(
			"its pull request #%d's branch %s was pushed to by someone else (its head is %s, not the %s the team pushed)",
			rec.PR, l.branch(item), short(pr.GetHead().GetSHA()), short(rec.Head))}, nil)
	}
	if pr.Mergeable == nil { // GitHub is still computing it
		return l.save(item, rec)
	}
	if !pr.GetMergeable() {
		return end(pipeline.Event{Kind: pipeline.EventMergeFailed, Detail: fmt.Sprintf(
			"its pull request #%d does not merge cleanly into %s (%s)", rec.PR, l.cfg.Base, pr.GetMergeableState())}, nil)
	}
	return l.merge(ctx, item, &rec, pr, end)
}

func (l *Lander) rejected(fb string) pipeline.Event {
	return pipeline.Event{Kind: pipeline.EventLandRejected, Outcome: l.cfg.Outcome, Detail: fb}
}

// merge merges the pull request, the intent recorded first.
func (l *Lander) merge(ctx context.Context, item foreman.ItemID, rec *record, pr *github.PullRequest,
	end func(pipeline.Event, func(*record)) error) error {
	method, err := l.mergeMethod(ctx)
	if err != nil {
		return err
	}
	rec.Merging = true
	if err := l.save(item, *rec); err != nil {
		return err
	}
	res, _, err := l.gh.PullRequests.Merge(ctx, l.cfg.Owner, l.cfg.Repo, rec.PR, Trailer(item), &github.PullRequestOptions{
		CommitTitle: fmt.Sprintf("%s (#%d)", pr.GetTitle(), rec.PR), SHA: rec.Head, MergeMethod: method})
	if status(err, http.StatusMethodNotAllowed) || status(err, http.StatusConflict) {
		// Not mergeable after all, or the head moved: look again.
		rec.Merging = false
		return errors.Join(fmt.Errorf("ghland: merging #%d: %w", rec.PR, err), l.save(item, *rec))
	}
	if err != nil {
		return fmt.Errorf("ghland: merging #%d: %w", rec.PR, err)
	}
	rec.Merged = res.GetSHA()
	if err := l.save(item, *rec); err != nil {
		return err
	}
	l.synced(ctx)
	return end(pipeline.Event{Kind: pipeline.EventMerged, Commit: rec.Merged}, nil)
}

func (l *Lander) synced(ctx context.Context) {
	if err := l.syncLocal(ctx); err != nil {
		l.cfg.Logger.Warn("ghland: bringing the local base up to the merge", "err", err)
	}
}

// mergeMethod is Config.Method, or the first of squash, merge and rebase
// the repository allows (read once: by Check, else here).
func (l *Lander) mergeMethod(ctx context.Context) (string, error) {
	if l.cfg.Method != "" {
		return l.cfg.Method, nil
	}
	l.mu.Lock()
	m := l.method
	l.mu.Unlock()
	if m != "" {
		return m, nil
	}
	repo, _, err := l.gh.Repositories.Get(ctx, l.cfg.Owner, l.cfg.Repo)
	if err != nil {
		return "", fmt.Errorf("ghland: reading the repository's merge methods: %w", err)
	}
	return l.chooseMethod(repo)
}

// chooseMethod checks Config.Method against the methods repo allows, or
// picks the first of squash, merge and rebase it allows, and remembers it.
func (l *Lander) chooseMethod(repo *github.Repository) (string, error) {
	allowed := map[string]bool{"squash": repo.GetAllowSquashMerge(), "merge": repo.GetAllowMergeCommit(), "rebase": repo.GetAllowRebaseMerge()}
	m := l.cfg.Method
	switch {
	case m == MethodWait:
		return m, nil
	case m != "":
		if !allowed[m] {
			return "", fmt.Errorf("%w: %s/%s does not allow the %s merge method", ErrRepository, l.cfg.Owner, l.cfg.Repo, m)
		}
	default:
		for _, c := range []string{"squash", "merge", "rebase"} {
			if allowed[c] {
				m = c
				break
			}
		}
		if m == "" {
			return "", fmt.Errorf("%w: %s/%s allows no merge method", ErrRepository, l.cfg.Owner, l.cfg.Repo)
		}
	}
	l.mu.Lock()
	l.method = m
	l.mu.Unlock()
	return m, nil
}

// checks reads the head's check runs: done once every required one (or
// every one) has completed; fb is the feedback of those that failed.
func (l *Lander) checks(ctx context.Context, head string) (done bool, fb string, err error) {
	res, _, err := l.gh.Checks.ListCheckRunsForRef(ctx, l.cfg.Owner, l.cfg.Repo, head,
		&github.ListCheckRunsOptions{Filter: github.Ptr("latest"), ListOptions: github.ListOptions{PerPage: 100}})
	if err != nil {
		return false, "", fmt.Errorf("ghland: reading the checks of %s: %w", head, err)
	}
	byName := map[string]*github.CheckRun{}
	for _, r := range res.CheckRuns {
		byName[r.GetName()] = r
	}
	var failed []string
	for name, r := range byName {
		if len(l.cfg.RequiredChecks) > 0 && !slices.Contains(l.cfg.RequiredChecks, name) {
			continue
		}
		if r.GetStatus() != "completed" {
			return false, "", nil
		}
		switch r.GetConclusion() {
		case "success", "neutral", "skipped":
		default:
			failed = append(failed, name)
		}
	}
	for _, name := range l.cfg.RequiredChecks {
		if byName[name] == nil {
			return false, "", nil // not started yet
		}
	}
	slices.Sort(failed)
	var b strings.Builder
	for _, name := range failed {
		b.WriteString(l.checkFeedback(ctx, byName[name], head))
	}
	return true, b.String(), nil
}

// checkFeedback says what a failed check run says: its name, conclusion,
// output, and the tail of its log.
func (l *Lander) checkFeedback(ctx context.Context, r *github.CheckRun, head string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The check %q failed (%s) on the pull request's head %s.\n", r.GetName(), r.GetConclusion(), short(head))
	if o := r.GetOutput(); o != nil {
		for _, s := range []string{o.GetTitle(), o.GetSummary(), o.GetText()} {
			if s = strings.TrimSpace(s); s != "" {
				b.WriteString(clip(s, 2000) + "\n")
			}
		}
	}
	if tail := l.logTail(ctx, r.GetID()); tail != "" {
		fmt.Fprintf(&b, "The last lines of its log:\n```\n%s\n```\n", tail)
	}
	b.WriteString("Fix the cause in your branch and commit; the team pushes it to the same pull request and its checks run again.\n")
	return b.String()
}

// logTail reads the last LogTail lines of a check run's log (an Actions
// job's: the API answers with a signed URL, fetched without the token),
// "" when there is none.
func (l *Lander) logTail(ctx context.Context, id int64) string {
	u, _, err := l.gh.Actions.GetWorkflowJobLogs(ctx, l.cfg.Owner, l.cfg.Repo, id, 0)
	if err != nil || u == nil {
		return ""
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return ""
	}
	resp, err := l.gh.Plain.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > l.cfg.LogTail {
		lines = lines[len(lines)-l.cfg.LogTail:]
	}
	return clipTail(strings.Join(lines, "\n"), 6000)
}

// changesRequested finds the first review requesting changes on the head
// that was not reported yet, and says what it asks.
func (l *Lander) changesRequested(ctx context.Context, rec record) (string, int64, error) {
	revs, _, err := l.gh.PullRequests.ListReviews(ctx, l.cfg.Owner, l.cfg.Repo, rec.PR, &github.ListOptions{PerPage: 100})
	if err != nil {
		return "", 0, fmt.Errorf("ghland: reading the reviews of #%d: %w", rec.PR, err)
	}
	for _, rv := range revs {
		if rv.GetState() != "CHANGES_REQUESTED" || rv.GetCommitID() != rec.Head || slices.Contains(rec.Reviews, rv.GetID()) {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "A review by @%s requested changes on pull request #%d:\n%s\n", rv.GetUser().GetLogin(), rec.PR, clip(strings.TrimSpace(rv.GetBody()), 4000))
		cs, _, err := l.gh.PullRequests.ListReviewComments(ctx, l.cfg.Owner, l.cfg.Repo, rec.PR, rv.GetID(), &github.ListOptions{PerPage: 100})
		if err != nil {
			return "", 0, fmt.Errorf("ghland: reading review %d's comments: %w", rv.GetID(), err)
		}
		for _, c := range cs {
			fmt.Fprintf(&b, "- %s:%d: %s\n", c.GetPath(), c.GetLine(), clip(strings.TrimSpace(c.GetBody()), 1000))
		}
		b.WriteString("Make the changes in your branch and commit; the team pushes them to the same pull request.\n")
		return b.String(), rv.GetID(), nil
	}
	return "", 0, nil
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + " [...]"
}

func clipTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "[...] " + s[len(s)-n:]
}
