package pipeline

import (
	"context"
	"fmt"

	"github.com/agentforeman/foreman"

	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/worker"
)

// ReviewRequest asks a reviewer to judge one attempt at a stage: the
// assignment (SpawnRequest), its workspace, which attempt this is
// (1-based: every rejection gives the stage to a fresh worker), and the
// report its agent ended with.
type ReviewRequest struct {
	SpawnRequest
	Workspace string
	Attempt   int
	Report    string
}

// ReviewFunc reviews the work of an attempt. A returned error is taken as
// a rejection whose feedback is the error, so that a reviewer that cannot
// run never approves.
type ReviewFunc func(ctx context.Context, r ReviewRequest) (approved bool, feedback string, err error)

// review runs the reviewer of an assignment the Dispatcher holds ready for
// review and gives its verdict to the Dispatcher.
func (s *DispatcherSpawner) review(ev worker.Event) {
	s.mu.Lock()
	e := s.spawns.Get(foreman.AssignmentID(ev.Item))
	if e == nil || e.Shutdown() || s.closed {
		s.mu.Unlock()
		return
	}
	sp := e.P
	req := ReviewRequest{SpawnRequest: sp.req, Attempt: ev.Attempt, Report: sp.report.raw}
	s.mu.Unlock()
	req.Workspace, _ = s.cfg.Workspace(req.Item)
	approved, feedback, err := s.cfg.Review(s.ctx, req)
	if err != nil {
		approved, feedback = false, "the review could not be made: "+err.Error()
	}
	if s.ctx.Err() != nil {
		return
	}
	s.mu.Lock()
	sp.lastReview = feedback
	s.mu.Unlock()
	if _, rerr := s.d.Review(s.ctx, worker.Verdict{Worker: ev.Worker, Assignment: ev.Assignment, Approved: approved, Feedback: feedback}); rerr != nil {
		s.log.Warn("pipeline: giving the review's verdict", "item", req.Item, "assignment", req.Assignment, "err", rerr)
	}
}

// reviewLimitReport is the ERROR report of a stage whose work the
// reviewer rejected more often than the Dispatcher allows.
func reviewLimitReport(r SpawnRequest, escalation, lastFeedback string) agentReport {
	m := message.ErrorReport(r.Item, r.Stage, fmt.Sprintf("the review rejected the work (%s); last review: %s", escalation, lastFeedback), 600)
	return agentReport{msg: m, raw: message.Line(m)}
}
