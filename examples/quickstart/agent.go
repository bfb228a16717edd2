package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/phases/gates"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
)

// attempt is one execution of one stage of one story.
type attempt struct {
	Item     foreman.ItemID
	Stage    int
	Worker   string
	Start    time.Time
	Duration time.Duration
	// Line is the report line the worker ended with ("" if none).
	Line string
	// Verdict is the short outcome: COMPLETE, GO, PASS, FAIL, ERROR, ...
	Verdict string
}

// stageAgent is the phases.AgentDriver every worker runs: Stages 0-2 run
// the story's scripted agent (or, with -agent, a real agent CLI) through
// agentcmd; Stage 3 is the quality gate, which really runs go vet and go
// test in the worktree with gates.Verifier and reports PASS or FAIL.
type stageAgent struct {
	stories map[foreman.ItemID]*story
	boards  string // directory of the per-story board files
	scripts string // directory of the scripted agents
	// leases is agentcmd's LeaseDir, set to show where a host keeps it: a
	// coordinator restarted on the same directory would kill an agent its
	// crashed predecessor left running in a worktree before starting
	// another there. (Each quickstart run has a fresh directory, so it
	// never finds one; an item's stages run one at a time, so its Drivers
	// never hold a worktree's lease together.)
	leases   string
	argv     []string
	format   agentcmd.Format
	extraEnv []string
	verifier *gates.Verifier
	plan     phases.GatePlan
	log      *printer
	// showOutput prints what agents say besides their report.
	showOutput bool

	mu       sync.Mutex
	attempts []attempt
}

// said returns the agent's other output lines, indented, to print under
// its report.
func (a *stageAgent) said(res phases.AgentResult, report string) string {
	if !a.showOutput {
		return ""
	}
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(res.Output), "\n") {
		if l = strings.TrimSpace(l); l != "" && l != report {
			b.WriteString("\n                │ " + l)
		}
	}
	return b.String()
}

// gatePlan is the quality gate: go vet (L0), then go test (L1).
func gatePlan() phases.GatePlan {
	return phases.GatePlan{Levels: []phases.GateLevel{
		{Level: phases.L0Contracts, Checks: []phases.GateCheck{{Name: "vet", Argv: []string{"go", "vet", "./..."}}}},
		{Level: phases.L1Tests, Checks: []phases.GateCheck{{Name: "test", Argv: []string{"go", "test", "-count=1", "./..."}}}},
	}}
}

// Execute implements phases.AgentDriver.
func (a *stageAgent) Execute(ctx context.Context, req phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
	item, stage, worker, err := parsePrompt(req.TaskPrompt)
	if err != nil {
		return phases.AgentResult{}, err
	}
	start := time.Now()
	var res phases.AgentResult
	if stage == 3 {
		res, err = a.qualityGate(ctx, item, req.WorkspacePath)
	} else {
		res, err = a.build(ctx, item, stage, worker, req)
	}
	if res.Result == "" {
		// A plain-text agent has no "final message": its report is the last
		// canonical line of its output, which is where AgentSpawner looks.
		res.Result = res.Output
	}
	at := attempt{Item: item, Stage: stage, Worker: worker, Start: start, Duration: time.Since(start)}
	at.Line, at.Verdict = reportOf(item, res.Result)
	if ctx.Err() == nil {
		a.mu.Lock()
		a.attempts = append(a.attempts, at)
		a.mu.Unlock()
		line := at.Line
		if line == "" {
			line = fmt.Sprintf("(no report line; exit %d)", res.ExitCode)
		}
		a.log.item(item, "%-22s %s  [%s]%s", worker, line, round(at.Duration), a.said(res, at.Line))
	}
	return res, err
}

func (a *stageAgent) build(ctx context.Context, item foreman.ItemID, stage int, worker string, req phases.AgentRequest) (phases.AgentResult, error) {
	argv := a.argv
	if len(argv) == 0 {
		argv = []string{filepath.Join(a.scripts, string(item)+".sh"), "{prompt}"}
	}
	env := append(demo.GitEnv(),
		"FOREMAN_ITEM="+string(item), "FOREMAN_STAGE="+strconv.Itoa(stage), "FOREMAN_WORKER="+worker,
		"FOREMAN_BOARD="+boardPath(a.boards, item))
	d := agentcmd.New(agentcmd.Config{
		Argv: argv, Format: a.format, Env: append(env, a.extraEnv...), LeaseDir: a.leases,
		// The prompt already carries the previous round's feedback.
		Prompt: func(r phases.AgentRequest) string { return r.TaskPrompt },
	})
	return d.Execute(ctx, req, nil)
}

// qualityGate runs the gate plan in the worktree and turns its report into
// the Stage 3 line: PASS 100/100, or FAIL with the share of checks that
// passed and the failures as issues (what the rework worker is told).
func (a *stageAgent) qualityGate(ctx context.Context, item foreman.ItemID, dir string) (phases.AgentResult, error) {
	rep, err := a.verifier.Verify(ctx, phases.Snapshot{ID: string(item), WorkspacePath: dir}, a.plan, phases.VerifyOptions{})
	if err != nil {
		return phases.AgentResult{}, err
	}
	msg := message.Stage3Complete{Item: item, Verdict: message.VerdictPass, Score: 100}
	if !rep.Passed {
		total, failed := 0, rep.FailedChecks()
		for _, l := range a.plan.Levels {
			total += len(l.Checks)
		}
		msg.Verdict, msg.Score = message.VerdictFail, 100*(total-len(failed))/max(total, 1)
		var issues []string
		for _, c := range failed {
			issues = append(issues, fmt.Sprintf("%s (%s) failed: %s", strings.Join(c.Argv, " "), c.Level, failureSummary(c.Output)))
		}
		msg.Issues = strings.Join(issues, "; ")
	}
	line := message.Format(msg)
	return phases.AgentResult{Success: true, Result: line, Output: line, Duration: rep.Duration}, nil
}

// failureSummary keeps the lines of go vet / go test output that say what
// failed, on one line (a report is one line).
func failureSummary(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "--- FAIL") || strings.Contains(l, ".go:") {
			keep = append(keep, l)
		}
	}
	if len(keep) == 0 {
		keep = strings.Fields(out)
	}
	s := strings.Join(strings.Fields(strings.Join(keep, " ")), " ")
	s = strings.ReplaceAll(s, ". Agents:", ", agents:") // the one phrase the report line reserves
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// reportOf finds the last canonical report line about item in text.
func reportOf(item foreman.ItemID, text string) (line, verdict string) {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		m, err := message.Parse(lines[i])
		if err != nil || !m.Kind().IsReport() || m.ItemID() != item {
			continue
		}
		switch m := m.(type) {
		case message.Stage1Complete:
			return lines[i], string(m.Verdict)
		case message.Stage3Complete:
			return lines[i], string(m.Verdict)
		case message.Stage0Error, message.Stage1Error, message.Stage2Error, message.Stage3Error:
			return lines[i], "ERROR"
		}
		return lines[i], "COMPLETE"
	}
	return "", ""
}

func boardPath(dir string, item foreman.ItemID) string {
	return filepath.Join(dir, string(item)+".json")
}

// prompt renders a worker's instructions. The first line is the seed's one
// command, "Execute Stage {N} for {id}"; the worker's name follows, then
// what the stage asks, the board file to update and the line to end with.
// A real agent follows it; the scripted ones read only the feedback.
func prompt(st map[foreman.ItemID]*story, boards string, r pipeline.SpawnRequest) string {
	s := st[r.Item]
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nWorker: %s\n\n", message.Format(message.ExecuteStage{Stage: r.Stage, Item: r.Item}), r.Worker)
	fmt.Fprintf(&b, "You work on story %s (%s) in a git worktree of a small Go module, package calc.\nThe story: %s\n\n", r.Item, r.Title, s.Description)
	board := boardPath(boards, r.Item)
	switch r.Stage {
	case 0:
		fmt.Fprintf(&b, "Stage 0 (plan): break the story into tasks and put them on the board: write this JSON, with your own task list, to %s:\n  %s\nEnd your last message with the line:\n  Stage 0 COMPLETE for %s. {number of tasks} tasks created. Plan score: {0-4}/4.\n", board, boardJSON(s, "Backlog"), r.Item)
	case 1:
		fmt.Fprintf(&b, "Stage 1 (validate): check that the story and its tasks (in %s) are ready to implement. If so, set the story's status to \"Todo\" in that file, keeping its tasks, and end with:\n  Stage 1 COMPLETE for %s. Verdict: GO. Readiness: {0-10}.\nIf not, end with:\n  Stage 1 COMPLETE for %s. Verdict: NO-GO. Readiness: {0-10}. Reason: {why}\n", board, r.Item, r.Item)
	case 2:
		fmt.Fprintf(&b, "Stage 2 (execute): implement the story with tests in this worktree and commit your work with git. Then set the story's status to \"To Review\" in %s, keeping its tasks, and end with:\n  Stage 2 COMPLETE for %s. All tasks Done. Story set to To Review.\n", board, r.Item)
	}
	fmt.Fprintf(&b, "If you cannot do it, end with: Stage %d ERROR for %s: {what went wrong}\n", r.Stage, r.Item)
	if r.Readiness != "" {
		fmt.Fprintf(&b, "Readiness: %s.\n", r.Readiness)
	}
	if r.Feedback != "" {
		fmt.Fprintf(&b, "Previous round: %s\n", r.Feedback)
	}
	return b.String()
}

// parsePrompt reads the stage command and the worker's name back from a
// prompt made by prompt.
func parsePrompt(p string) (item foreman.ItemID, stage int, worker string, err error) {
	first, rest, _ := strings.Cut(p, "\n")
	m, err := message.Parse(first)
	cmd, ok := m.(message.ExecuteStage)
	if err != nil || !ok {
		return "", 0, "", fmt.Errorf("quickstart: prompt does not start with a stage command: %q", first)
	}
	w, _, _ := strings.Cut(strings.TrimPrefix(rest, "Worker: "), "\n")
	return cmd.Item, cmd.Stage, w, nil
}
