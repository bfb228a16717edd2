package pipeline

import (
	"errors"
	"fmt"
	"strings"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/message"
)

// ErrInvalidFlow is matched by every Flow.Validate failure (a *FlowError).
var ErrInvalidFlow = errors.New("pipeline: invalid flow")

// FlowError is what Flow.Validate finds wrong: in the stage Stage (-1 for
// the flow as a whole), in its Field, with the Reason.
type FlowError struct {
	Stage  int
	Name   string // the stage's name, if any
	Field  string // e.g. "Worker", "Rules[2].Action"; "" for the stage as a whole
	Reason string
}

func (e *FlowError) Error() string {
	var b strings.Builder
	b.WriteString("pipeline: invalid flow: ")
	if e.Stage >= 0 {
		fmt.Fprintf(&b, "stage %d", e.Stage)
		if e.Name != "" {
			fmt.Fprintf(&b, " (%s)", e.Name)
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// Is matches ErrInvalidFlow.
func (e *FlowError) Is(target error) bool { return target == ErrInvalidFlow }

// workerFields are the template fields a worker name may use: the others
// hold report text (which a hostile agent writes) or spaces.
var workerFields = [...]string{"{id}", "{stage}", "{n}", "{next}"}

// workerProblem says why the worker name template tpl cannot name a
// worker, or "". An empty tpl is the default.
func workerProblem(tpl string, stage int) string {
	if tpl == "" {
		return ""
	}
	rest := tpl
	for _, f := range workerFields {
		rest = strings.ReplaceAll(rest, f, "")
	}
	if strings.ContainsAny(rest, "{}") {
		return fmt.Sprintf("%q uses a field other than %s", tpl, strings.Join(workerFields[:], ", "))
	}
	// An item id is a valid id (a letter or digit first, no "..", no "."
	// last), so one sample shows what every item's name looks like.
	s := State{Item: "x1"}
	name := safeID(expand(tpl, &vars{s: &s, stage: stage, n: 1, next: stage}))
	if err := foreman.WorkerID(name).Validate(); err != nil {
		return fmt.Sprintf("%q does not make a worker id: %v", tpl, err)
	}
	return ""
}

// Validate checks that every rule can be carried out and that every
// worker name template makes a valid worker id (empty ones are defaults).
// Its errors are *FlowError.
func (f *Flow) Validate() error {
	bad := func(stage int, field, format string, a ...any) error {
		e := &FlowError{Stage: stage, Field: field, Reason: fmt.Sprintf(format, a...)}
		if stage >= 0 {
			e.Name = f.Stages[stage].Name
		}
		return e
	}
	if len(f.Stages) == 0 {
		return bad(-1, "Stages", "no stages")
	}
	if len(f.Stages) > message.MaxStage+1 {
		return bad(-1, "Stages", "%d stages; stage reports name stages 0..%d", len(f.Stages), message.MaxStage)
	}
	for i, st := range f.Stages {
		if p := workerProblem(f.Worker, i); p != "" {
			return bad(i, "Flow.Worker", "%s", p)
		}
		if p := workerProblem(f.CrashWorker, i); p != "" {
			return bad(i, "Flow.CrashWorker", "%s", p)
		}
		seen := map[Outcome]bool{}
		for j, r := range st.Rules {
			field := fmt.Sprintf("Rules[%d]", j)
			if seen[r.Outcome] {
				return bad(i, field, "outcome %s twice", r.Outcome)
			}
			seen[r.Outcome] = true
			switch r.Action {
			case Advance:
				if i == len(f.Stages)-1 {
					return bad(i, field, "%s advances past the last stage", r.Outcome)
				}
			case Rework:
				if r.Target < 0 || r.Target >= i {
					return bad(i, field, "%s reworks to stage %d, not an earlier one", r.Outcome, r.Target)
				}
			case Retry, Pause, MergeDone:
			default:
				return bad(i, field, "%s has no action", r.Outcome)
			}
			if r.Limit < 0 {
				return bad(i, field, "%s has a negative limit", r.Outcome)
			}
			if p := workerProblem(r.Worker, r.Target); p != "" {
				return bad(i, field+".Worker", "%s", p)
			}
		}
	}
	return nil
}
