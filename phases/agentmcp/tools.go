package agentmcp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentforeman/foreman"
)

// ReportResult is the report tool's answer when the report was taken or
// ignored; every other verdict is a tool error whose text says why.
type ReportResult struct {
	// Verdict is "accepted" or "stale".
	Verdict string `json:"verdict"`
	Message string `json:"message"`
}

// StatusQuery is the status tool's input.
type StatusQuery struct {
	Assignment foreman.AssignmentID `json:"assignment" jsonschema:"your assignment id (FOREMAN_ASSIGNMENT); no other can be asked about"`
}

// StatusResult is the status tool's answer: the assignment, whether it is
// still current, what the team expects, and the report accepted so far.
// A stale assignment is told only that it is stale: who replaced it is
// none of its business.
type StatusResult struct {
	Assignment
	State    string  `json:"state"`
	Reported *Report `json:"reported,omitempty"`
}

func (s *Server) addTools() {
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:  ToolReport,
		Title: "Report your stage's outcome",
		Description: "Report the outcome of your assignment's stage to the team, once you are done (or cannot go on). " +
			"Pass your assignment id (FOREMAN_ASSIGNMENT): your bearer token proves that assignment and no other, so a report " +
			"naming any other assignment is refused and counted against yours; one from an assignment that was replaced is ignored. " +
			"A build reported complete must have changed the workspace (commits or changes since your assignment began), " +
			"or the report is refused. You may report again to correct it; the last accepted report counts.",
	}, s.report)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:  ToolStatus,
		Title: "Your assignment",
		Description: "What your assignment is (story, stage, role), whether it is still current, the outcomes the stage accepts, " +
			"what the team expects, and the report accepted so far. Only your own assignment (FOREMAN_ASSIGNMENT) can be asked about.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.status)
}

// callerOf authenticates a tool call again by its request's bearer token
// (the HTTP handler let it through; its assignment may have ended since).
func (s *Server) callerOf(ctx context.Context, req *mcp.CallToolRequest) (caller, error) {
	var header string
	if req != nil && req.Extra != nil && req.Extra.Header != nil {
		header = req.Extra.Header.Get("Authorization")
	}
	return s.authenticate(ctx, header)
}

func (s *Server) report(ctx context.Context, req *mcp.CallToolRequest, r Report) (*mcp.CallToolResult, ReportResult, error) {
	by, err := s.callerOf(ctx, req)
	if err != nil {
		return nil, ReportResult{}, err
	}
	r.Outcome = strings.ToLower(strings.TrimSpace(r.Outcome))
	f := s.fence(by, r.Assignment)
	a := by.a
	var c Check
	if f == FenceCurrent {
		if r.Outcome == "" {
			c.Problem = "the outcome is empty"
		} else if s.cfg.Check != nil {
			rc := r
			rc.Assignment = a.ID
			if c, err = s.cfg.Check(ctx, a, rc); err != nil {
				return nil, ReportResult{}, fmt.Errorf("the team could not check your report (try again): %w", err)
			}
		}
	}
	v := s.record(by, r, Decide(f, c))
	s.log.Info("agentmcp: report", "assignment", r.Assignment, "by", a.ID, "item", a.Item, "outcome", r.Outcome, "verdict", v.String())
	switch v {
	case Forged:
		s.refuse(ctx, a, r.Assignment, ToolReport)
		return nil, ReportResult{}, fmt.Errorf("refused: your token is for assignment %s, not %q; report for your own assignment only (FOREMAN_ASSIGNMENT)", a.ID, r.Assignment)
	case Invalid:
		return nil, ReportResult{}, fmt.Errorf("not taken: %s; outcomes of this stage: %s", c.Problem, strings.Join(a.Outcomes, ", "))
	case Unproven:
		return nil, ReportResult{}, errors.New("not taken as completion: " + unproven(c))
	case Stale:
		if s.cfg.OnStale != nil {
			s.cfg.OnStale(ctx, a, r)
		}
		return text(ReportResult{Verdict: v.String(), Message: fmt.Sprintf(
			"ignored: assignment %s is no longer current (another worker has the stage, or it ended); stop working on it", a.ID)})
	}
	msg := "accepted: the team takes this report when your stage ends"
	if c.Evidence != "" {
		msg += " (" + c.Evidence + ")"
	}
	return text(ReportResult{Verdict: v.String(), Message: msg})
}

func unproven(c Check) string {
	if c.Evidence != "" {
		return c.Evidence + "; commit your work, then report again"
	}
	return "the workspace has no commits or changes since your assignment began; commit your work, then report again"
}

func text(r ReportResult) (*mcp.CallToolResult, ReportResult, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: r.Message}}}, r, nil
}

func (s *Server) status(ctx context.Context, req *mcp.CallToolRequest, q StatusQuery) (*mcp.CallToolResult, StatusResult, error) {
	by, err := s.callerOf(ctx, req)
	if err != nil {
		return nil, StatusResult{}, err
	}
	a := by.a
	switch f := s.fence(by, q.Assignment); f {
	case FenceForeign:
		s.mu.Lock()
		s.stats.Forged++
		s.mu.Unlock()
		s.refuse(ctx, a, q.Assignment, ToolStatus)
		return nil, StatusResult{}, fmt.Errorf("refused: your token is for assignment %s, not %q; ask about your own assignment only (FOREMAN_ASSIGNMENT)", a.ID, q.Assignment)
	case FenceStale:
		return nil, StatusResult{Assignment: Assignment{ID: a.ID, Item: a.Item, Stage: a.Stage, Role: a.Role}, State: f.String()}, nil
	}
	res := StatusResult{Assignment: a, State: FenceCurrent.String()}
	s.mu.Lock()
	if e := s.entries[a.ID]; e != nil && e.token == by.tok && e.report != nil {
		rep := *e.report
		res.Reported = &rep
	}
	s.mu.Unlock()
	return nil, res, nil
}
