package ghsource

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/ghclient"
)

// TokenEnv is the environment variable holding the token.
const TokenEnv = "GITHUB_TOKEN"

// ErrInvalidConfig is matched by a bad Config or source spec.
var ErrInvalidConfig = errors.New("ghsource: invalid config")

// Config configures a Source.
type Config struct {
	// Owner and Repo name the repository. Required.
	Owner, Repo string
	// Label marks the issues that are the team's stories. Default:
	// "foreman".
	Label string
	// Token authenticates to GitHub (a personal access token or an app's
	// installation token, with issues read and write); see TakeToken.
	// Default: none; required unless HTTPClient carries the credentials
	// (with neither, New fails with ErrInvalidConfig).
	Token string
	// BaseURL is the REST API's URL; GitHub Enterprise Server's is
	// https://HOST/api/v3/. Default: https://api.github.com/.
	BaseURL string
	// HTTPClient sends the requests (its Transport under the Source's
	// own). Default: http.DefaultTransport, with Token as a bearer token.
	HTTPClient *http.Client
	// IDPrefix makes a story's id from its issue's number: "issue-" makes
	// issue #12 the story issue-12. Default: "issue-".
	IDPrefix string
	// StateLabels prefixes the labels that say a story's state on its
	// issue: <prefix>working, <prefix>paused, <prefix>merged. Default:
	// Label + ":".
	StateLabels string
	// WriteGap is the least time between two writes (comments, labels,
	// closing), as GitHub asks of integrations to stay clear of its
	// secondary rate limits; negative: none. Default: 1 s.
	WriteGap time.Duration
	// MaxTries bounds the tries of one request that a rate limit
	// answers; each waits as GitHub says. Default: 6 (zero or negative:
	// the default).
	MaxTries int
	// Clock times rate-limit waits and write gaps. Default: the wall clock.
	Clock foreman.Clock
	// Logger receives what the Source notices (a story held back for an
	// open issue it is blocked by). Default: none (nil discards it).
	Logger *slog.Logger
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)

func (c Config) withDefaults() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return c, fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	if !nameRE.MatchString(c.Owner) || !nameRE.MatchString(c.Repo) {
		return bad("Owner and Repo must name a repository (got %q/%q)", c.Owner, c.Repo)
	}
	if c.Label == "" {
		c.Label = "foreman"
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
	if c.IDPrefix == "" {
		c.IDPrefix = "issue-"
	}
	if err := foreman.ItemID(c.IDPrefix + "1").Validate(); err != nil {
		return bad("IDPrefix %q: %v", c.IDPrefix, err)
	}
	if c.StateLabels == "" {
		c.StateLabels = c.Label + ":"
	}
	if c.WriteGap == 0 {
		c.WriteGap = time.Second
	}
	if c.MaxTries <= 0 {
		c.MaxTries = 6
	}
	return c, nil
}

// ParseSpec reads a source spec, "github:OWNER/REPO" with optional query
// parameters label (default foreman) and api (the REST API's base URL),
// into a Config without a token: "github:acme/app?label=foreman".
func ParseSpec(spec string) (Config, error) {
	rest, ok := strings.CutPrefix(spec, "github:")
	if !ok {
		return Config{}, fmt.Errorf("%w: source %q: want github:OWNER/REPO[?label=NAME]", ErrInvalidConfig, spec)
	}
	path, query, _ := strings.Cut(rest, "?")
	owner, repo, ok := strings.Cut(path, "/")
	if !ok || !nameRE.MatchString(owner) || !nameRE.MatchString(repo) {
		return Config{}, fmt.Errorf("%w: source %q: want github:OWNER/REPO", ErrInvalidConfig, spec)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return Config{}, fmt.Errorf("%w: source %q: %v", ErrInvalidConfig, spec, err)
	}
	cfg := Config{Owner: owner, Repo: repo, Label: q.Get("label"), BaseURL: q.Get("api")}
	for k := range q {
		if k != "label" && k != "api" {
			return Config{}, fmt.Errorf("%w: source %q: unknown parameter %q (label, api)", ErrInvalidConfig, spec, k)
		}
	}
	return cfg, nil
}

// TakeToken returns the token in $GITHUB_TOKEN and removes it from the
// process's environment, which every agent and gate command the team runs
// inherits: the token stays in the Source, in memory, and reaches no
// agent (phases/agentcmd also leaves it out of an agent's environment).
func TakeToken() string {
	tok := os.Getenv(TokenEnv)
	_ = os.Unsetenv(TokenEnv)
	return tok
}
