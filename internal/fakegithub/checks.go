package fakegithub

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Check runs, their logs, and reviews.

// listCheckRuns answers a commit's check runs, each moving one step
// (queued, in_progress, completed) per read.
func (s *Server) listCheckRuns(ref string) reply {
	sha, err := s.git("rev-parse", "--verify", "-q", ref+"^{commit}")
	if err != nil {
		return reply{status: http.StatusNotFound, body: basicError("No commit found for SHA: "+ref, docs+"/checks/runs#list-check-runs-for-a-git-reference")}
	}
	runs := s.runsFor(sha)
	out := make([]any, 0, len(runs))
	now := s.clk.Now().UTC()
	for _, r := range runs {
		if r.reads == 1 {
			r.started = now
		}
		if r.reads >= s.cfg.CheckReads && r.result == nil {
			res := CheckResult{Conclusion: "success"}
			if s.cfg.CI != nil {
				res = s.cfg.CI(r.name, r.sha)
			}
			r.result, r.completed = &res, now
		}
		out = append(out, s.checkRunJSON(r))
		r.reads++
	}
	return reply{status: 200, body: map[string]any{"total_count": len(out), "check_runs": out}}
}

func (s *Server) findRun(id string) *checkRun {
	n, _ := strconv.ParseInt(id, 10, 64)
	for _, r := range s.runs {
		if r.id == n {
			return r
		}
	}
	return nil
}

// jobLogRedirect answers, as GitHub does for an Actions job's log, 302
// with a signed download URL (here /_logs/{id} on this server).
func (s *Server) jobLogRedirect(id string) reply {
	r := s.findRun(id)
	if r == nil || r.result == nil {
		return reply{status: http.StatusNotFound, body: basicError("Not Found", docs+"/actions/workflow-jobs#download-job-logs-for-a-workflow-run")}
	}
	h := http.Header{}
	h.Set("Location", fmt.Sprintf("%s/_logs/%d?sig=fake", s.URL, r.id))
	return reply{status: http.StatusFound, header: h}
}

func (s *Server) jobLog(path string) reply {
	r := s.findRun(strings.TrimPrefix(path, "/_logs/"))
	if r == nil || r.result == nil {
		return reply{status: http.StatusNotFound, raw: []byte("BlobNotFound")}
	}
	return reply{status: 200, raw: []byte(r.result.Log)}
}

func (s *Server) listReviews(r *http.Request, p *pull) reply {
	rs, h := page(s, r, p.reviews)
	out := make([]any, 0, len(rs))
	for _, rv := range rs {
		out = append(out, s.reviewJSON(p, rv))
	}
	return reply{status: 200, body: out, header: h}
}

func (s *Server) reviewComments(p *pull, id int64) reply {
	for _, rv := range p.reviews {
		if rv.id != id {
			continue
		}
		out := make([]any, 0, len(rv.comments))
		for i, c := range rv.comments {
			out = append(out, map[string]any{"id": rv.id*100 + int64(i), "node_id": "MDI0OlB1bGxSZXF1ZXN0UmV2aWV3Q29tbWVudDEw",
				"pull_request_review_id": rv.id, "diff_hunk": "", "path": c.Path, "position": c.Line, "original_position": c.Line,
				"line": c.Line, "side": "RIGHT", "commit_id": rv.commitID, "original_commit_id": rv.commitID, "user": s.user(rv.login),
				"body": c.Body, "created_at": stamp(rv.submitted), "updated_at": stamp(rv.submitted),
				"html_url":         fmt.Sprintf("%s/pull/%d#discussion_r%d", s.html(), p.number, rv.id*100+int64(i)),
				"pull_request_url": fmt.Sprintf("%s/pulls/%d", s.api(), p.number), "author_association": "COLLABORATOR"})
		}
		return reply{status: 200, body: out}
	}
	return reply{status: http.StatusNotFound, body: basicError("Not Found", docs)}
}
