package fakegithub

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"

	"github.com/agentforeman/foreman/internal/clock"
)

// Config configures a Server. Every field is optional.
type Config struct {
	// Owner and Repo name the repository. Default octocat/Hello-World, as
	// in GitHub's examples.
	Owner, Repo string
	// Token, when set, is the only credential accepted.
	Token string
	// Login is the authenticated user's login, the author of what the
	// client writes. Default "foreman-bot".
	Login string
	// RateLimit is the requests per hour. Default 5000 (a personal
	// access token's).
	RateLimit int
	// Clock dates issues and comments and times the rate limit's reset.
	// Default: the wall clock.
	Clock clock.Clock

	// GitDir is the repository's git directory (a bare repository the
	// code under test pushes to): pull requests' heads and bases are its
	// branches, and a merge writes its commit there. Required for pull
	// requests.
	GitDir string
	// Checks names the check runs the repository's CI makes for every
	// commit a pull request's head points at; CI decides how each ends.
	// A check run is queued when first seen, in progress at the next read
	// of its commit's check runs, and completed at the one after
	// (CheckReads changes how many reads that takes).
	Checks     []string
	CI         func(check, sha string) CheckResult
	CheckReads int
	// MergeableAfter is how many reads of a pull request after its head
	// changed answer mergeable null (GitHub computes it in the
	// background). Default 1.
	MergeableAfter int
	// BeforeAnswer, when set, is called with each request's method,
	// route and status after the server made its change and before the
	// answer is sent (a test kills its client there: the change is made,
	// the client never learns of it). The server is locked meanwhile.
	BeforeAnswer func(method, route string, status int)
	// MergeMethods are the merge methods the repository allows
	// ("merge", "squash", "rebase"). Default all three.
	MergeMethods []string
}

// CheckResult is how a check run ends: its conclusion ("success",
// "failure", ...), its output's title and summary, and its log (served
// as a GitHub Actions job's log).
type CheckResult struct {
	Conclusion     string
	Title, Summary string
	Log            string
}

// Server is a fake GitHub REST API on 127.0.0.1.
type Server struct {
	*httptest.Server
	cfg Config
	clk clock.Clock

	mu        sync.Mutex
	issues    map[int]*issue
	next      int
	nextID    int64
	labels    map[string]*label
	remaining int
	reset     time.Time
	throttle  []throttle
	stats     Stats
	pulls     map[int]*pull
	runs      []*checkRun
}

// Stats counts the requests the server answered.
type Stats struct {
	// Requests counts every request; NotModified the 304s among them;
	// Limited the 403s and 429s of a rate limit, primary or secondary.
	Requests, NotModified, Limited int
	// ByRoute counts requests by "METHOD route", the route with its
	// placeholders ("GET /repos/{owner}/{repo}/issues").
	ByRoute map[string]int
	// Charged counts the requests that used the rate limit.
	Charged int
}

type throttle struct {
	status     int
	retryAfter time.Duration
}

type issue struct {
	number           int
	id               int64
	title, body      string
	state, reason    string
	labels           []string
	comments         []*comment
	created, updated time.Time
	closed           time.Time
	closedBy         string
	author           string
}

type comment struct {
	id               int64
	body, author     string
	created, updated time.Time
}

type label struct {
	id                 int64
	name, color, descr string
}

// New starts a Server; Close stops it.
func New(cfg Config) *Server {
	if cfg.Owner == "" {
		cfg.Owner = "octocat"
	}
	if cfg.Repo == "" {
		cfg.Repo = "Hello-World"
	}
	if cfg.Login == "" {
		cfg.Login = "foreman-bot"
	}
	if cfg.RateLimit <= 0 {
		cfg.RateLimit = 5000
	}
	if cfg.CheckReads <= 0 {
		cfg.CheckReads = 2
	}
	if cfg.MergeableAfter <= 0 {
		cfg.MergeableAfter = 1
	}
	if cfg.MergeMethods == nil {
		cfg.MergeMethods = []string{"merge", "squash", "rebase"}
	}
	s := &Server{cfg: cfg, clk: clock.OrReal(cfg.Clock), issues: map[int]*issue{}, next: 1, nextID: 1000,
		labels: map[string]*label{}, remaining: cfg.RateLimit, pulls: map[int]*pull{}}
	s.reset = s.clk.Now().Add(time.Hour).Truncate(time.Second)
	s.stats.ByRoute = map[string]int{}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// BaseURL is the API's base URL, with its trailing slash (go-github's
// Client.BaseURL).
func (s *Server) BaseURL() string { return s.URL + "/" }

// Owner and Repo name the repository.
func (s *Server) Owner() string { return s.cfg.Owner }

// Repo names the repository.
func (s *Server) Repo() string { return s.cfg.Repo }

// CreateIssue opens an issue by "octocat" and returns its number.
func (s *Server) CreateIssue(title, body string, labels ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newIssue(title, body, "octocat", labels)
}

func (s *Server) newIssue(title, body, author string, labels []string) int {
	now := s.clk.Now().UTC()
	n := s.next
	s.next++
	s.nextID++
	s.issues[n] = &issue{number: n, id: s.nextID, title: title, body: body, state: "open", created: now, updated: now, author: author}
	s.addLabels(s.issues[n], labels)
	return n
}

// SetLabels replaces an issue's labels, as a person would.
func (s *Server) SetLabels(n int, labels ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	is := s.mustIssue(n)
	is.labels = nil
	s.addLabels(is, labels)
	is.updated = s.clk.Now().UTC()
}

// SetBody replaces an issue's body, as a person would.
func (s *Server) SetBody(n int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	is := s.mustIssue(n)
	is.body = body
	is.updated = s.clk.Now().UTC()
}

// CloseIssue closes an issue as a person would (reason "completed" or
// "not_planned").
func (s *Server) CloseIssue(n int, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeIssue(s.mustIssue(n), reason, "octocat")
}

// DeleteIssue removes an issue (GitHub answers 410 Gone for one deleted).
func (s *Server) DeleteIssue(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustIssue(n).state = "deleted"
}

// IssueState is an issue as a test reads it.
type IssueState struct {
	State, StateReason string
	Labels             []string
	Comments           []string
}

// Issue returns issue n's state, labels and comment bodies.
func (s *Server) Issue(n int) IssueState {
	s.mu.Lock()
	defer s.mu.Unlock()
	is := s.mustIssue(n)
	st := IssueState{State: is.state, StateReason: is.reason, Labels: slices.Clone(is.labels)}
	for _, c := range is.comments {
		st.Comments = append(st.Comments, c.body)
	}
	return st
}

// Throttle makes the next n requests answer status (403 or 429) as
// GitHub's secondary rate limit does, with Retry-After retryAfter (none
// when 0).
func (s *Server) Throttle(n, status int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.throttle = append(s.throttle, throttle{status: status, retryAfter: retryAfter})
	}
}

// SetRateLimit sets what is left of the primary rate limit and when it
// resets.
func (s *Server) SetRateLimit(remaining int, reset time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remaining, s.reset = remaining, reset.Truncate(time.Second)
}

// Stats returns the request counts so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.ByRoute = make(map[string]int, len(s.stats.ByRoute))
	for k, v := range s.stats.ByRoute {
		st.ByRoute[k] = v
	}
	return st
}

func (s *Server) mustIssue(n int) *issue {
	is, ok := s.issues[n]
	if !ok {
		panic(fmt.Sprintf("fakegithub: no issue #%d", n))
	}
	return is
}

func (s *Server) closeIssue(is *issue, reason, by string) {
	if reason == "" {
		reason = "completed"
	}
	now := s.clk.Now().UTC()
	if is.state != "closed" {
		is.closed, is.closedBy = now, by
	}
	is.state, is.reason, is.updated = "closed", reason, now
}

// addLabels adds names to the issue, creating the repository's missing
// labels, as GitHub's "Add labels to an issue" does.
func (s *Server) addLabels(is *issue, names []string) {
	for _, n := range names {
		if _, ok := s.labels[n]; !ok {
			s.nextID++
			s.labels[n] = &label{id: s.nextID, name: n, color: "ededed"}
		}
		if !slices.Contains(is.labels, n) {
			is.labels = append(is.labels, n)
		}
	}
}
