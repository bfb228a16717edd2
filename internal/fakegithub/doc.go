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
// Tests change the repository as a person would (CreateIssue, SetLabels,
// CloseIssue, ...) and read what the code did (Issue, Comments, Stats).
package fakegithub
