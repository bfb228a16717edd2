package team

import (
	"context"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
)

// kindSession holds the agent session each assignment's CLI announced
// (sessionRecord, by assignment id), written as soon as the CLI names it.
// An assignment's stage runs again only when its first execution was cut
// short (its host killed or stopped, its worker stalled): the CLI then
// resumes that session (Claude Code --resume, codex exec resume, Gemini
// CLI --resume) with the conversation so far, instead of starting over.
const kindSession = "team.session"

// sessionRecord is the session an assignment's agent ran in.
type sessionRecord struct {
	Item    foreman.ItemID `json:"item"`
	Session string         `json:"session"`
}

// interruptedSession is the session an earlier execution of the
// assignment announced, "" when none did.
func (t *Team) interruptedSession(ctx context.Context, a foreman.AssignmentID) string {
	var rec sessionRecord
	_, found, err := getJSON(ctx, t.db, kindSession, string(a), &rec)
	if err != nil {
		t.log.Warn("team: reading an assignment's agent session", "assignment", a, "err", err)
	}
	if !found {
		return ""
	}
	return rec.Session
}

// recordSessions passes a stage's agent output on to onEvent, first
// recording the session its CLI announces (once per session id), so that
// a host killed mid-stage resumes it.
func (t *Team) recordSessions(ctx context.Context, item foreman.ItemID, a foreman.AssignmentID, known string, onEvent phases.StreamCallback) phases.StreamCallback {
	return func(ev phases.StreamEvent) {
		if ev.SessionID != "" && ev.SessionID != known {
			known = ev.SessionID
			if err := putJSON(ctx, t.db, kindSession, string(a), sessionRecord{Item: item, Session: known}); err != nil && ctx.Err() == nil {
				t.log.Warn("team: recording an assignment's agent session", "assignment", a, "session", known, "err", err)
			}
		}
		if onEvent != nil {
			onEvent(ev)
		}
	}
}
