package fakegithub

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentforeman/foreman/internal/gitexec"
)

// Pull requests, check runs and reviews, on the branches of Config.GitDir.

type pull struct {
	number              int
	id                  int64
	title, body         string
	head, base          string // branch names
	state               string // open, closed
	merged              bool
	mergeSHA, mergedBy  string
	headSHA             string // the head's commit when last looked at
	unsettled           int    // reads left that answer mergeable null
	created, updated    time.Time
	closed, mergedAt    time.Time
	author              string
	reviews             []*review
	closedBy, closedFor string // who closed it; the head it was closed at
}

type review struct {
	id             int64
	login, state   string
	body, commitID string
	submitted      time.Time
	comments       []ReviewComment
}

// ReviewComment is a comment of a review on a line of a file.
type ReviewComment struct {
	Path string
	Line int
	Body string
}

type checkRun struct {
	id                 int64
	name, sha          string
	reads              int
	result             *CheckResult
	started, completed time.Time
}

// PullState is a pull request as a test reads it.
type PullState struct {
	Number              int
	State               string
	Merged              bool
	Title, Body         string
	Head, Base, HeadSHA string
	MergeCommit         string
}

func (s *Server) git(args ...string) (string, error) {
	if s.cfg.GitDir == "" {
		return "", fmt.Errorf("fakegithub: Config.GitDir is not set")
	}
	g := gitexec.Runner{}
	out, err := g.Run(context.Background(), s.cfg.GitDir, args...)
	return strings.TrimSpace(out), err
}

// branchSHA is a branch's commit in GitDir, "" when it does not exist.
func (s *Server) branchSHA(name string) string {
	out, err := s.git("rev-parse", "--verify", "-q", "refs/heads/"+name+"^{commit}")
	if err != nil {
		return ""
	}
	return out
}

// look refreshes a pull request's head: a new head restarts the
// mergeability computation and gets the CI's check runs.
func (s *Server) look(p *pull) {
	if p.state != "open" {
		return
	}
	sha := s.branchSHA(p.head)
	if sha == "" || sha == p.headSHA {
		return
	}
	p.headSHA, p.unsettled = sha, s.cfg.MergeableAfter
	p.updated = s.clk.Now().UTC()
	s.runsFor(sha)
}

// runsFor returns the check runs of a commit, made on first sight.
func (s *Server) runsFor(sha string) []*checkRun {
	var out []*checkRun
	for _, r := range s.runs {
		if r.sha == sha {
			out = append(out, r)
		}
	}
	if len(out) > 0 || len(s.cfg.Checks) == 0 {
		return out
	}
	for _, name := range s.cfg.Checks {
		s.nextID++
		r := &checkRun{id: s.nextID, name: name, sha: sha}
		s.runs = append(s.runs, r)
		out = append(out, r)
	}
	return out
}

// CreatePull opens a pull request as a person would and returns its number.
func (s *Server) CreatePull(title, head, base string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.newPull(title, "", head, base, "octocat")
	return p.number
}

func (s *Server) newPull(title, body, head, base, author string) *pull {
	now := s.clk.Now().UTC()
	n := s.next // pull requests and issues share their numbers
	s.next++
	s.nextID++
	p := &pull{number: n, id: s.nextID, title: title, body: body, head: head, base: base, state: "open",
		created: now, updated: now, author: author}
	s.pulls[n] = p
	s.look(p)
	return p
}

// ClosePull closes a pull request as a person would.
func (s *Server) ClosePull(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.mustPull(n)
	s.look(p)
	now := s.clk.Now().UTC()
	p.state, p.closed, p.updated, p.closedBy, p.closedFor = "closed", now, now, "octocat", p.headSHA
}

// Review submits a review of a pull request's current head, as a person
// would: state APPROVED, CHANGES_REQUESTED or COMMENTED.
func (s *Server) Review(n int, login, state, body string, comments ...ReviewComment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.mustPull(n)
	s.look(p)
	s.nextID++
	now := s.clk.Now().UTC()
	p.reviews = append(p.reviews, &review{id: s.nextID, login: login, state: state, body: body, commitID: p.headSHA,
		submitted: now, comments: slices.Clone(comments)})
	p.updated = now
}

// Pull returns pull request n's state.
func (s *Server) Pull(n int) PullState {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.mustPull(n)
	return PullState{Number: p.number, State: p.state, Merged: p.merged, Title: p.title, Body: p.body,
		Head: p.head, Base: p.base, HeadSHA: p.headSHA, MergeCommit: p.mergeSHA}
}

// Pulls returns every pull request's state, by number.
func (s *Server) Pulls() []PullState {
	s.mu.Lock()
	var ns []int
	for n := range s.pulls {
		ns = append(ns, n)
	}
	s.mu.Unlock()
	slices.Sort(ns)
	out := make([]PullState, 0, len(ns))
	for _, n := range ns {
		out = append(out, s.Pull(n))
	}
	return out
}

func (s *Server) mustPull(n int) *pull {
	p, ok := s.pulls[n]
	if !ok {
		panic(fmt.Sprintf("fakegithub: no pull request #%d", n))
	}
	return p
}

// routePulls routes /pulls..., /commits/{ref}/check-runs and
// /actions/jobs/{id}/logs.
func (s *Server) routePulls(r *http.Request, parts []string) (string, func() reply) {
	const base = "/repos/{owner}/{repo}/"
	get, post, patch, put := r.Method == http.MethodGet, r.Method == http.MethodPost, r.Method == http.MethodPatch, r.Method == http.MethodPut
	switch {
	case len(parts) == 1 && parts[0] == "pulls" && get:
		return base + "pulls", func() reply { return s.listPulls(r) }
	case len(parts) == 1 && parts[0] == "pulls" && post:
		return base + "pulls", func() reply { return s.createPull(r) }
	case len(parts) == 3 && parts[0] == "commits" && parts[2] == "check-runs" && get:
		return base + "commits/{ref}/check-runs", func() reply { return s.listCheckRuns(parts[1]) }
	case len(parts) == 4 && parts[0] == "actions" && parts[1] == "jobs" && parts[3] == "logs" && get:
		return base + "actions/jobs/{job_id}/logs", func() reply { return s.jobLogRedirect(parts[2]) }
	case len(parts) < 2 || parts[0] != "pulls":
		return r.URL.Path, nil
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil {
		return r.URL.Path, nil
	}
	with := func(f func(*pull) reply) func() reply {
		return func() reply {
			p, ok := s.pulls[n]
			if !ok {
				return reply{status: http.StatusNotFound, body: basicError("Not Found", docs+"/pulls/pulls#get-a-pull-request")}
			}
			s.look(p)
			return f(p)
		}
	}
	switch {
	case len(parts) == 2 && get:
		return base + "pulls/{pull_number}", with(func(p *pull) reply { return reply{status: 200, body: s.pullJSON(p, true)} })
	case len(parts) == 2 && patch:
		return base + "pulls/{pull_number}", with(func(p *pull) reply { return s.updatePull(r, p) })
	case len(parts) == 3 && parts[2] == "merge" && put:
		return base + "pulls/{pull_number}/merge", with(func(p *pull) reply { return s.mergePull(r, p) })
	case len(parts) == 3 && parts[2] == "reviews" && get:
		return base + "pulls/{pull_number}/reviews", with(func(p *pull) reply { return s.listReviews(r, p) })
	case len(parts) == 5 && parts[2] == "reviews" && parts[4] == "comments" && get:
		id, _ := strconv.ParseInt(parts[3], 10, 64)
		return base + "pulls/{pull_number}/reviews/{review_id}/comments", with(func(p *pull) reply { return s.reviewComments(p, id) })
	}
	return r.URL.Path, nil
}

func (s *Server) listPulls(r *http.Request) reply {
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	head := q.Get("head") // user:ref
	var ns []int
	for n, p := range s.pulls {
		s.look(p)
		if state != "all" && p.state != state {
			continue
		}
		if head != "" && head != s.cfg.Owner+":"+p.head {
			continue
		}
		if b := q.Get("base"); b != "" && b != p.base {
			continue
		}
		ns = append(ns, n)
	}
	slices.Sort(ns)
	if q.Get("direction") != "asc" {
		slices.Reverse(ns) // sort=created, desc by default
	}
	ns, h := page(s, r, ns)
	out := make([]any, 0, len(ns))
	for _, n := range ns {
		out = append(out, s.pullJSON(s.pulls[n], false))
	}
	return reply{status: 200, body: out, header: h}
}

func prError(code, field, msg string) reply {
	e := map[string]any{"resource": "PullRequest", "code": code}
	if field != "" {
		e["field"] = field
	}
	if msg != "" {
		e["message"] = msg
	}
	return reply{status: http.StatusUnprocessableEntity, body: map[string]any{"message": "Validation Failed",
		"documentation_url": docs + "/pulls/pulls#create-a-pull-request", "errors": []any{e}}}
}

func (s *Server) createPull(r *http.Request) reply {
	var in struct {
		Title, Head, Base, Body string
	}
	if !decode(r, &in) {
		return badJSON()
	}
	head := strings.TrimPrefix(in.Head, s.cfg.Owner+":")
	switch {
	case in.Title == "":
		return prError("missing_field", "title", "")
	case s.branchSHA(in.Base) == "":
		return prError("invalid", "base", "")
	case s.branchSHA(head) == "":
		return prError("invalid", "head", "")
	}
	for _, p := range s.pulls {
		if p.state == "open" && p.head == head && p.base == in.Base {
			return prError("custom", "", fmt.Sprintf("A pull request already exists for %s:%s.", s.cfg.Owner, head))
		}
	}
	if out, _ := s.git("rev-list", "--count", in.Base+".."+head); out == "0" {
		return prError("custom", "", fmt.Sprintf("No commits between %s and %s", in.Base, head))
	}
	p := s.newPull(in.Title, in.Body, head, in.Base, s.cfg.Login)
	return reply{status: http.StatusCreated, body: s.pullJSON(p, true)}
}

func (s *Server) updatePull(r *http.Request, p *pull) reply {
	var in struct {
		Title, Body, State *string
	}
	if !decode(r, &in) {
		return badJSON()
	}
	now := s.clk.Now().UTC()
	if in.State != nil && *in.State != p.state {
		switch {
		case p.merged:
			return prError("custom", "state", "state cannot be changed. The pull request has already been merged.")
		case *in.State == "open" && s.branchSHA(p.head) != p.closedFor:
			return prError("custom", "state", "state cannot be changed. The "+p.head+" branch has been force-pushed or recreated.")
		case *in.State == "open":
			p.state, p.closed = "open", time.Time{}
		case *in.State == "closed":
			p.state, p.closed, p.closedBy, p.closedFor = "closed", now, s.cfg.Login, p.headSHA
		default:
			return prError("invalid", "state", "")
		}
	}
	if in.Title != nil {
		p.title = *in.Title
	}
	if in.Body != nil {
		p.body = *in.Body
	}
	p.updated = now
	s.look(p)
	return reply{status: 200, body: s.pullJSON(p, true)}
}

// mergeable computes whether head merges onto base cleanly; the first
// reads after the head changed answer null, as GitHub does while it
// computes it.
func (s *Server) mergeable(p *pull) any {
	if p.state != "open" {
		return nil
	}
	if p.unsettled > 0 {
		p.unsettled--
		return nil
	}
	_, err := s.git("merge-tree", "--write-tree", "refs/heads/"+p.base, p.headSHA)
	return err == nil
}

func notMergeable(msg string) reply {
	return reply{status: http.StatusMethodNotAllowed, body: basicError(msg, docs+"/pulls/pulls#merge-a-pull-request")}
}

func (s *Server) mergePull(r *http.Request, p *pull) reply {
	var in struct {
		CommitTitle   string `json:"commit_title"`
		CommitMessage string `json:"commit_message"`
		SHA           string `json:"sha"`
		MergeMethod   string `json:"merge_method"`
	}
	if !decode(r, &in) {
		return badJSON()
	}
	if in.MergeMethod == "" {
		in.MergeMethod = "merge"
	}
	if !slices.Contains(s.cfg.MergeMethods, in.MergeMethod) {
		return notMergeable(map[string]string{"merge": "Merge commits", "squash": "Squash merges", "rebase": "Rebase merges"}[in.MergeMethod] +
			" are not allowed on this repository.")
	}
	if p.state != "open" {
		return notMergeable("Pull Request is not mergeable")
	}
	if in.SHA != "" && in.SHA != p.headSHA {
		return reply{status: http.StatusConflict, body: basicError("Head branch was modified. Review and try the merge again.", docs+"/pulls/pulls#merge-a-pull-request")}
	}
	baseSHA := s.branchSHA(p.base)
	tree, err := s.git("merge-tree", "--write-tree", baseSHA, p.headSHA)
	if err != nil {
		return notMergeable("Pull Request is not mergeable")
	}
	tree, _, _ = strings.Cut(tree, "\n")
	title, msg := in.CommitTitle, in.CommitMessage
	var args []string
	switch in.MergeMethod {
	case "squash":
		if title == "" {
			title = fmt.Sprintf("%s (#%d)", p.title, p.number)
		}
		args = []string{"commit-tree", tree, "-p", baseSHA}
	case "merge":
		if title == "" {
			title = fmt.Sprintf("Merge pull request #%d from %s/%s", p.number, s.cfg.Owner, p.head)
		}
		args = []string{"commit-tree", tree, "-p", baseSHA, "-p", p.headSHA}
	case "rebase":
		// Replaying is not modelled: a head that descends from the base
		// fast-forwards it, as a rebase of it would.
		if _, err := s.git("merge-base", "--is-ancestor", baseSHA, p.headSHA); err != nil {
			return notMergeable("This branch can't be rebased")
		}
	}
	sha := p.headSHA
	if args != nil {
		full := title
		if msg != "" {
			full += "\n\n" + msg
		}
		g := gitexec.Runner{Env: []string{"GIT_AUTHOR_NAME=" + s.cfg.Login, "GIT_AUTHOR_EMAIL=" + s.cfg.Login + "@users.noreply.github.com",
			"GIT_COMMITTER_NAME=GitHub", "GIT_COMMITTER_EMAIL=noreply@github.com"}}
		out, err := g.Run(context.Background(), s.cfg.GitDir, append(args, "-m", full)...)
		if err != nil {
			return reply{status: http.StatusInternalServerError, body: basicError(err.Error(), docs)}
		}
		sha = strings.TrimSpace(out)
	}
	if _, err := s.git("update-ref", "refs/heads/"+p.base, sha, baseSHA); err != nil {
		return reply{status: http.StatusConflict, body: basicError("Base branch was modified. Review and try the merge again.", docs)}
	}
	now := s.clk.Now().UTC()
	p.state, p.merged, p.mergeSHA, p.mergedBy, p.mergedAt, p.closed, p.updated = "closed", true, sha, s.cfg.Login, now, now, now
	return reply{status: 200, body: map[string]any{"sha": sha, "merged": true, "message": "Pull Request successfully merged"}}
}
