package fakegithub

import (
	"fmt"
	"net/url"
	"time"
)

// The JSON shapes of GitHub's REST description's examples ("issue",
// "issue-comment", "label", "simple-user", "basic-error",
// "validation-error"), filled from the server's state.

func (s *Server) api() string {
	return fmt.Sprintf("%s/repos/%s/%s", s.URL, s.cfg.Owner, s.cfg.Repo)
}

func (s *Server) html() string {
	return fmt.Sprintf("https://github.com/%s/%s", s.cfg.Owner, s.cfg.Repo)
}

func (s *Server) user(login string) map[string]any {
	u := s.URL + "/users/" + login
	return map[string]any{
		"login": login, "id": len(login), "node_id": "MDQ6VXNlcjE=", "avatar_url": "https://github.com/images/error/octocat_happy.gif",
		"gravatar_id": "", "url": u, "html_url": "https://github.com/" + login,
		"followers_url": u + "/followers", "following_url": u + "/following{/other_user}",
		"gists_url": u + "/gists{/gist_id}", "starred_url": u + "/starred{/owner}{/repo}",
		"subscriptions_url": u + "/subscriptions", "organizations_url": u + "/orgs", "repos_url": u + "/repos",
		"events_url": u + "/events{/privacy}", "received_events_url": u + "/received_events",
		"type": "User", "site_admin": false,
	}
}

func (s *Server) label(name string) map[string]any {
	l := s.labels[name]
	return map[string]any{
		"id": l.id, "node_id": "MDU6TGFiZWwyMDgwNDU5NDY=", "url": s.api() + "/labels/" + url.PathEscape(name),
		"name": l.name, "description": nullable(l.descr), "color": l.color, "default": false,
	}
}

func (s *Server) issueJSON(is *issue) map[string]any {
	u := fmt.Sprintf("%s/issues/%d", s.api(), is.number)
	labels := make([]any, 0, len(is.labels))
	for _, n := range is.labels {
		labels = append(labels, s.label(n))
	}
	var closedBy any
	if is.closedBy != "" {
		closedBy = s.user(is.closedBy)
	}
	var reason any
	if is.reason != "" {
		reason = is.reason
	}
	return map[string]any{
		"id": is.id, "node_id": "MDU6SXNzdWUx", "url": u, "repository_url": s.api(),
		"labels_url": u + "/labels{/name}", "comments_url": u + "/comments", "events_url": u + "/events",
		"html_url": fmt.Sprintf("%s/issues/%d", s.html(), is.number), "number": is.number,
		"state": is.state, "title": is.title, "body": nullable(is.body), "user": s.user(is.author),
		"labels": labels, "assignee": nil, "assignees": []any{}, "milestone": nil, "locked": false,
		"active_lock_reason": nil, "comments": len(is.comments), "closed_at": timeOrNull(is.closed),
		"created_at": stamp(is.created), "updated_at": stamp(is.updated), "closed_by": closedBy,
		"author_association": "COLLABORATOR", "state_reason": reason,
	}
}

func (s *Server) commentJSON(is *issue, c *comment) map[string]any {
	return map[string]any{
		"id": c.id, "node_id": "MDEyOklzc3VlQ29tbWVudDE=", "url": fmt.Sprintf("%s/issues/comments/%d", s.api(), c.id),
		"html_url": fmt.Sprintf("%s/issues/%d#issuecomment-%d", s.html(), is.number, c.id),
		"body":     c.body, "user": s.user(c.author),
		"created_at": stamp(c.created), "updated_at": stamp(c.updated),
		"issue_url": fmt.Sprintf("%s/issues/%d", s.api(), is.number), "author_association": "COLLABORATOR",
	}
}

const docs = "https://docs.github.com/rest"

func basicError(msg, doc string) map[string]any {
	return map[string]any{"message": msg, "documentation_url": doc}
}

func validationError(resource, field, code, doc string) map[string]any {
	return map[string]any{"message": "Validation Failed", "documentation_url": doc,
		"errors": []any{map[string]any{"resource": resource, "field": field, "code": code}}}
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func timeOrNull(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return stamp(t)
}
