package team

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentmcp"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
)

// MCPConfig configures the MCP server the team starts for its agents
// while it runs (phases/agentmcp): the third way an agent reports its
// stage, beside the result file and the printed line, and the only one
// the team answers. It is on by default.
type MCPConfig struct {
	// Off turns the server off: agents report through the result file and
	// the printed line only. Default: false (the server is on).
	Off bool
	// Addr is where it listens. Default: agentmcp.DefaultAddr, a free port
	// on the loopback interface.
	Addr string
}

// mcpCloseGrace bounds how long the end of a Run waits for a tool call in
// progress before cutting it.
const mcpCloseGrace = 5 * time.Second

// newReportServer makes the team's MCP server (nil when Config.MCP.Off).
func (t *Team) newReportServer() *agentmcp.Server {
	if t.cfg.MCP.Off {
		return nil
	}
	return agentmcp.New(agentmcp.Config{Addr: t.cfg.MCP.Addr, Check: t.checkReport, OnStale: t.staleReport,
		OnRefused: t.mcpRefused, Logger: t.log})
}

// startReports serves the MCP server for one Run; the returned function
// stops it.
func (t *Team) startReports(ctx context.Context) (func(), error) {
	if t.reports == nil {
		return func() {}, nil
	}
	if err := t.reports.Start(ctx); err != nil {
		return nil, err
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mcpCloseGrace)
		defer cancel()
		_ = t.reports.Close(ctx)
	}, nil
}

// MCPStats counts the reports the team's MCP server received, by verdict,
// over this Team's Runs (zero when Config.MCP.Off).
func (t *Team) MCPStats() agentmcp.Stats {
	if t.reports == nil {
		return agentmcp.Stats{}
	}
	return t.reports.Stats()
}

// beginReports tells the MCP server that a's agent starts and returns the
// environment and the server configuration for the agent's requests,
// and the function that ends the assignment there (safe to call twice:
// the second call returns nothing).
func (t *Team) beginReports(a pipeline.AgentAssignment, st Stage) ([]string, []phases.MCPServer, func() *Report) {
	none := func() *Report { return nil }
	if t.reports == nil || t.reports.URL() == "" || st.Kind == StageGate {
		return nil, nil, none
	}
	expect := DefaultInstructions(t.cfg.Flow.Stages[a.Stage].Name, st.Kind)
	if st.Instructions != "" {
		expect = st.Instructions
	}
	if st.Kind == StageBuild {
		expect += " A complete report is taken only once your commits or changes are in the workspace; the gates then decide."
	}
	token := t.reports.Begin(agentmcp.Assignment{ID: a.Assignment, Item: a.Item, Worker: a.Worker, Stage: a.Stage, Role: st.Role,
		Outcomes: strings.Split(stageOutcomes(t.cfg.Flow, a.Stage), ", "), Expect: expect})
	server := phases.MCPServer{Name: agentmcp.ServerName, URL: t.reports.URL(), BearerToken: token,
		BearerTokenEnv: agentmcp.EnvToken, Tools: []string{agentmcp.ToolReport, agentmcp.ToolStatus}}
	end := func() *Report {
		r, ok := t.reports.End(a.Assignment)
		if !ok {
			return nil
		}
		return &Report{Assignment: r.Assignment, Outcome: r.Outcome, Summary: r.Summary, Score: r.Score, Tasks: r.Tasks}
	}
	return t.reports.Env(token), []phases.MCPServer{server}, end
}

// checkReport is the team's judgement of a report from a current
// assignment (agentmcp.Config.Check): its outcome and score must make the
// stage's canonical line, as a result file's must; and a build reported
// complete must show commits or changes since the assignment's base, the
// snapshot the build stage itself measures its work against.
func (t *Team) checkReport(ctx context.Context, a agentmcp.Assignment, r agentmcp.Report) (agentmcp.Check, error) {
	if a.Stage < 0 || a.Stage >= len(t.cfg.Stages) {
		return agentmcp.Check{}, fmt.Errorf("no stage %d", a.Stage)
	}
	var c agentmcp.Check
	v, err := verdictOf(t.cfg.Flow, a.Item, a.Stage, Report{Assignment: r.Assignment, Outcome: r.Outcome, Summary: r.Summary, Score: r.Score, Tasks: r.Tasks})
	if err != nil {
		c.Problem = err.Error()
		return c, nil
	}
	c.ClaimsCompletion = !strings.HasPrefix(strings.ToLower(strings.TrimSpace(r.Outcome)), "error")
	c.NeedsChange = t.cfg.Stages[a.Stage].Kind == StageBuild
	if !c.ClaimsCompletion || !c.NeedsChange {
		c.Evidence = "reported as " + message.Line(v)
		return c, nil
	}
	var before phases.BeforeState
	_, found, err := getJSON(ctx, t.db, kindBase, string(a.ID), &before)
	if err != nil {
		return c, err
	}
	if !found {
		return c, errors.New("the build's starting point is not recorded yet")
	}
	dir, err := t.mgr.Path(a.Item)
	if err != nil {
		return c, err
	}
	snap, err := t.snap.Capture(ctx, dir, before, phases.SnapshotMeta{})
	if err != nil {
		return c, err
	}
	c.Changed = !snap.Empty()
	if c.Changed {
		c.Evidence = fmt.Sprintf("%d commit(s), %d file(s) changed since your assignment began; the gates decide", len(snap.Commits), len(snap.Files))
	} else {
		c.Evidence = "the workspace has no commits or changes since your assignment began"
	}
	return c, nil
}

// staleReport counts a replaced worker's report where the story flow
// counts its stale messages: the pipeline's guards see the old worker and
// assignment, count it (State.Stale, or Duplicates for the assignment
// whose report moved the story last) and change nothing else.
func (t *Team) staleReport(ctx context.Context, a agentmcp.Assignment, _ agentmcp.Report) {
	_, err := t.pipe.Handle(ctx, a.Item, pipeline.Event{Kind: pipeline.EventReport, Worker: a.Worker, Assignment: a.ID, Stage: a.Stage})
	if err != nil {
		t.log.Warn("team: counting a stale MCP report", "story", a.Item, "assignment", a.ID, "err", err)
	}
}

// withReports adds the MCP server's environment and configuration to an
// agent request.
func withReports(req phases.AgentRequest, env []string, servers []phases.MCPServer) phases.AgentRequest {
	if len(servers) == 0 {
		return req
	}
	req.Env = append(slices.Clip(req.Env), env...)
	req.MCPServers = append(slices.Clip(req.MCPServers), servers...)
	return req
}
