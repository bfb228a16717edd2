package ghland

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/ghclient"
	"github.com/agentforeman/foreman/pipeline"
)

// TokenEnv is the environment variable the reference binary takes the
// token from (the same as ghsource's).
const TokenEnv = "GITHUB_TOKEN"

// ErrInvalidConfig is matched by a bad Config.
var ErrInvalidConfig = errors.New("ghland: invalid config")

// MethodWait leaves the merge to the repository (a merge queue, auto-merge,
// a person) and waits for the pull request to be merged.
const MethodWait = "wait"

// Config configures a Lander.
type Config struct {
	// Owner and Repo name the GitHub repository. Required.
	Owner, Repo string
	// Token authenticates the REST calls and the push over https (a
	// token with contents and pull requests read and write, checks and
	// actions read); without it, HTTPClient must carry the credentials.
	// Required.
	Token string
	// BaseURL is the REST API's URL. Default: https://api.github.com/.
	BaseURL string
	// HTTPClient sends the requests (its Transport under the Lander's
	// own). Default: http.DefaultTransport, with Token as a bearer token.
	HTTPClient *http.Client
	// Remote is where the story branches are pushed: a git URL or path
	// (with BaseURL on another host than GitHub's, set it). Default:
	// https://github.com/OWNER/REPO.git.
	Remote string
	// Base is the branch the pull requests merge into. Default: "main".
	Base string
	// BranchPrefix names the pushed branches <BranchPrefix>/<story>.
	// Default: "foreman".
	BranchPrefix string
	// Worktree returns a story's worktree (team.Team.Worktree): its
	// commits are pushed, what its agent left uncommitted is committed
	// first. Required.
	Worktree func(foreman.ItemID) (string, error)
	// Describe returns the story's part of a pull request's body (the
	// story and its gate results). Default: the story's title.
	Describe func(ctx context.Context, item foreman.ItemID, title string) (string, error)
	// StateDir holds the Lander's record of each story (its pull
	// request's number, written before the Lander acts on it). Required.
	StateDir string
	// Interval is how often an open pull request is looked at: one
	// conditional request per interval while it waits. Default: 30 s.
	Interval time.Duration
	// Method merges a pull request whose checks passed: "squash",
	// "merge", "rebase", or MethodWait (a merge queue or auto-merge
	// merges it). Default: the first of squash, merge and rebase the
	// repository allows.
	Method string
	// RequiredChecks name the check runs that must pass. Default: every
	// check run on the pull request's head (none: merged once mergeable).
	RequiredChecks []string
	// Outcome is the outcome a failing check or a review requesting
	// changes reports to the flow (EventLandRejected). Default:
	// pipeline.Fail (the story flow's quality gate failing).
	Outcome pipeline.Outcome
	// LogTail is how many last lines of a failing check's log go into the
	// feedback. Default: 40.
	LogTail int
	// LocalRepo is the local repository whose Base branch is brought up
	// to a merged pull request (fetched from Remote and fast-forwarded),
	// so that the stories after it start from it. Default: none (the
	// local Base is left alone).
	LocalRepo string
	// Protected are repository-relative paths no landed change may touch
	// (the team's state directory, the worktrees' root): a story whose
	// branch adds, changes or deletes anything at or under one is refused
	// (it pauses) before anything is pushed. Names are compared ignoring
	// case. Default: none.
	Protected []string
	// Git is the git program. Default: "git" on the PATH.
	Git string
	// GitEnv is added to git's environment. Default: none (the process's
	// environment).
	GitEnv []string
	// WriteGap is the least time between two writes, as GitHub asks of
	// integrations. Default: 1 s; negative: none.
	WriteGap time.Duration
	// MaxTries bounds the tries of one request a rate limit answers.
	// Default: 6.
	MaxTries int
	// Clock times the polls and rate-limit waits. Default: the wall clock.
	Clock foreman.Clock
	// Logger receives what the Lander notices. Default: discarded.
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return c, fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	if c.Owner == "" || c.Repo == "" || strings.ContainsAny(c.Owner+c.Repo, "/ ") {
		return bad("Owner and Repo must name a repository (got %q/%q)", c.Owner, c.Repo)
	}
	if c.Token == "" && c.HTTPClient == nil {
		return bad("Token is required (set %s)", TokenEnv)
	}
	if c.BaseURL == "" {
		c.BaseURL = "https://api.github.com/"
	}
	base, err := ghclient.CheckBaseURL(c.BaseURL, c.Token != "")
	if err != nil {
		return bad("%v", err)
	}
	c.BaseURL = base
	if c.Remote == "" {
		c.Remote = "https://github.com/" + c.Owner + "/" + c.Repo + ".git"
	}
	if c.Base == "" {
		c.Base = "main"
	}
	if c.BranchPrefix == "" {
		c.BranchPrefix = "foreman"
	}
	if c.Worktree == nil {
		return bad("Worktree is required (team.Team.Worktree)")
	}
	if c.StateDir == "" {
		return bad("StateDir is required")
	}
	if c.Interval <= 0 {
		c.Interval = 30 * time.Second
	}
	switch c.Method {
	case "", "squash", "merge", "rebase", MethodWait:
	default:
		return bad("Method %q: squash, merge, rebase or %s", c.Method, MethodWait)
	}
	if c.Outcome == "" {
		c.Outcome = pipeline.Fail
	}
	if c.LogTail <= 0 {
		c.LogTail = 40
	}
	if c.WriteGap == 0 {
		c.WriteGap = time.Second
	}
	if c.Clock == nil {
		c.Clock = foreman.RealClock()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}
