package teamweb

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/team"
)

// ResolveRequest is a person's decision about a paused story, sent to
// POST api/resolve as a form (application/x-www-form-urlencoded or
// multipart) or as JSON.
type ResolveRequest struct {
	Story  foreman.ItemID `json:"story"`
	Action team.Action    `json:"action"`
	Note   string         `json:"note,omitempty"`
	// Escalation, when set, is the key of the escalation the person saw
	// (pipeline.Escalation.Key). The decision then applies to that pause
	// only: a page left open while the story was resolved and paused
	// again cannot resolve the new pause by mistake, and a second click
	// after the team acted on the first is answered as already done.
	Escalation string `json:"escalation,omitempty"`
	// Token may come in the body instead of a header.
	Token string `json:"token,omitempty"`
}

// ResolveResponse answers a decision that was taken (or had already been
// taken: Already).
type ResolveResponse struct {
	Story   foreman.ItemID  `json:"story"`
	Action  team.Action     `json:"action"`
	State   team.StoryState `json:"state"`
	Already bool            `json:"already,omitempty"`
}

func (h *Handler) serveResolve(w http.ResponseWriter, r *http.Request) {
	// Cross-site first: a forged request learns nothing, not even whether
	// its token would have been right.
	if err := h.csrf.Check(r); err != nil {
		h.refuse(w, r, http.StatusForbidden, "cross_origin", "cross-origin request refused: "+err.Error())
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	req, err := readResolve(r)
	if err != nil {
		h.refuse(w, r, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	switch tok := tokenOf(r, req); {
	case tok == "":
		h.refuse(w, r, http.StatusUnauthorized, "no_token",
			"an action needs the token: header X-Foreman-Token, Authorization: Bearer, or form field token")
		return
	case subtle.ConstantTimeCompare([]byte(tok), []byte(h.cfg.Token)) != 1:
		h.refuse(w, r, http.StatusForbidden, "bad_token", "the token is wrong")
		return
	}
	if req.Story == "" {
		h.refuse(w, r, http.StatusBadRequest, "bad_request", "no story: send the story's id as story")
		return
	}
	ctx := r.Context()
	if req.Escalation != "" {
		if done, err := h.checkEscalation(w, r, req); err != nil || done {
			if err != nil {
				h.internal(w, r, err)
			}
			return
		}
	}
	if err := h.team.Resolve(ctx, req.Story, req.Action, req.Note); err != nil {
		switch {
		case errors.Is(err, team.ErrUnknownAction):
			h.refuse(w, r, http.StatusBadRequest, "unknown_action", err.Error())
		case errors.Is(err, team.ErrUnknownStory):
			h.refuse(w, r, http.StatusNotFound, "unknown_story", err.Error())
		case errors.Is(err, team.ErrNotPaused):
			h.refuse(w, r, http.StatusConflict, "not_paused", err.Error())
		default:
			h.internal(w, r, err)
		}
		return
	}
	h.log.Info("teamweb: story resolved", "story", req.Story, "action", req.Action, "remote", r.RemoteAddr)
	state, err := h.stateOf(r, req.Story)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ResolveResponse{Story: req.Story, Action: req.Action, State: state})
}

// checkEscalation answers a decision about a pause that is no longer the
// story's: the same decision already taken about it is a success (a
// second click), anything else a conflict. It reports whether it wrote
// the response.
func (h *Handler) checkEscalation(w http.ResponseWriter, r *http.Request, req ResolveRequest) (bool, error) {
	one, err := h.team.StatusOf(r.Context(), req.Story)
	if errors.Is(err, team.ErrUnknownStory) {
		h.refuse(w, r, http.StatusNotFound, "unknown_story", fmt.Sprintf("%v: %s", team.ErrUnknownStory, req.Story))
		return true, nil
	}
	if err != nil {
		return false, err
	}
	cur := &one
	if cur.State == team.StoryPaused && cur.Pause != nil && cur.Pause.Key == req.Escalation {
		return false, nil // the pause the person saw: decide
	}
	if taken := decisionAbout(h.team.Events(0), req.Story, req.Escalation); taken != "" {
		if taken == req.Action {
			writeJSON(w, http.StatusOK, ResolveResponse{Story: req.Story, Action: req.Action, State: cur.State, Already: true})
			return true, nil
		}
		h.refuse(w, r, http.StatusConflict, "not_paused",
			fmt.Sprintf("%v: that escalation of %s was already resolved (%s)", team.ErrNotPaused, req.Story, taken))
		return true, nil
	}
	h.refuse(w, r, http.StatusConflict, "stale_escalation",
		fmt.Sprintf("%v: %s is %s and escalation %q is not its current one: reload", team.ErrNotPaused, req.Story, cur.State, req.Escalation))
	return true, nil
}

// decisionAbout returns the action a person took about the pause of
// story whose escalation has key, or "" when none is recorded.
func decisionAbout(evs []team.Event, story foreman.ItemID, key string) team.Action {
	paused := false
	for _, e := range evs {
		if e.Story != story {
			continue
		}
		switch {
		case e.Kind == team.EventStoryPaused:
			paused = e.Escalation != nil && e.Escalation.Key == key
		case e.Kind == team.EventStoryResolved && paused:
			return e.Action
		}
	}
	return ""
}

func (h *Handler) stateOf(r *http.Request, story foreman.ItemID) (team.StoryState, error) {
	s, err := h.team.StatusOf(r.Context(), story)
	if errors.Is(err, team.ErrUnknownStory) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return s.State, nil
}

func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	h.log.Info("teamweb: request refused", "path", r.URL.Path, "code", code, "reason", msg, "remote", r.RemoteAddr)
	writeError(w, status, code, msg)
}

// readResolve reads a decision from a form or a JSON body.
func readResolve(r *http.Request) (ResolveRequest, error) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var req ResolveRequest
	switch ct {
	case "application/json":
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return req, fmt.Errorf("the JSON body: %v", err)
		}
	case "application/x-www-form-urlencoded", "multipart/form-data":
		var err error
		if ct == "multipart/form-data" {
			err = r.ParseMultipartForm(maxBody)
		} else {
			err = r.ParseForm()
		}
		if err != nil {
			return req, fmt.Errorf("the form: %v", err)
		}
		req = ResolveRequest{Story: foreman.ItemID(r.PostFormValue("story")), Action: team.Action(r.PostFormValue("action")),
			Note: r.PostFormValue("note"), Escalation: r.PostFormValue("escalation"), Token: r.PostFormValue("token")}
	default:
		return req, fmt.Errorf("Content-Type %q: send a form or application/json", r.Header.Get("Content-Type"))
	}
	return req, nil
}

func tokenOf(r *http.Request, req ResolveRequest) string {
	if t := readToken(r); t != "" {
		return t
	}
	return req.Token
}
