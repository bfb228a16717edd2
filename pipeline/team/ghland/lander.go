package ghland

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/google/go-github/v84/github"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/ghclient"
	"github.com/agentforeman/foreman/pipeline"
)

// Lander lands a team's stories through pull requests: a
// pipeline.Lander (set it as team.Config.Merger). Safe for concurrent use.
type Lander struct {
	cfg Config
	gh  *ghclient.Client

	mu    sync.Mutex
	items map[foreman.ItemID]*sync.Mutex
	// method is the merge method, chosen once from the repository's.
	method string
}

var _ pipeline.Lander = (*Lander)(nil)

// New checks cfg and returns the Lander. It sends no request.
func New(cfg Config) (*Lander, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	gh, err := ghclient.New(ghclient.Options{Token: cfg.Token, BaseURL: cfg.BaseURL, HTTPClient: cfg.HTTPClient,
		WriteGap: cfg.WriteGap, MaxTries: cfg.MaxTries, Clock: cfg.Clock, UserAgent: "foreman-ghland"})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return &Lander{cfg: cfg, gh: gh, items: map[foreman.ItemID]*sync.Mutex{}}, nil
}

// ErrRepository is Check's error when the repository cannot be reached
// or read with the token, or cannot land a story (no merge method, or not
// Config.Method).
var ErrRepository = errors.New("ghland: the repository cannot land stories")

// Check reads the repository once (one GET through the API), so that a run
// whose stories could never land (no network, an unknown host, a wrong
// token or repository, the merge method not allowed) fails before any
// agent works: call it before the team's Run. It also reads the merge
// method Watch uses when Config.Method is empty. Its error matches
// ErrRepository and says the cause.
func (l *Lander) Check(ctx context.Context) error {
	repo, _, err := l.gh.Repositories.Get(ctx, l.cfg.Owner, l.cfg.Repo)
	if err != nil {
		return fmt.Errorf("%w: reading %s/%s: %w", ErrRepository, l.cfg.Owner, l.cfg.Repo, err)
	}
	if repo.GetArchived() {
		return fmt.Errorf("%w: %s/%s is archived", ErrRepository, l.cfg.Owner, l.cfg.Repo)
	}
	_, err = l.chooseMethod(repo)
	return err
}

// Stats counts the requests sent so far.
func (l *Lander) Stats() ghclient.Stats { return l.gh.Stats() }

// PullRequest is the number of a story's pull request, 0 when it has none.
func (l *Lander) PullRequest(item foreman.ItemID) (int, error) {
	rec, err := l.load(item)
	return rec.PR, err
}

func (l *Lander) lock(item foreman.ItemID) func() {
	l.mu.Lock()
	m := l.items[item]
	if m == nil {
		m = &sync.Mutex{}
		l.items[item] = m
	}
	l.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// Trailer is the line a pull request's body and its merge commit carry:
// "Foreman-Item: <story>", as the local squash merge's commit does.
func Trailer(item foreman.ItemID) string { return "Foreman-Item: " + string(item) }

// Merge hands a story over: it commits what the agent left uncommitted,
// pushes the worktree to <BranchPrefix>/<story> on Remote, and opens the
// story's pull request, or updates the one it has (found by the number
// recorded, or, when a crash came between its creation and the record,
// by its branch and the trailer); the number is recorded before anything
// else is done with it. It answers MergeOutcome.Landing at once: Watch
// reports the end. A story whose pull request was merged answers Already;
// one whose pull request a person closed, and the story was resumed
// since, gets it reopened (or, when GitHub refuses, a new one).
func (l *Lander) Merge(ctx context.Context, r pipeline.MergeRequest) (pipeline.MergeOutcome, error) {
	defer l.lock(r.Item)()
	rec, err := l.load(r.Item)
	if err != nil {
		return pipeline.MergeOutcome{}, err
	}
	if rec.Merged != "" {
		return pipeline.MergeOutcome{Commit: rec.Merged, Already: true}, nil
	}
	title := strings.TrimSpace(r.Title)
	if title == "" {
		title = "Story " + string(r.Item)
	}
	pr, err := l.find(ctx, r.Item, rec.PR)
	if err != nil {
		return pipeline.MergeOutcome{}, err
	}
	if pr != nil && rec.PR != pr.GetNumber() {
		rec.PR = pr.GetNumber() // found by its branch: recorded first
		if err := l.save(r.Item, rec); err != nil {
			return pipeline.MergeOutcome{}, err
		}
	}
	if pr != nil && pr.GetMerged() {
		rec.PR, rec.Merged, rec.Landing = pr.GetNumber(), pr.GetMergeCommitSHA(), false
		if err := l.save(r.Item, rec); err != nil {
			return pipeline.MergeOutcome{}, err
		}
		l.synced(ctx) // merged before a crash: the local base may lack it
		return pipeline.MergeOutcome{Commit: rec.Merged, Already: true}, nil
	}
	if pr != nil && pr.GetState() == "closed" {
		if rec.ClosedAt == "" || rec.ClosedAt != stamp(pr.ClosedAt) {
			// Closed and not yet reported: Watch reports it.
			rec.PR, rec.Landing = pr.GetNumber(), true
			return pipeline.MergeOutcome{Landing: true}, l.save(r.Item, rec)
		}
		// The story was resumed after its closing was reported: reopen it
		// before the push (GitHub reopens a pull request whose branch was
		// not force-pushed since).
		open := "open"
		if _, _, err := l.gh.PullRequests.Edit(ctx, l.cfg.Owner, l.cfg.Repo, pr.GetNumber(), &github.PullRequest{State: &open}); err != nil {
			if !status(err, http.StatusUnprocessableEntity) {
				return pipeline.MergeOutcome{}, fmt.Errorf("ghland: reopening #%d: %w", pr.GetNumber(), err)
			}
			l.cfg.Logger.Info("ghland: the closed pull request cannot be reopened; opening another", "story", r.Item, "pr", pr.GetNumber(), "err", err)
			pr = nil
		}
		rec.ClosedAt = ""
	}
	head, err := l.push(ctx, r.Item, title)
	var prot *protectedError
	if errors.As(err, &prot) {
		return pipeline.MergeOutcome{Refused: prot.Error()}, nil
	}
	if err != nil {
		return pipeline.MergeOutcome{}, err
	}
	body, err := l.body(ctx, r.Item, title)
	if err != nil {
		return pipeline.MergeOutcome{}, err
	}
	if pr == nil {
		pr, err = l.create(ctx, r.Item, title, body)
		var refused *refusedError
		if errors.As(err, &refused) {
			return pipeline.MergeOutcome{Refused: refused.Error()}, nil
		}
		if err != nil {
			return pipeline.MergeOutcome{}, err
		}
		rec = record{PR: pr.GetNumber(), Reviews: rec.Reviews}
		if err := l.save(r.Item, rec); err != nil { // before anything else
			return pipeline.MergeOutcome{}, err
		}
	} else if pr.GetTitle() != title || pr.GetBody() != body {
		if _, _, err := l.gh.PullRequests.Edit(ctx, l.cfg.Owner, l.cfg.Repo, pr.GetNumber(),
			&github.PullRequest{Title: &title, Body: &body}); err != nil {
			return pipeline.MergeOutcome{}, fmt.Errorf("ghland: updating #%d: %w", pr.GetNumber(), err)
		}
	}
	rec.PR, rec.Head, rec.Landing, rec.Merging, rec.Polls = pr.GetNumber(), head, true, false, 0
	rec.ChecksDone, rec.Reviewed = false, false
	return pipeline.MergeOutcome{Landing: true}, l.save(r.Item, rec)
}

// find returns the story's pull request: number n when recorded, else
// the newest on its branch whose body has the story's trailer.
func (l *Lander) find(ctx context.Context, item foreman.ItemID, n int) (*github.PullRequest, error) {
	if n != 0 {
		pr, _, err := l.gh.PullRequests.Get(ctx, l.cfg.Owner, l.cfg.Repo, n)
		if err != nil {
			return nil, fmt.Errorf("ghland: reading #%d: %w", n, err)
		}
		return pr, nil
	}
	prs, _, err := l.gh.PullRequests.List(ctx, l.cfg.Owner, l.cfg.Repo, &github.PullRequestListOptions{
		State: "all", Head: l.cfg.Owner + ":" + l.branch(item), Base: l.cfg.Base, ListOptions: github.ListOptions{PerPage: 100}})
	if err != nil {
		return nil, fmt.Errorf("ghland: looking for the pull request of %s: %w", item, err)
	}
	for _, pr := range prs { // newest first
		if hasTrailer(pr.GetBody(), item) {
			// The list's entries lack merged and mergeable: read it.
			return l.find(ctx, item, pr.GetNumber())
		}
	}
	return nil, nil
}

func hasTrailer(body string, item foreman.ItemID) bool {
	for line := range strings.Lines(body) {
		if strings.TrimSpace(line) == Trailer(item) {
			return true
		}
	}
	return false
}

// refusedError is a pull request GitHub will not open (no commits between
// the branches): the story pauses with it.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

func (l *Lander) create(ctx context.Context, item foreman.ItemID, title, body string) (*github.PullRequest, error) {
	head, base := l.branch(item), l.cfg.Base
	pr, _, err := l.gh.PullRequests.Create(ctx, l.cfg.Owner, l.cfg.Repo, &github.NewPullRequest{Title: &title, Head: &head, Base: &base, Body: &body})
	if err == nil {
		return pr, nil
	}
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusUnprocessableEntity {
		for _, e := range er.Errors {
			switch {
			case strings.HasPrefix(e.Message, "A pull request already exists"):
				// Opened by a run that died before its record, without the
				// trailer found (edited by a person): adopt the open one.
				prs, _, lerr := l.gh.PullRequests.List(ctx, l.cfg.Owner, l.cfg.Repo, &github.PullRequestListOptions{
					State: "open", Head: l.cfg.Owner + ":" + head, Base: base})
				if lerr == nil && len(prs) > 0 {
					return l.find(ctx, item, prs[0].GetNumber())
				}
			case strings.HasPrefix(e.Message, "No commits between"):
				return nil, &refusedError{msg: fmt.Sprintf("nothing to land: %s", e.Message)}
			}
		}
	}
	return nil, fmt.Errorf("ghland: opening the pull request of %s: %w", item, err)
}

// body is a pull request's body: the story's description, then the
// trailer.
func (l *Lander) body(ctx context.Context, item foreman.ItemID, title string) (string, error) {
	desc := title
	if l.cfg.Describe != nil {
		d, err := l.cfg.Describe(ctx, item, title)
		if err != nil {
			return "", err
		}
		desc = d
	}
	return fmt.Sprintf("%s\n\nLanded by Foreman as story `%s`.\n\n%s\n", strings.TrimSpace(desc), item, Trailer(item)), nil
}

func status(err error, code int) bool {
	var er *github.ErrorResponse
	return errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == code
}

func stamp(t *github.Timestamp) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05Z")
}
