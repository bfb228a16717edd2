// Package fakegithub is a fake of GitHub's REST API for tests: an
// httptest server holding one repository's issues, comments and labels,
// answering the endpoints Foreman's GitHub code uses with GitHub's
// documented semantics, driven by go-github as the client.
//
// Its responses follow GitHub's published REST description
// (github/rest-api-description, the 2022-11-28 version): an issue has the
// fields of its "issue" example (id, node_id, url, repository_url,
// labels_url, comments_url, events_url, html_url, number, state, title,
// body, user, labels, assignee, assignees, milestone, locked,
// active_lock_reason, comments, closed_at, created_at, updated_at,
// closed_by, author_association, state_reason), a comment those of
// "issue-comment", a label those of "label"; errors are GitHub's
// basic-error and validation-error bodies ({"message", "errors",
// "documentation_url"}).
//
// The semantics it keeps:
//
//   - Every GET answers with an ETag (weak, W/"<hash of the body>"); a
//     request whose If-None-Match names the current one gets 304 Not
//     Modified with no body, and, as GitHub documents for an authorized
//     conditional request, it costs no rate limit.
//   - Every response carries x-ratelimit-limit, -remaining, -used,
//     -reset (epoch seconds) and -resource ("core"). Once the hour's
//     budget is spent, a request gets 403 with x-ratelimit-remaining 0
//     and GitHub's "API rate limit exceeded" message until the reset,
//     read on the server's clock. Throttle makes the next requests
//     answer 403 or 429 with Retry-After and the secondary rate limit's
//     message and documentation URL.
//   - Creating a label that exists is 422 with the error code
//     already_exists; a comment without a body is 422 (missing_field).
//   - Adding labels to an issue creates the ones the repository lacks;
//     removing a label the issue does not have is 404.
//   - Lists are paginated (per_page up to 100, page) with a Link header.
//   - With Config.Token set, a request without "Authorization: Bearer
//     <token>" (or "token <token>") gets 401 Bad credentials.
//
// Pull requests, on the branches of a real bare repository (Config.GitDir,
// which the code under test pushes to with git), follow the description's
// "pull-request", "pull-request-simple", "check-run",
// "pull-request-review", "review-comment" and "full-repository" examples:
//
//   - Creating a second open pull request of the same head and base is 422
//     "A pull request already exists for owner:branch."; one whose head has
//     no commits beyond its base is 422 "No commits between ...".
//   - mergeable is null for the first Config.MergeableAfter reads after
//     the head moved (GitHub computes it in the background), then true
//     or false as `git merge-tree` finds it (mergeable_state clean or
//     dirty); the list's entries do not carry it.
//   - Every commit a pull request's head points at gets a check run per
//     Config.Checks; each read of the commit's check runs moves them one
//     step, queued, in_progress, completed (Config.CheckReads), and
//     Config.CI decides the conclusion, output and log. An Actions job's
//     log is a 302 to a signed URL that needs no token.
//   - Merging (squash, merge, or rebase as a fast-forward; only the
//     Config.MergeMethods the repository allows, else 405) writes the
//     commit into the bare repository; a sha that is not the head is 409;
//     a pull request that is closed, merged or conflicting is 405.
//   - Reopening a pull request whose branch moved since it was closed is
//     422, as GitHub refuses it.
//   - Pull requests and issues share their numbers, as on GitHub; the
//     issues list does not include pull requests here.
//
// Tests change the repository as a person would (CreateIssue, SetLabels,
// CloseIssue, ClosePull, Review, ...) and read what the code did (Issue,
// Pull, Pulls, Stats); Config.BeforeAnswer lets a test kill its client
// between a change and its answer.
package fakegithub
