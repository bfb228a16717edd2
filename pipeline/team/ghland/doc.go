// Package ghland lands a team's stories through GitHub pull requests: a
// pipeline.Lander to set as team.Config.Merger in place of the local
// squash merge (which stays the default).
//
//	l, err := ghland.New(ghland.Config{Owner: "acme", Repo: "app", Token: ghsource.TakeToken(),
//		Worktree: func(id foreman.ItemID) (string, error) { return tm.Worktree(id) },
//		StateDir: ".foreman/land", LocalRepo: "."})
//	if err := l.Check(ctx); err != nil { ... } // before any agent works
//	cfg.Merger = l // team.New(ctx, cfg); the team runs l.Watch during every Run
//
// New sends nothing; Check reads the repository once (one GET), so that a
// run whose stories could never land (no network, a wrong host, token or
// repository, a Config.Method the repository does not allow) fails at its
// start with the cause (ErrRepository), not after a story was planned,
// built and gated. It also reads the merge method Watch will use.
//
// # Landing a story
//
// When a story passes its flow, Merge commits what its agent left
// uncommitted, pushes the story's worktree to <BranchPrefix>/<story> on
// Config.Remote with real git (forced: the branch is the team's), and
// opens ONE pull request into Config.Base: the story's title, a body
// with the story (Config.Describe: the story and its gate results) and
// the trailer "Foreman-Item: <story>". It answers at once; the story
// stays merging while the pull request waits, and no caller waits for a
// check. Watch looks at every open pull request each Config.Interval with
// one conditional request (a 304 costs no rate limit): the head's check
// runs, and every third look the pull request (closed? merged by a
// queue? mergeable?) and, when it changed, its reviews. Once the checks
// (Config.RequiredChecks, or all of them) have completed:
//
//   - a failing check goes back to the build stage as feedback (its name,
//     conclusion, output and the last Config.LogTail lines of its log):
//     pipeline.EventLandRejected, which takes one of the flow's quality
//     cycles; the builder's fix is pushed to the same pull request;
//   - a review requesting changes on the head does the same with the
//     review's body and its comments;
//   - otherwise, once GitHub has computed that it merges cleanly, it is
//     merged with Config.Method (default the first of squash, merge and
//     rebase the repository allows; the merge commit carries the
//     trailer), and the story is DONE with the merge commit. With
//     MethodWait the Lander leaves the merge to a merge queue or
//     auto-merge and waits for it. Config.LocalRepo's Base is then
//     fast-forwarded to the remote's, so that the stories after it start
//     from the merge.
//
// A pull request a person closes without merging pauses the story with
// that cause (pipeline.EventMergeFailed); when a person resumes the
// story, its pull request is reopened (or, when GitHub refuses, a new one
// opened).
//
// # Exactly once
//
// The Lander keeps a record per story in Config.StateDir, written whole
// and synced: the pull request's number, recorded as soon as it exists
// and before anything is done with it, and the intent to merge, recorded
// before the merge is asked for. A host killed between the pull request's
// creation and its record finds it again by its branch and trailer (and
// GitHub refuses a second pull request for the same branch with 422); one
// killed between the merge and its record finds the pull request merged
// and reports the merge commit; a report the story had already taken is
// refused by the pipeline and counts as made. No story gets a second pull
// request or a second merge.
//
// # Requests, rate limits and the token
//
// The REST client is go-github over internal/ghclient, the transport
// ghsource uses too: conditional GETs, GitHub's primary and secondary
// rate limits waited out on Config.Clock, a gap between writes. Stats
// counts the requests. The token goes to the API as a bearer token and to
// git's push over https through that git process's own environment
// (GIT_CONFIG_* naming an http.extraHeader): never in an argument, never
// in an agent's environment (ghsource.TakeToken removes it from the
// process's).
package ghland
