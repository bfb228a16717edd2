package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
)

// stageRunner is the agent every worker of the pool runs: it performs the
// assignment's stage the way Config.Stages says (an agent once, the run
// loop, or the gate plan), decides the stage's report from the evidence,
// records the verified claim on the team's board and hands the report over
// typed (pipeline.ReportingAgent) to the worker pool of its own process;
// to one in another process (NewStageAgent, Config.Remote), Execute returns
// the report's line as the result's final message.
type stageRunner struct{ t *Team }

var _ pipeline.ReportingAgent = stageRunner{}

// Execute performs the stage and returns its report's line
// (message.Line) as the result's final message.
func (r stageRunner) Execute(ctx context.Context, req phases.AgentRequest, onEvent phases.StreamCallback) (phases.AgentResult, error) {
	res, v, err := r.ExecuteReport(ctx, req, onEvent)
	if v != nil {
		res.Result = message.Line(v)
	}
	return res, err
}

// ExecuteReport performs the stage and returns its typed report, nil when
// the stage has none (the worker pool holds it: a rate limit).
func (r stageRunner) ExecuteReport(ctx context.Context, req phases.AgentRequest, onEvent phases.StreamCallback) (phases.AgentResult, message.Message, error) {
	res, v, err := r.perform(ctx, req, onEvent)
	if err != nil || v == nil {
		return res, nil, err
	}
	return res, *v, nil
}

func (r stageRunner) perform(ctx context.Context, req phases.AgentRequest, onEvent phases.StreamCallback) (phases.AgentResult, *message.Report, error) {
	t := r.t
	a, ok := pipeline.ParseAssignment(req.TaskPrompt)
	if !ok || a.Stage < 0 || a.Stage >= len(t.cfg.Stages) {
		return phases.AgentResult{}, nil, errors.New("team: a stage prompt without a valid assignment block")
	}
	st := t.cfg.Stages[a.Stage]
	onEvent = t.watchSandbox(ctx, a, t.watchRetries(a, onEvent))
	if st.Kind != StageGate {
		// A stage cut short (its host killed, its worker stalled) runs
		// again under the same assignment: its agent resumes the session
		// it had begun.
		if req.SessionID == "" {
			req.SessionID = t.interruptedSession(ctx, a.Assignment)
		}
		onEvent = t.recordSessions(ctx, a.Item, a.Assignment, req.SessionID, onEvent)
		defer func() {
			if ctx.Err() == nil {
				t.forgetSession(ctx, a.Assignment)
			}
		}()
	}
	// The agent may run the project's own checks (a CLI that allows
	// commands one by one is told which).
	req.Constraints.Commands = append(slices.Clip(req.Constraints.Commands), t.gateCommands()...)
	defer t.retries.clear(a.Item)
	// The agent writes its result file in a directory of its assignment's
	// own, made empty for this execution (what an earlier, interrupted run
	// of the same assignment left is not this one's evidence) and removed
	// once the evidence is read (the deferred call runs last).
	cred := t.credential(a.Assignment)
	if st.Kind != StageGate {
		if err := openResultDir(cred); err != nil {
			return phases.AgentResult{}, nil, fmt.Errorf("team: making the result directory: %w", err)
		}
		defer t.closeResultDir(cred)
		req.Env = append(slices.Clip(req.Env), EnvResult+"="+cred.ResultPath(), EnvReportKey+"="+cred.Key)
		req.Writable = append(slices.Clip(req.Writable), cred.Dir)
	}
	req.Env = append(slices.Clip(req.Env), EnvRole+"="+st.Role)
	// The MCP server takes this assignment's reports from now until the
	// stage's evidence is read (endReport); the deferred call covers the
	// early returns.
	mcpEnv, mcpServers, endReport := t.beginReports(a, st)
	defer endReport()
	req = withReports(req, mcpEnv, mcpServers)

	var (
		res phases.AgentResult
		v   message.Report
	)
	switch st.Kind {
	case StageAgent:
		var err error
		res, err = st.Agent.Execute(ctx, req, onEvent)
		if ctx.Err() != nil {
			return res, nil, context.Cause(ctx)
		}
		if err == nil && heldByPool(res) {
			return res, nil, nil
		}
		ev := agentEvidence{Flow: t.cfg.Flow, Item: a.Item, Stage: a.Stage, Assignment: a.Assignment, Result: res, ExecErr: err,
			ResultPath: cred.ResultPath(), Key: cred.Key}
		ev.MCP = endReport()
		ev.File, ev.FileErr = readReport(cred.ResultPath())
		var refused []string
		v, refused = agentVerdict(ev)
		for _, why := range refused {
			t.refuse(ctx, refusal{Item: a.Item, Stage: a.Stage, Worker: a.Worker, Assignment: a.Assignment, Detail: why})
		}
		if err == nil {
			if pv, ok := personReport(a.Item, a.Stage, res); ok {
				v = pv
			}
		}
	case StageBuild:
		var held bool
		res, v, held = r.build(ctx, a, req, st, cred, onEvent, endReport)
		if held { // by the pool: a rate limit
			return res, nil, nil
		}
	case StageGate:
		res, v = r.gate(ctx, a, req.WorkspacePath)
	}
	if ctx.Err() != nil {
		return res, nil, context.Cause(ctx)
	}
	if err := r.recordBoard(ctx, a, v); err != nil {
		return res, nil, err
	}
	res.Success = true
	return res, &v, nil
}

// maxReportSize bounds what is read of a result file.
const maxReportSize = 1 << 20

// readReport reads an agent's result file; (nil, nil) when there is none.
// The agent wrote it, so it is taken only as a regular file (not a link to
// somewhere else, a FIFO or a device) of at most maxReportSize bytes.
func readReport(path string) (*Report, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("not a file the team reads: %w", err)
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxReportSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxReportSize {
		return nil, fmt.Errorf("larger than %d bytes", maxReportSize)
	}
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, fmt.Errorf("not a JSON report: %w", err)
	}
	return &rep, nil
}

// build runs the run loop: agent, snapshot since the assignment's base,
// gates, feedback, until the gates pass or the limits end it.
// held is set when the worker pool holds the stage (a rate limit): there
// is no report.
func (r stageRunner) build(ctx context.Context, a pipeline.AgentAssignment, req phases.AgentRequest, st Stage, cred credential,
	onEvent phases.StreamCallback, endReport func() *Report) (_ phases.AgentResult, _ message.Report, held bool) {
	t := r.t
	before, err := t.assignmentBase(ctx, a.Item, a.Assignment, req.WorkspacePath)
	if err != nil {
		return phases.AgentResult{}, errorReport(a.Item, a.Stage, "recording the build's starting point: "+err.Error()), false
	}
	loop := phases.NewRunLoop(phases.Config{
		Services: phases.PhaseServices{
			AgentDriver: envAgent{inner: st.Agent, env: req.Env, mcp: req.MCPServers, writable: req.Writable},
			Snapshotter: t.snap, Verifier: gateEvents{t: t, a: a},
			FeedbackGenerator: t.feedback, Clock: t.clk, Logger: t.log,
		},
		Limits: t.cfg.Limits,
	})
	run, err := loop.Run(ctx, phases.RunRequest{
		ItemID: a.Item, RunID: phases.RunID(a.Assignment), WorkspacePath: req.WorkspacePath,
		Task:        phases.TaskSpec{Prompt: req.TaskPrompt, GatePlan: t.cfg.Gates, Agent: req.Constraints},
		BeforeState: &before, SessionID: req.SessionID, Stream: onEvent,
	})
	mcpReport := endReport() // the agent is done; a later report is stale
	res := phases.AgentResult{SessionID: run.SessionID, Tokens: run.Tokens, CostUSD: run.CostUSD, Duration: run.Duration}
	var last *phases.AgentResult
	if n := len(run.Iterations); n > 0 {
		if b := run.Iterations[n-1].Result.Phases.Build; b != nil && b.AgentResult != nil {
			last = b.AgentResult
			res.Output, res.Stderr, res.ExitCode, res.Model = last.Output, last.Stderr, last.ExitCode, last.Model
		}
	}
	if last != nil && !run.Succeeded() {
		// Why the agent stopped is the worker pool's to act on (a rate
		// limit) and the person's to read (a question). A build that
		// passed its gates stands, whatever the agent asked on the way.
		res.RateLimit, res.APIError, res.PermissionDenials, res.Questions = last.RateLimit, last.APIError, last.PermissionDenials, last.Questions
	}
	if last != nil && !run.Succeeded() && heldByPool(*last) {
		return res, message.Report{}, true
	}
	v := buildVerdict(t.cfg.Flow, a.Item, a.Stage, run, err)
	if run.Succeeded() {
		if err := t.recordVerified(ctx, a.Item, before, run); err != nil {
			return res, errorReport(a.Item, a.Stage, "recording the verified change: "+err.Error()), false
		}
	}
	if last != nil && !run.Succeeded() {
		if pv, ok := personReport(a.Item, a.Stage, *last); ok {
			return res, pv, false
		}
	}
	file, _ := readReport(cred.ResultPath())
	if file != nil && file.Assignment != a.Assignment {
		t.refuse(ctx, refusal{Item: a.Item, Stage: a.Stage, Worker: a.Worker, Assignment: a.Assignment,
			Detail: foreignFile(file.Assignment, a.Assignment)})
	}
	if !run.Succeeded() && err == nil {
		// The agent's own word on why, when it sent or wrote one, helps the
		// person the pause escalates to.
		rep := mcpReport
		if rep == nil || rep.Summary == "" {
			rep = file
		}
		if rep != nil && rep.Assignment == a.Assignment && rep.Summary != "" {
			v = errorReport(a.Item, a.Stage, v.Detail+"; the agent says: "+rep.Summary)
		}
	}
	return res, v, false
}

// gate runs the gate plan in the story's worktree; a failure's full
// feedback is kept for the rework's prompt.
func (r stageRunner) gate(ctx context.Context, a pipeline.AgentAssignment, dir string) (phases.AgentResult, message.Report) {
	t := r.t
	var mem memory
	if _, _, err := getJSON(ctx, t.db, kindMemory, string(a.Item), &mem); err != nil {
		return phases.AgentResult{}, errorReport(a.Item, a.Stage, "reading the story's memory: "+err.Error())
	}
	plan := t.cfg.QualityGates
	if checkCount(plan) == 0 {
		plan = t.cfg.Gates
		if t.alreadyVerified(ctx, dir, mem.Verified) {
			v := gateVerdict(t.cfg.Flow, a.Item, a.Stage, phases.VerificationReport{Passed: true}, plan)
			return phases.AgentResult{Output: "the gate plan passed on this exact change in the build stage; not run again"}, v
		}
	}
	snap := phases.Snapshot{ID: string(a.Item), RunID: phases.RunID(a.Assignment), WorkspacePath: dir}
	rep, err := gateEvents{t: t, a: a}.Verify(ctx, snap, plan, phases.VerifyOptions{})
	if err != nil {
		return phases.AgentResult{}, errorReport(a.Item, a.Stage, "the gates could not run: "+err.Error())
	}
	var fb string
	if !rep.Passed {
		var ferr error
		fb, ferr = t.feedback.Generate(ctx, snap, rep, plan, phases.FeedbackOptions{})
		if ferr != nil || fb == "" {
			fb = failureSummary(rep)
		}
	}
	if err := updateMemory(ctx, t.db, a.Item, func(m *memory) { m.GateFeedback = fb }); err != nil {
		return phases.AgentResult{}, errorReport(a.Item, a.Stage, "recording the gate's feedback: "+err.Error())
	}
	v := gateVerdict(t.cfg.Flow, a.Item, a.Stage, rep, plan)
	return phases.AgentResult{Output: message.Line(v), Duration: rep.Duration}, v
}

// recordBoard writes the board entry the report's rule checks.
func (r stageRunner) recordBoard(ctx context.Context, a pipeline.AgentAssignment, v message.Report) error {
	return storeBoard(r.t.db).Verified(ctx, r.t.cfg.Flow, a.Item, v)
}

// envAgent adds the assignment's environment, MCP server and writable
// paths to every execution of the run loop's agent (the run loop builds
// its own requests).
type envAgent struct {
	inner    phases.AgentDriver
	env      []string
	mcp      []phases.MCPServer
	writable []string
}

func (e envAgent) Execute(ctx context.Context, req phases.AgentRequest, onEvent phases.StreamCallback) (phases.AgentResult, error) {
	req.Env = append(slices.Clip(e.env), req.Env...)
	req.MCPServers = append(slices.Clip(e.mcp), req.MCPServers...)
	req.Writable = append(slices.Clip(e.writable), req.Writable...)
	res, err := e.inner.Execute(ctx, req, onEvent)
	if err == nil && exitedOnItsOwn(res) {
		// A build is judged by its evidence: an agent that exits non-zero
		// (git's "nothing to commit" after a restart, a linter it ran)
		// may still have done the work, so the run loop goes on to the
		// snapshot and the gates. Its exit status stays in the result
		// and reaches the pause's cause if the build fails.
		res.Success = true
	}
	return res, err
}

// exitedOnItsOwn reports whether an agent failed only by its exit status:
// not stopped (timeout, signal), and with no error, API error, rate limit
// or question of its own in its output.
func exitedOnItsOwn(res phases.AgentResult) bool {
	return !res.Success && res.ExitCode != 0 && !res.TimedOut && res.Signal == "" && res.Error == "" &&
		res.APIError == nil && res.RateLimit == nil && len(res.Questions) == 0
}

// assignmentBase returns the workspace's starting point for a build
// assignment, recorded the first time it runs, so that a build re-run after
// a host crash still counts the commits its first run made. A new
// assignment of a build stage no build of which has passed since it was
// entered (a replaced worker, a person's Retry) starts where the stage's
// first assignment did (memory.OpenBuild), when that commit is still in
// the story's history: the work already on the branch is the build's.
func (t *Team) assignmentBase(ctx context.Context, item foreman.ItemID, a foreman.AssignmentID, dir string) (phases.BeforeState, error) {
	var before phases.BeforeState
	_, found, err := getJSON(ctx, t.db, kindBase, string(a), &before)
	if err != nil || found {
		return before, err
	}
	var m memory
	if _, _, err := getJSON(ctx, t.db, kindMemory, string(item), &m); err != nil {
		return before, err
	}
	if open := m.OpenBuild; open != nil && t.inHistory(ctx, dir, open.BaseCommit) {
		before = *open
	} else {
		if before, err = t.snap.Before(ctx, dir); err != nil {
			return before, err
		}
		if err := updateMemory(ctx, t.db, item, func(m *memory) { m.OpenBuild = &before }); err != nil {
			return before, err
		}
	}
	return before, putJSON(ctx, t.db, kindBase, string(a), before)
}

// inHistory reports whether commit is HEAD or an ancestor of it in dir.
func (t *Team) inHistory(ctx context.Context, dir, commit string) bool {
	if commit == "" {
		return false
	}
	g := gitexec.Runner{Env: t.cfg.Merge.GitEnv}
	_, err := g.Run(ctx, dir, "merge-base", "--is-ancestor", commit, "HEAD")
	return err == nil
}

// recordVerified keeps the change a passing build verified, so that the
// quality-gate stage need not run the same plan on it again, and closes
// the build stage's visit (memory.OpenBuild).
func (t *Team) recordVerified(ctx context.Context, item foreman.ItemID, before phases.BeforeState, run phases.RunResult) error {
	var v *verifiedChange
	if n := len(run.Iterations); n > 0 {
		if sp := run.Iterations[n-1].Result.Phases.Snapshot; sp != nil && sp.Snapshot != nil && sp.Snapshot.DiffHash != "" {
			v = &verifiedChange{Base: before, DiffHash: sp.Snapshot.DiffHash}
		}
	}
	return updateMemory(ctx, t.db, item, func(m *memory) {
		if v != nil {
			m.Verified = v
		}
		m.OpenBuild = nil
	})
}

// alreadyVerified reports whether the worktree holds exactly the change a
// build verified with the gate plan (measured from the same base).
func (t *Team) alreadyVerified(ctx context.Context, dir string, v *verifiedChange) bool {
	if v == nil {
		return false
	}
	snap, err := t.snap.Capture(ctx, dir, v.Base, phases.SnapshotMeta{})
	return err == nil && snap.DiffHash == v.DiffHash
}

// gateEvents runs the team's verifier and records each result as an
// EventGates, so that a gate failure the build fixes on its own is seen.
type gateEvents struct {
	t *Team
	a pipeline.AgentAssignment
}

func (g gateEvents) Verify(ctx context.Context, snap phases.Snapshot, plan phases.GatePlan, opts phases.VerifyOptions) (phases.VerificationReport, error) {
	var before *worktreeState
	git := &gitexec.Runner{Git: g.t.cfg.Merge.Git, Env: g.t.cfg.Merge.GitEnv}
	if snap.WorkspacePath != "" && !opts.Skip {
		if st, err := readWorktreeState(ctx, git, snap.WorkspacePath); err == nil {
			before = &st
		}
	}
	rep, err := g.t.verifier.Verify(ctx, snap, plan, opts)
	if before != nil {
		if after, aerr := readWorktreeState(context.WithoutCancel(ctx), git, snap.WorkspacePath); aerr == nil {
			if note := changedBy(*before, after); note != "" {
				g.t.refuse(ctx, refusal{Item: g.a.Item, Stage: g.a.Stage, Worker: g.a.Worker, Assignment: g.a.Assignment,
					Detail: note, driver: true})
			}
		}
	}
	// What a check's sandbox refused is the code under verification
	// reaching beyond its worktree: the agent's code, counted as the
	// agent's own attempts are (even when Verify failed after it).
	for _, l := range rep.Levels {
		for _, c := range l.Checks {
			for _, note := range c.Refused {
				g.t.refuse(ctx, refusal{Item: g.a.Item, Stage: g.a.Stage, Worker: g.a.Worker, Assignment: g.a.Assignment,
					Detail: fmt.Sprintf("gate check %q (sandboxed, running the story's code): %s", c.Name, note), driver: true})
			}
		}
	}
	if err != nil {
		return rep, err
	}
	ev := Event{Kind: EventGates, At: g.t.clk.Now(), Story: g.a.Item, Stage: g.a.Stage, Role: g.t.role(g.a.Stage),
		Worker: g.a.Worker, Assignment: g.a.Assignment, Outcome: "PASS"}
	if !rep.Passed {
		ev.Outcome, ev.Detail = "FAIL", failureSummary(rep)
	}
	g.t.events.add(ev)
	return rep, nil
}

// gateCommands are the gate plans' commands, each as one line.
func (t *Team) gateCommands() []string {
	var out []string
	for _, plan := range []phases.GatePlan{t.cfg.Gates, t.cfg.QualityGates} {
		for _, l := range plan.Levels {
			for _, c := range l.Checks {
				if cmd := strings.Join(c.Argv, " "); !slices.Contains(out, cmd) {
					out = append(out, cmd)
				}
			}
		}
	}
	return out
}
