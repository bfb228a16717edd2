package ghsource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/go-github/v84/github"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/ghclient"
	"github.com/agentforeman/foreman/pipeline/team"
)

// Source is a repository's labelled issues as a team's stories (a
// team.Source), told what becomes of them (a team.Reporter). Safe for
// concurrent use.
type Source struct {
	cfg Config
	gh  *ghclient.Client
	log *slog.Logger
}

var (
	_ team.Source   = (*Source)(nil)
	_ team.Reporter = (*Source)(nil)
)

// New checks cfg and returns the Source. It sends no request.
func New(cfg Config) (*Source, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	gh, err := ghclient.New(ghclient.Options{Token: cfg.Token, BaseURL: cfg.BaseURL, HTTPClient: cfg.HTTPClient,
		WriteGap: cfg.WriteGap, MaxTries: cfg.MaxTries, Clock: cfg.Clock, UserAgent: "foreman-ghsource"})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Source{cfg: cfg, gh: gh, log: log}, nil
}

// Stats counts the requests sent so far.
func (s *Source) Stats() Stats { return s.gh.Stats() }

// Stats counts what the source asked of GitHub (see ghclient.Stats).
type Stats = ghclient.Stats

// StoryID is the story id of issue n.
func (s *Source) StoryID(n int) foreman.ItemID {
	return foreman.ItemID(s.cfg.IDPrefix + strconv.Itoa(n))
}

// Issue is the issue number of a story of this Source.
func (s *Source) Issue(id foreman.ItemID) (int, bool) {
	rest, ok := strings.CutPrefix(string(id), s.cfg.IDPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n <= 0 || strconv.Itoa(n) != rest {
		return 0, false
	}
	return n, true
}

// List reads the repository's open issues carrying the label (one
// conditional request per page: unchanged, a 304 that costs no rate
// limit) and makes each a story: its title and body, and After the
// issues it is blocked by ("blocked by #N", or an unchecked task list
// item "- [ ] #N") that carry the label too. An issue blocked by an open
// issue without the label is held back (not listed) until that one is
// closed or labelled; a blocker that is closed, or does not exist, is
// met. Each of notStarted that is this Source's and no longer listed is
// looked at (a conditional request): closed, it is dropped with its
// dependents let go (team.Dropped.Unblock); open without the label, or
// gone, it is dropped and its dependents stay blocked.
func (s *Source) List(ctx context.Context, notStarted []foreman.ItemID) (team.Listing, error) {
	var lst team.Listing
	open, err := s.labelled(ctx)
	if err != nil {
		return lst, err
	}
	others := map[int]*github.Issue{} // issues looked at one by one, this call
	get := func(n int) (*github.Issue, error) {
		if is, ok := others[n]; ok {
			return is, nil
		}
		is, _, err := s.gh.Issues.Get(ctx, s.cfg.Owner, s.cfg.Repo, n)
		var er *github.ErrorResponse
		if errors.As(err, &er) && (er.Response.StatusCode == http.StatusNotFound || er.Response.StatusCode == http.StatusGone) {
			is, err = nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("ghsource: reading issue #%d: %w", n, err)
		}
		others[n] = is
		return is, nil
	}
	for _, is := range open.order {
		n := is.GetNumber()
		story := team.Story{ID: s.StoryID(n), Title: title(is), Body: is.GetBody()}
		held := ""
		for _, d := range blockers(is.GetBody(), n) {
			if _, ok := open.byNumber[d]; ok {
				story.After = append(story.After, s.StoryID(d))
				continue
			}
			b, err := get(d)
			if err != nil {
				return lst, err
			}
			if b != nil && b.GetState() == "open" {
				held = fmt.Sprintf("blocked by #%d, open without the label %s", d, s.cfg.Label)
				break
			}
		}
		if held != "" {
			s.log.Info("ghsource: issue held back", "issue", n, "why", held)
			continue
		}
		lst.Stories = append(lst.Stories, story)
	}
	for _, id := range notStarted {
		n, ok := s.Issue(id)
		if !ok {
			continue
		}
		if _, listed := open.byNumber[n]; listed {
			continue
		}
		is, err := get(n)
		if err != nil {
			return lst, err
		}
		switch {
		case is == nil:
			lst.Dropped = append(lst.Dropped, team.Dropped{Story: id, Cause: fmt.Sprintf("issue #%d is gone", n)})
		case is.GetState() == "closed":
			lst.Dropped = append(lst.Dropped, team.Dropped{Story: id, Unblock: true,
				Cause: fmt.Sprintf("issue #%d was closed (%s) before the story started", n, orDefault(is.GetStateReason(), "completed"))})
		case !hasLabel(is, s.cfg.Label):
			lst.Dropped = append(lst.Dropped, team.Dropped{Story: id,
				Cause: fmt.Sprintf("issue #%d lost its label %s before the story started", n, s.cfg.Label)})
		}
	}
	return lst, nil
}

type issueSet struct {
	order    []*github.Issue
	byNumber map[int]*github.Issue
}

// labelled lists the open issues with the label, oldest first, pull
// requests left out.
func (s *Source) labelled(ctx context.Context) (issueSet, error) {
	set := issueSet{byNumber: map[int]*github.Issue{}}
	opts := &github.IssueListByRepoOptions{State: "open", Labels: []string{s.cfg.Label}, Sort: "created", Direction: "asc",
		ListOptions: github.ListOptions{PerPage: 100}}
	for {
		page, resp, err := s.gh.Issues.ListByRepo(ctx, s.cfg.Owner, s.cfg.Repo, opts)
		if err != nil {
			return set, fmt.Errorf("ghsource: listing the issues labelled %s: %w", s.cfg.Label, err)
		}
		for _, is := range page {
			if is.IsPullRequest() {
				continue
			}
			if _, dup := set.byNumber[is.GetNumber()]; !dup {
				set.byNumber[is.GetNumber()] = is
				set.order = append(set.order, is)
			}
		}
		if resp.NextPage == 0 {
			return set, nil
		}
		opts.ListOptions.Page = resp.NextPage
	}
}

func title(is *github.Issue) string {
	t := strings.Join(strings.Fields(is.GetTitle()), " ")
	if t == "" {
		t = "issue #" + strconv.Itoa(is.GetNumber())
	}
	return t
}

func hasLabel(is *github.Issue, name string) bool {
	for _, l := range is.Labels {
		if strings.EqualFold(l.GetName(), name) {
			return true
		}
	}
	return false
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
