package fakegithub

import (
	"fmt"
	"slices"
)

// The JSON shapes of the REST description's "full-repository",
// "pull-request", "pull-request-simple", "check-run" and
// "pull-request-review" examples, filled from the server's state.

func (s *Server) repoJSON() map[string]any {
	allow := func(m string) bool { return slices.Contains(s.cfg.MergeMethods, m) }
	return map[string]any{
		"id": 1296269, "node_id": "MDEwOlJlcG9zaXRvcnkxMjk2MjY5", "name": s.cfg.Repo, "full_name": s.cfg.Owner + "/" + s.cfg.Repo,
		"owner": s.user(s.cfg.Owner), "private": false, "html_url": s.html(), "description": "This your first repo!",
		"fork": false, "url": s.api(), "default_branch": "main", "visibility": "public",
		"allow_merge_commit": allow("merge"), "allow_squash_merge": allow("squash"), "allow_rebase_merge": allow("rebase"),
		"allow_auto_merge": false, "delete_branch_on_merge": false, "has_issues": true,
		"permissions": map[string]any{"admin": false, "push": true, "pull": true},
	}
}

func (s *Server) branchJSON(name, sha string) map[string]any {
	return map[string]any{"label": s.cfg.Owner + ":" + name, "ref": name, "sha": sha, "user": s.user(s.cfg.Owner),
		"repo": map[string]any{"id": 1296269, "name": s.cfg.Repo, "full_name": s.cfg.Owner + "/" + s.cfg.Repo, "url": s.api()}}
}

// pullJSON is a pull request; full adds what only the single pull
// request's answer has (mergeable and its kin, merged, counts).
func (s *Server) pullJSON(p *pull, full bool) map[string]any {
	u := fmt.Sprintf("%s/pulls/%d", s.api(), p.number)
	html := fmt.Sprintf("%s/pull/%d", s.html(), p.number)
	var mergeSHA any
	if p.mergeSHA != "" {
		mergeSHA = p.mergeSHA
	}
	out := map[string]any{
		"url": u, "id": p.id, "node_id": "MDExOlB1bGxSZXF1ZXN0MQ==", "html_url": html, "diff_url": html + ".diff",
		"patch_url": html + ".patch", "issue_url": fmt.Sprintf("%s/issues/%d", s.api(), p.number), "number": p.number,
		"state": p.state, "locked": false, "title": p.title, "user": s.user(p.author), "body": nullable(p.body),
		"labels": []any{}, "milestone": nil, "active_lock_reason": nil, "created_at": stamp(p.created),
		"updated_at": stamp(p.updated), "closed_at": timeOrNull(p.closed), "merged_at": timeOrNull(p.mergedAt),
		"merge_commit_sha": mergeSHA, "assignee": nil, "assignees": []any{}, "requested_reviewers": []any{},
		"requested_teams": []any{}, "head": s.branchJSON(p.head, p.headSHA), "base": s.branchJSON(p.base, s.branchSHA(p.base)),
		"author_association": "COLLABORATOR", "auto_merge": nil, "draft": false,
		"commits_url": u + "/commits", "review_comments_url": u + "/comments", "statuses_url": fmt.Sprintf("%s/statuses/%s", s.api(), p.headSHA),
	}
	if !full {
		return out
	}
	m := s.mergeable(p)
	state := "unknown"
	switch m {
	case true:
		state = "clean"
	case false:
		state = "dirty"
	}
	var mergedBy any
	if p.merged {
		mergedBy = s.user(p.mergedBy)
	}
	out["merged"], out["mergeable"], out["rebaseable"], out["mergeable_state"] = p.merged, m, m, state
	out["merged_by"], out["comments"], out["review_comments"], out["maintainer_can_modify"] = mergedBy, 0, 0, false
	out["commits"], out["additions"], out["deletions"], out["changed_files"] = 1, 0, 0, 0
	return out
}

func (s *Server) checkRunJSON(r *checkRun) map[string]any {
	status, conclusion := "queued", any(nil)
	var title, summary any
	switch {
	case r.result != nil:
		status, conclusion = "completed", r.result.Conclusion
		title, summary = nullable(r.result.Title), nullable(r.result.Summary)
	case r.reads > 0:
		status = "in_progress"
	}
	return map[string]any{
		"id": r.id, "head_sha": r.sha, "node_id": "MDg6Q2hlY2tSdW40", "external_id": "", "name": r.name,
		"url":         fmt.Sprintf("%s/check-runs/%d", s.api(), r.id),
		"html_url":    fmt.Sprintf("%s/actions/runs/1/job/%d", s.html(), r.id),
		"details_url": fmt.Sprintf("%s/actions/runs/1/job/%d", s.html(), r.id),
		"status":      status, "conclusion": conclusion, "started_at": timeOrNull(r.started), "completed_at": timeOrNull(r.completed),
		"output": map[string]any{"title": title, "summary": summary, "text": nil, "annotations_count": 0,
			"annotations_url": fmt.Sprintf("%s/check-runs/%d/annotations", s.api(), r.id)},
		"check_suite":   map[string]any{"id": 5},
		"app":           map[string]any{"id": 15368, "slug": "github-actions", "name": "GitHub Actions"},
		"pull_requests": []any{},
	}
}

func (s *Server) reviewJSON(p *pull, rv *review) map[string]any {
	return map[string]any{
		"id": rv.id, "node_id": "MDE3OlB1bGxSZXF1ZXN0UmV2aWV3ODA=", "user": s.user(rv.login), "body": rv.body,
		"state": rv.state, "commit_id": rv.commitID, "submitted_at": stamp(rv.submitted),
		"html_url":         fmt.Sprintf("%s/pull/%d#pullrequestreview-%d", s.html(), p.number, rv.id),
		"pull_request_url": fmt.Sprintf("%s/pulls/%d", s.api(), p.number), "author_association": "COLLABORATOR",
	}
}
