package main

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/ghland"
	"github.com/agentforeman/foreman/pipeline/team/ghsource"
)

// landUsage documents -land.
const landUsage = `how a story that passed lands: "local" (the default: squash-merged onto -repo's main) or
pr[:OWNER/REPO][?remote=URL&base=main&method=squash|merge|rebase|wait&interval=30s]: pushed and landed
through one GitHub pull request per story, merged once its checks pass (a failing check's log or a
review requesting changes goes back to the builder; method=wait leaves the merge to a merge queue or
auto-merge). The repository is -source's unless named; the token is $GITHUB_TOKEN (no agent or gate
gets it), the API -github-api, the remote https://github.com/OWNER/REPO.git unless remote= says`

// landSpec is -land pr's parsed spec.
type landSpec struct {
	owner, repo, remote, base, method string
	interval                          time.Duration
}

// parseLand reads -land; ok is false for the local default.
func parseLand(o options) (spec landSpec, ok bool, err error) {
	if o.land == "" || o.land == "local" {
		return spec, false, nil
	}
	rest, found := strings.CutPrefix(o.land, "pr")
	if !found || (rest != "" && rest[0] != ':' && rest[0] != '?') {
		return spec, false, fmt.Errorf("-land %q: local or pr[:OWNER/REPO][?remote=...]", o.land)
	}
	path, query, _ := strings.Cut(rest, "?")
	if path = strings.TrimPrefix(path, ":"); path != "" {
		spec.owner, spec.repo, _ = strings.Cut(path, "/")
	} else if o.source != "" {
		src, err := ghsource.ParseSpec(o.source)
		if err != nil {
			return spec, false, err
		}
		spec.owner, spec.repo = src.Owner, src.Repo
	}
	if spec.owner == "" || spec.repo == "" {
		return spec, false, fmt.Errorf("-land %q: name the repository (pr:OWNER/REPO) or take the stories from -source github:OWNER/REPO", o.land)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return spec, false, fmt.Errorf("-land %q: %v", o.land, err)
	}
	for k := range q {
		switch k {
		case "remote", "base", "method", "interval":
		default:
			return spec, false, fmt.Errorf("-land %q: unknown parameter %q (remote, base, method, interval)", o.land, k)
		}
	}
	spec.remote, spec.base, spec.method = q.Get("remote"), q.Get("base"), q.Get("method")
	if iv := q.Get("interval"); iv != "" {
		if spec.interval, err = time.ParseDuration(iv); err != nil || spec.interval <= 0 {
			return spec, false, fmt.Errorf("-land %q: interval %q is not a duration", o.land, iv)
		}
	}
	return spec, true, nil
}

// teamRef is the team a lander describes its stories from, set once the
// team is open.
type teamRef struct{ tm *team.Team }

// newLander makes -land pr's lander for cfg's repository (nil for the
// local default). Its records live in the team's state directory.
func newLander(o options, token string, cfg team.Config, ref *teamRef) (*ghland.Lander, error) {
	spec, ok, err := parseLand(o)
	if err != nil || !ok {
		return nil, err
	}
	if o.role != "" {
		return nil, fmt.Errorf("-land pr runs on one host (no -role)")
	}
	return ghland.New(ghland.Config{Owner: spec.owner, Repo: spec.repo, Token: token, BaseURL: o.githubAPI,
		Remote: spec.remote, Base: spec.base, Method: spec.method, Interval: spec.interval,
		StateDir: filepath.Join(cfg.Repo, team.StateDirName, "land"), LocalRepo: cfg.Repo,
		// What the local merge protects (merge.Config.Protected): the
		// team's state and the story worktrees' root.
		Protected: []string{team.StateDirName, ".worktrees"},
		Worktree:  func(id foreman.ItemID) (string, error) { return ref.tm.Worktree(id) },
		Describe: func(ctx context.Context, id foreman.ItemID, title string) (string, error) {
			return describe(ctx, ref.tm, id, title)
		},
		Logger: cfg.Logger})
}

// describe is a pull request's story part: the story, and where its flow
// stands (the quality gate's result) with the gates it passed.
func describe(ctx context.Context, tm *team.Team, id foreman.ItemID, title string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", title)
	for _, s := range tm.Stories() {
		if s.ID == id && strings.TrimSpace(s.Body) != "" {
			b.WriteString(strings.TrimSpace(s.Body) + "\n\n")
		}
	}
	st, err := tm.StatusOf(ctx, id)
	if err != nil {
		return "", err
	}
	if st.Last != "" {
		fmt.Fprintf(&b, "Gate results: %s", st.Last)
	}
	return b.String(), nil
}
