package fakegithub

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	primaryDoc   = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-the-primary-rate-limit"
	secondaryDoc = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
)

// reply is a handler's answer.
type reply struct {
	status int
	body   any
	header http.Header
	// raw, when set, is sent as it is (text/plain) instead of body.
	raw []byte
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Requests++
	route, h := s.route(r)
	s.stats.ByRoute[r.Method+" "+route]++
	if strings.HasPrefix(r.URL.Path, "/_logs/") {
		// A log's download URL is signed by GitHub and needs no token
		// (nor costs any rate limit).
		s.write(w, r, h(), false)
		return
	}
	if s.cfg.Token != "" {
		auth := r.Header.Get("Authorization")
		if auth != "Bearer "+s.cfg.Token && auth != "token "+s.cfg.Token {
			s.write(w, r, reply{status: http.StatusUnauthorized, body: basicError("Bad credentials", docs)}, false)
			return
		}
	}
	now := s.clk.Now()
	if !now.Before(s.reset) {
		s.remaining, s.reset = s.cfg.RateLimit, now.Add(time.Hour).Truncate(time.Second)
	}
	if len(s.throttle) > 0 {
		th := s.throttle[0]
		s.throttle = s.throttle[1:]
		s.stats.Limited++
		rep := reply{status: th.status, header: http.Header{}, body: basicError(
			"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.", secondaryDoc)}
		if th.retryAfter > 0 {
			rep.header.Set("Retry-After", strconv.Itoa(int(th.retryAfter/time.Second)))
		}
		s.write(w, r, rep, false)
		return
	}
	if s.remaining <= 0 {
		s.stats.Limited++
		s.write(w, r, reply{status: http.StatusForbidden, body: basicError(
			"API rate limit exceeded for user ID 1.", primaryDoc)}, false)
		return
	}
	rep := reply{status: http.StatusNotFound, body: basicError("Not Found", docs)}
	if h != nil {
		rep = h()
	}
	if s.cfg.BeforeAnswer != nil {
		s.cfg.BeforeAnswer(r.Method, route, rep.status)
	}
	if r.Method == http.MethodGet && rep.status == http.StatusOK {
		data, _ := json.Marshal(rep.body)
		sum := sha256.Sum256(data)
		etag := `W/"` + hex.EncodeToString(sum[:16]) + `"`
		if rep.header == nil {
			rep.header = http.Header{}
		}
		rep.header.Set("ETag", etag)
		if inm := r.Header.Get("If-None-Match"); inm != "" && (inm == etag || strings.TrimPrefix(inm, "W/") == strings.TrimPrefix(etag, "W/")) {
			s.stats.NotModified++
			s.write(w, r, reply{status: http.StatusNotModified, header: rep.header}, false)
			return
		}
	}
	s.write(w, r, rep, true)
}

// write sends rep with the rate-limit headers, charging the request to
// the rate limit when charge is set.
func (s *Server) write(w http.ResponseWriter, r *http.Request, rep reply, charge bool) {
	if charge {
		s.remaining--
		s.stats.Charged++
	}
	h := w.Header()
	for k, v := range rep.header {
		h[k] = v
	}
	h.Set("x-ratelimit-limit", strconv.Itoa(s.cfg.RateLimit))
	h.Set("x-ratelimit-remaining", strconv.Itoa(max(s.remaining, 0)))
	h.Set("x-ratelimit-used", strconv.Itoa(s.cfg.RateLimit-max(s.remaining, 0)))
	h.Set("x-ratelimit-reset", strconv.FormatInt(s.reset.Unix(), 10))
	h.Set("x-ratelimit-resource", "core")
	h.Set("X-GitHub-Api-Version-Selected", "2022-11-28")
	if rep.raw != nil {
		h.Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(rep.status)
		_, _ = w.Write(rep.raw)
		return
	}
	if rep.status == http.StatusNotModified || rep.body == nil {
		w.WriteHeader(rep.status)
		return
	}
	data, _ := json.Marshal(rep.body)
	h.Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(rep.status)
	_, _ = w.Write(data)
}

// route finds the handler of a request, with its route's name.
func (s *Server) route(r *http.Request) (string, func() reply) {
	prefix := "/repos/" + s.cfg.Owner + "/" + s.cfg.Repo
	path := r.URL.Path
	if path == prefix && r.Method == http.MethodGet {
		return "/repos/{owner}/{repo}", func() reply { return reply{status: 200, body: s.repoJSON()} }
	}
	if strings.HasPrefix(path, "/_logs/") && r.Method == http.MethodGet {
		return "/_logs/{job_id}", func() reply { return s.jobLog(path) }
	}
	if !strings.HasPrefix(path, prefix+"/") {
		return path, nil
	}
	parts := strings.Split(strings.TrimPrefix(path, prefix+"/"), "/")
	const base = "/repos/{owner}/{repo}/"
	switch {
	case len(parts) == 1 && parts[0] == "labels" && r.Method == http.MethodPost:
		return base + "labels", func() reply { return s.createLabel(r) }
	case len(parts) == 1 && parts[0] == "issues" && r.Method == http.MethodGet:
		return base + "issues", func() reply { return s.listIssues(r) }
	case len(parts) == 1 && parts[0] == "issues" && r.Method == http.MethodPost:
		return base + "issues", func() reply { return s.createIssue(r) }
	case parts[0] == "pulls" || parts[0] == "commits" || parts[0] == "actions" || parts[0] == "":
		return s.routePulls(r, parts)
	case len(parts) < 2 || parts[0] != "issues":
		return path, nil
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil {
		return path, nil
	}
	with := func(f func(*issue) reply) func() reply {
		return func() reply {
			is, ok := s.issues[n]
			switch {
			case !ok:
				return reply{status: http.StatusNotFound, body: basicError("Not Found", docs)}
			case is.state == "deleted":
				return reply{status: http.StatusGone, body: basicError("This issue was deleted", docs)}
			}
			return f(is)
		}
	}
	switch {
	case len(parts) == 2 && r.Method == http.MethodGet:
		return base + "issues/{issue_number}", with(func(is *issue) reply { return reply{status: 200, body: s.issueJSON(is)} })
	case len(parts) == 2 && r.Method == http.MethodPatch:
		return base + "issues/{issue_number}", with(func(is *issue) reply { return s.updateIssue(r, is) })
	case len(parts) == 3 && parts[2] == "comments" && r.Method == http.MethodGet:
		return base + "issues/{issue_number}/comments", with(func(is *issue) reply { return s.listComments(r, is) })
	case len(parts) == 3 && parts[2] == "comments" && r.Method == http.MethodPost:
		return base + "issues/{issue_number}/comments", with(func(is *issue) reply { return s.createComment(r, is) })
	case len(parts) == 3 && parts[2] == "labels" && r.Method == http.MethodPost:
		return base + "issues/{issue_number}/labels", with(func(is *issue) reply { return s.addIssueLabels(r, is) })
	case len(parts) == 4 && parts[2] == "labels" && r.Method == http.MethodDelete:
		name, _ := url.PathUnescape(parts[3])
		return base + "issues/{issue_number}/labels/{name}", with(func(is *issue) reply { return s.removeIssueLabel(is, name) })
	}
	return path, nil
}

// page cuts items to the request's page and sets its Link header.
func page[T any](s *Server, r *http.Request, items []T) ([]T, http.Header) {
	per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
	if per <= 0 {
		per = 30
	}
	per = min(per, 100)
	p, _ := strconv.Atoi(r.URL.Query().Get("page"))
	p = max(p, 1)
	last := max((len(items)+per-1)/per, 1)
	h := http.Header{}
	link := func(n int, rel string) string {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(n))
		return fmt.Sprintf(`<%s%s?%s>; rel="%s"`, s.URL, r.URL.Path, q.Encode(), rel)
	}
	var links []string
	if p < last {
		links = append(links, link(p+1, "next"), link(last, "last"))
	}
	if p > 1 {
		links = append(links, link(1, "first"), link(p-1, "prev"))
	}
	if len(links) > 0 {
		h.Set("Link", strings.Join(links, ", "))
	}
	from := min((p-1)*per, len(items))
	return items[from:min(from+per, len(items))], h
}

func (s *Server) listIssues(r *http.Request) reply {
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	var want []string
	if l := q.Get("labels"); l != "" {
		want = strings.Split(l, ",")
	}
	nums := make([]int, 0, len(s.issues))
	for n, is := range s.issues {
		if is.state == "deleted" || (state != "all" && is.state != state) {
			continue
		}
		if !hasAll(is.labels, want) {
			continue
		}
		nums = append(nums, n)
	}
	slices.Sort(nums) // sort=created: creation order is number order here
	if q.Get("direction") != "asc" {
		slices.Reverse(nums)
	}
	nums, h := page(s, r, nums)
	out := make([]any, 0, len(nums))
	for _, n := range nums {
		out = append(out, s.issueJSON(s.issues[n]))
	}
	return reply{status: 200, body: out, header: h}
}

func hasAll(have, want []string) bool {
	for _, w := range want {
		if !slices.ContainsFunc(have, func(h string) bool { return strings.EqualFold(h, strings.TrimSpace(w)) }) {
			return false
		}
	}
	return true
}

func decode(r *http.Request, v any) bool { return json.NewDecoder(r.Body).Decode(v) == nil }

func badJSON() reply {
	return reply{status: http.StatusBadRequest, body: basicError("Problems parsing JSON", docs)}
}

func (s *Server) createIssue(r *http.Request) reply {
	var in struct {
		Title  string   `json:"title"`
		Body   string   `json:"body"`
		Labels []string `json:"labels"`
	}
	if !decode(r, &in) {
		return badJSON()
	}
	if in.Title == "" {
		return reply{status: 422, body: validationError("Issue", "title", "missing_field", docs+"/issues/issues#create-an-issue")}
	}
	n := s.newIssue(in.Title, in.Body, s.cfg.Login, in.Labels)
	return reply{status: http.StatusCreated, body: s.issueJSON(s.issues[n])}
}

func (s *Server) updateIssue(r *http.Request, is *issue) reply {
	var in struct {
		Title       *string   `json:"title"`
		Body        *string   `json:"body"`
		State       *string   `json:"state"`
		StateReason *string   `json:"state_reason"`
		Labels      *[]string `json:"labels"`
	}
	if !decode(r, &in) {
		return badJSON()
	}
	if in.Title != nil {
		is.title = *in.Title
	}
	if in.Body != nil {
		is.body = *in.Body
	}
	if in.Labels != nil {
		is.labels = nil
		s.addLabels(is, *in.Labels)
	}
	if in.State != nil {
		switch *in.State {
		case "closed":
			reason := ""
			if in.StateReason != nil {
				reason = *in.StateReason
			}
			s.closeIssue(is, reason, s.cfg.Login)
		case "open":
			is.state, is.reason, is.closed, is.closedBy = "open", "reopened", time.Time{}, ""
		default:
			return reply{status: 422, body: validationError("Issue", "state", "invalid", docs+"/issues/issues#update-an-issue")}
		}
	}
	is.updated = s.clk.Now().UTC()
	return reply{status: 200, body: s.issueJSON(is)}
}

func (s *Server) listComments(r *http.Request, is *issue) reply {
	cs, h := page(s, r, is.comments)
	out := make([]any, 0, len(cs))
	for _, c := range cs {
		out = append(out, s.commentJSON(is, c))
	}
	return reply{status: 200, body: out, header: h}
}

func (s *Server) createComment(r *http.Request, is *issue) reply {
	var in struct {
		Body string `json:"body"`
	}
	if !decode(r, &in) {
		return badJSON()
	}
	if in.Body == "" {
		return reply{status: 422, body: validationError("IssueComment", "body", "missing_field", docs+"/issues/comments#create-an-issue-comment")}
	}
	now := s.clk.Now().UTC()
	s.nextID++
	c := &comment{id: s.nextID, body: in.Body, author: s.cfg.Login, created: now, updated: now}
	is.comments = append(is.comments, c)
	is.updated = now
	return reply{status: http.StatusCreated, body: s.commentJSON(is, c)}
}

func (s *Server) labelList(is *issue) []any {
	out := make([]any, 0, len(is.labels))
	for _, n := range is.labels {
		out = append(out, s.label(n))
	}
	return out
}

func (s *Server) addIssueLabels(r *http.Request, is *issue) reply {
	// The description's request body is one of: {"labels": [names]},
	// [names], {"labels": [{"name"}]}, [{"name"}], or a name.
	var raw json.RawMessage
	if !decode(r, &raw) {
		return badJSON()
	}
	names, ok := labelNames(raw)
	if !ok {
		return reply{status: 422, body: validationError("Label", "labels", "invalid", docs+"/issues/labels#add-labels-to-an-issue")}
	}
	s.addLabels(is, names)
	is.updated = s.clk.Now().UTC()
	return reply{status: 200, body: s.labelList(is)}
}

func (s *Server) removeIssueLabel(is *issue, name string) reply {
	i := slices.Index(is.labels, name)
	if i < 0 {
		return reply{status: http.StatusNotFound, body: basicError("Label does not exist", docs+"/issues/labels#remove-a-label-from-an-issue")}
	}
	is.labels = slices.Delete(is.labels, i, i+1)
	is.updated = s.clk.Now().UTC()
	return reply{status: 200, body: s.labelList(is)}
}

func (s *Server) createLabel(r *http.Request) reply {
	var in struct {
		Name        string `json:"name"`
		Color       string `json:"color"`
		Description string `json:"description"`
	}
	if !decode(r, &in) {
		return badJSON()
	}
	if _, ok := s.labels[in.Name]; ok {
		return reply{status: 422, body: validationError("Label", "name", "already_exists", docs+"/issues/labels#create-a-label")}
	}
	s.nextID++
	if in.Color == "" {
		in.Color = "ededed"
	}
	s.labels[in.Name] = &label{id: s.nextID, name: in.Name, color: in.Color, descr: in.Description}
	return reply{status: http.StatusCreated, body: s.label(in.Name)}
}

// labelNames reads the label names of an "Add labels to an issue" body.
func labelNames(raw json.RawMessage) ([]string, bool) {
	var obj struct {
		Labels json.RawMessage `json:"labels"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Labels != nil {
		raw = obj.Labels
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, true
	}
	var names []string
	if json.Unmarshal(raw, &names) == nil {
		return names, true
	}
	var named []struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &named) != nil {
		return nil, false
	}
	for _, n := range named {
		names = append(names, n.Name)
	}
	return names, true
}
