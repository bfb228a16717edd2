// Package ghsource makes a GitHub repository's issues a team's stories: a
// team.Source and team.Reporter on go-github.
//
//	src, err := ghsource.New(ghsource.Config{Owner: "acme", Repo: "app", Token: ghsource.TakeToken()})
//	f := t.Follow(src, team.FollowConfig{Interval: time.Minute})
//	_, err = f.Sync(ctx) // the labelled issues become stories
//	go f.Run(ctx)        // new issues join, withdrawn ones drop, states are written back
//	res, err := t.Run(ctx)
//
// # Issues as stories
//
// Every open issue carrying the label (Config.Label, "foreman" by
// default) is a story: id issue-<number>, its title and body, After the
// labelled issues it is blocked by: "blocked by #N" in its body, or an
// unchecked task list item "- [ ] #N". A blocker that is closed or does
// not exist is met; an issue blocked by an open issue without the label
// waits, unlisted, until that one closes or gets the label. Only people
// with triage rights on the repository can label an issue, so only they
// give the team work; a story's body still reaches its agents as data,
// not as the host's instructions. A story's definition is fixed once the
// team has it: a later edit of the issue is not taken.
//
// A story that has not started is dropped (team.Team.Drop, an
// EventStoryDropped) when its issue loses the label (its dependents stay
// blocked, as after an abandoned story) or is closed (they may start: a
// closed blocker is met on GitHub too). Once started, a story is the
// team's: removing the label does not stop it.
//
// # State written back
//
// Report comments on the issue when its story starts, pauses (with the
// cause and how to decide) and merges (with the commit), keeps one state
// label on it (<label>:working, <label>:paused, <label>:merged; GitHub
// creates a label it lacks) and closes it as completed on merge. Each
// comment ends with a hidden marker naming the story and the report's key
// (<!-- foreman:issue-12:started -->), and Report reads the issue's
// comments for it before posting: a report asked again (the host was
// killed between posting and recording it) posts nothing twice; a marker
// in a pause's quoted cause (an agent's output) is defused.
//
// # Requests and rate limits
//
// Every GET is conditional: the ETag of the last answer for the same URL
// goes in If-None-Match, and a 304 (which GitHub does not count against
// the rate limit) is answered from that answer. A poll is one request per
// hundred labelled issues, plus one per listed blocker or withdrawn story
// that is not in the list (conditional too). Rate limits are waited out
// on Config.Clock, not failed: after a response with
// x-ratelimit-remaining 0, nothing is sent before x-ratelimit-reset; a
// 403 or 429 of a rate limit is tried again after its Retry-After, or its
// reset, or (a secondary limit naming no time) a minute, doubling, up to
// Config.MaxTries; and two writes are at least Config.WriteGap (1 s)
// apart, as GitHub asks. Stats counts requests, 304s and waits.
//
// # The token
//
// The token (Config.Token, or TakeToken from $GITHUB_TOKEN) is sent by
// golang.org/x/oauth2 as a bearer token and kept nowhere else: TakeToken
// removes it from the process's environment, which agents and gate
// commands inherit, and phases/agentcmd leaves GITHUB_TOKEN and GH_TOKEN
// out of every agent's environment anyway. A plain-http BaseURL other
// than a loopback one is refused with a token.
//
// The fake GitHub the tests run against is internal/fakegithub.
package ghsource
