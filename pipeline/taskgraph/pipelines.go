package taskgraph

import (
	"slices"
	"strings"
)

// DefaultRoles returns the eleven known worker roles: a callback is a
// "[role]" tag naming one of them, and every task is owned by one. Each
// call returns a fresh slice, so a caller changing it changes no Core.
func DefaultRoles() []string {
	return []string{
		"analyst", "writer", "discussant", "planner", "executor", "tester",
		"reviewer", "explorer", "architect", "fe-developer", "fe-qa",
	}
}

// Mode names a pipeline: which tasks a session is expected to hold.
type Mode string

// The built-in modes, each with its task chain (PipelineTasks).
const (
	ModeSpecOnly        Mode = "spec-only"
	ModeImplOnly        Mode = "impl-only"
	ModeFEOnly          Mode = "fe-only"
	ModeFullstack       Mode = "fullstack"
	ModeFullLifecycle   Mode = "full-lifecycle"
	ModeFullLifecycleFE Mode = "full-lifecycle-fe"
)

// Checkpoint pauses the pipeline for a person's review when Task
// completes in one of Modes (every mode when Modes is empty). Nothing new
// is spawned until a "resume".
type Checkpoint struct {
	Task  string
	Modes []Mode
	// Message is reported when the checkpoint is reached; empty means
	// "SPEC PHASE COMPLETE".
	Message string
}

// DefaultCheckpoints returns the one built-in checkpoint: the spec phase's
// final discussion in the full-lifecycle modes. Each call returns fresh
// slices, so a caller changing them changes no Core.
func DefaultCheckpoints() []Checkpoint {
	return []Checkpoint{{Task: "DISCUSS-006", Modes: []Mode{ModeFullLifecycle, ModeFullLifecycleFE}}}
}

// cloneCheckpoints copies cps deeply (Modes included).
func cloneCheckpoints(cps []Checkpoint) []Checkpoint {
	out := slices.Clone(cps)
	for i := range out {
		out[i].Modes = slices.Clone(out[i].Modes)
	}
	return out
}

func (c Checkpoint) applies(task string, mode Mode) bool {
	if c.Task != task {
		return false
	}
	if len(c.Modes) == 0 {
		return true
	}
	for _, m := range c.Modes {
		if m == mode {
			return true
		}
	}
	return false
}

func specChain() []TaskSpec {
	return []TaskSpec{
		{Subject: "RESEARCH-001", Role: "analyst", Description: "Seed analysis: codebase exploration and context gathering"},
		{Subject: "DISCUSS-001", Role: "discussant", Description: "Critique research findings", BlockedBy: []string{"RESEARCH-001"}},
		{Subject: "DRAFT-001", Role: "writer", Description: "Generate Product Brief", BlockedBy: []string{"DISCUSS-001"}},
		{Subject: "DISCUSS-002", Role: "discussant", Description: "Critique Product Brief", BlockedBy: []string{"DRAFT-001"}},
		{Subject: "DRAFT-002", Role: "writer", Description: "Generate Requirements/PRD", BlockedBy: []string{"DISCUSS-002"}},
		{Subject: "DISCUSS-003", Role: "discussant", Description: "Critique Requirements/PRD", BlockedBy: []string{"DRAFT-002"}},
		{Subject: "DRAFT-003", Role: "writer", Description: "Generate Architecture Document", BlockedBy: []string{"DISCUSS-003"}},
		{Subject: "DISCUSS-004", Role: "discussant", Description: "Critique Architecture Document", BlockedBy: []string{"DRAFT-003"}},
		{Subject: "DRAFT-004", Role: "writer", Description: "Generate Epics", BlockedBy: []string{"DISCUSS-004"}},
		{Subject: "DISCUSS-005", Role: "discussant", Description: "Critique Epics", BlockedBy: []string{"DRAFT-004"}},
		{Subject: "QUALITY-001", Role: "reviewer", Description: "5-dimension spec quality validation", BlockedBy: []string{"DISCUSS-005"}},
		{Subject: "DISCUSS-006", Role: "discussant", Description: "Final review discussion and sign-off", BlockedBy: []string{"QUALITY-001"}},
	}
}

func planTask(after []string) TaskSpec {
	return TaskSpec{Subject: "PLAN-001", Role: "planner", Description: "Multi-angle codebase exploration and structured planning", BlockedBy: after}
}

func implChain(after []string) []TaskSpec {
	return []TaskSpec{
		planTask(after),
		{Subject: "IMPL-001", Role: "executor", Description: "Code implementation following PLAN-001", BlockedBy: []string{"PLAN-001"}},
		{Subject: "TEST-001", Role: "tester", Description: "Adaptive test-fix cycles and quality gates", BlockedBy: []string{"IMPL-001"}},
		{Subject: "REVIEW-001", Role: "reviewer", Description: "4-dimension code review", BlockedBy: []string{"IMPL-001"}},
	}
}

func feChain(after []string) []TaskSpec {
	return []TaskSpec{
		planTask(after),
		{Subject: "DEV-FE-001", Role: "fe-developer", Description: "Frontend component/page implementation", BlockedBy: []string{"PLAN-001"}},
		{Subject: "QA-FE-001", Role: "fe-qa", Description: "5-dimension frontend QA", BlockedBy: []string{"DEV-FE-001"}},
	}
}

func fullstackChain(after []string) []TaskSpec {
	return []TaskSpec{
		planTask(after),
		{Subject: "IMPL-001", Role: "executor", Description: "Backend implementation following PLAN-001", BlockedBy: []string{"PLAN-001"}},
		{Subject: "DEV-FE-001", Role: "fe-developer", Description: "Frontend implementation following PLAN-001", BlockedBy: []string{"PLAN-001"}},
		{Subject: "TEST-001", Role: "tester", Description: "Backend test-fix cycles", BlockedBy: []string{"IMPL-001"}},
		{Subject: "QA-FE-001", Role: "fe-qa", Description: "Frontend QA for DEV-FE-001", BlockedBy: []string{"DEV-FE-001"}},
		{Subject: "REVIEW-001", Role: "reviewer", Description: "Full code review (backend + frontend)", BlockedBy: []string{"TEST-001", "QA-FE-001"}},
	}
}

// PipelineTasks returns the task chain a session of a built-in mode holds
// (12 tasks for spec-only, 4 impl-only, 3 fe-only, 6 fullstack, 16
// full-lifecycle, 18 full-lifecycle-fe; in the full-lifecycle modes
// PLAN-001 is blocked by DISCUSS-006). ok is false for any other mode.
func PipelineTasks(mode Mode) (tasks []TaskSpec, ok bool) {
	spec := []string{"DISCUSS-006"}
	switch mode {
	case ModeSpecOnly:
		return specChain(), true
	case ModeImplOnly:
		return implChain(nil), true
	case ModeFEOnly:
		return feChain(nil), true
	case ModeFullstack:
		return fullstackChain(nil), true
	case ModeFullLifecycle:
		return append(specChain(), implChain(spec)...), true
	case ModeFullLifecycleFE:
		return append(specChain(), fullstackChain(spec)...), true
	}
	return nil, false
}

// phase groups a subject for the execution graph by its prefix (RESEARCH,
// DISCUSS, DRAFT, QUALITY: spec; PLAN; IMPL, TEST, REVIEW: BE; DEV-FE,
// QA-FE: FE).
type phase uint8

const (
	phaseSpec phase = iota
	phasePlan
	phaseBackend
	phaseFrontend
	phaseOther
)

func phaseOf(subject string) phase {
	switch {
	case hasAnyPrefix(subject, "RESEARCH", "DISCUSS", "DRAFT", "QUALITY"):
		return phaseSpec
	case strings.HasPrefix(subject, "PLAN"):
		return phasePlan
	case hasAnyPrefix(subject, "IMPL", "TEST", "REVIEW"):
		return phaseBackend
	case hasAnyPrefix(subject, "DEV-FE", "QA-FE"):
		return phaseFrontend
	}
	return phaseOther
}

func hasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
