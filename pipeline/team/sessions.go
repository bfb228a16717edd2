package team

import (
	"context"
	"errors"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline/store"
)

// kindSession holds the agent session each running assignment's CLI
// announced (sessionRecord, by assignment id), written as soon as the CLI
// names it and removed when the stage's execution ends by itself. One
// left behind is an execution cut short (its host killed or stopped, its
// worker stalled): when the assignment's stage runs again, its CLI
// resumes that session (Claude Code --resume, codex exec resume, Gemini
// CLI --resume) with the conversation so far, instead of starting over.
// A stage run again after it ended (a reviewer's rejection) starts afresh.
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

// forgetSession removes the assignment's session record: its execution
// ended by itself.
func (t *Team) forgetSession(ctx context.Context, a foreman.AssignmentID) {
	rec, err := t.db.Get(ctx, kindSession, string(a))
	if errors.Is(err, store.ErrNotFound) {
		return
	}
	if err == nil {
		_, err = t.db.Apply(ctx, store.Op{Kind: kindSession, ID: string(a), ExpectVersion: rec.Version, Delete: true})
	}
	if err != nil && ctx.Err() == nil {
		t.log.Warn("team: removing an assignment's agent session record", "assignment", a, "err", err)
	}
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
