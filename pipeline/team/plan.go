package team

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
)

// PlanExample is a complete stories file: every field the format has.
const PlanExample = `# stories.yaml: the plan a team works through.
# Optional team settings (command-line flags override them):
workers: 2                     # stories in flight at once
# gates: checks every story's work must pass, run in its worktree. They are
# commands the host runs, with no agent involved: a stories file with gates
# is code, and its gates run only when the host consents (foreman
# -trust-plan-gates); otherwise give your own (foreman -gate).
gates:
  - name: vet
    level: L0                  # L0 contracts, L1 tests, L2 black-box, L3 CI (default L1)
    argv: [go, vet, ./...]
  - name: test
    argv: [go, test, ./...]
    timeout: 10m               # default 10m
    env: [CGO_ENABLED=0]       # added to the environment
# The stories: id (letters, digits, . _ -; at most 48), title (one line,
# the squash commit's subject), body (what the agent reads) and after
# (the stories that must be merged first).
stories:
  - id: US-001
    title: Parse the config file
    body: |
      Add config.Parse(r io.Reader) (Config, error) reading the TOML
      format in docs/config.md. Unknown keys are an error naming the line.
  - id: US-002
    title: Reload the config on SIGHUP
    body: |
      On SIGHUP, parse the config file again and swap it in atomically;
      a bad file keeps the old config and logs why.
    after: [US-001]
`

// MaxPlanBytes bounds a stories file: a plan is a few kilobytes; anything
// near this size is not one.
const MaxPlanBytes = 4 << 20

// ErrInvalidPlan is matched by *PlanError.
var ErrInvalidPlan = errors.New("team: invalid plan")

// PlanError says what is wrong with a stories file and where: File (when
// read by LoadPlan), Line (1-based; 0 when unknown), the story it concerns
// and why. Err is the underlying error, when there is one (a *StoryError,
// a YAML syntax error, a dependency cycle).
type PlanError struct {
	File   string
	Line   int
	Story  foreman.ItemID
	Reason string
	Err    error
}

func (e *PlanError) Error() string {
	var b strings.Builder
	b.WriteString("team: plan")
	if e.File != "" {
		b.WriteString(" " + e.File)
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, ", line %d", e.Line)
	}
	if e.Story != "" {
		fmt.Fprintf(&b, ", story %q", e.Story)
	}
	b.WriteString(": " + e.Reason)
	return b.String()
}

// Is matches ErrInvalidPlan.
func (e *PlanError) Is(target error) bool { return target == ErrInvalidPlan }

// Unwrap returns the underlying error, if any.
func (e *PlanError) Unwrap() error { return e.Err }

// Plan is a stories file, read by ParsePlan: the stories in file order and
// the team settings it gives. Zero settings mean the file gave none.
type Plan struct {
	Stories []Story
	// Workers is how many stories are in flight at once (Config.Workers).
	Workers int
	// UntrustedGates is the file's gate plan, its checks grouped by level
	// in the order phases.Levels runs them. Each check is a command the
	// host would run in every story's worktree, with no agent involved:
	// a stories file with gates is code, however much it looks like data,
	// and whoever wrote the file (an issue tracker's stranger, a pull
	// request) would run commands on the host. Put them in Config.Gates
	// only when the person running the host consented (the reference
	// binary's -trust-plan-gates); GatesNeedConsent says what to ask.
	UntrustedGates phases.GatePlan
}

// ErrPlanGates is matched by *PlanGatesError.
var ErrPlanGates = errors.New("team: the stories file has gates, commands it asks this host to run")

// PlanGatesError is a stories file's gates a host has not consented to
// run, each named with its command.
type PlanGatesError struct {
	Checks []phases.GateCheck
}

func (e *PlanGatesError) Error() string {
	names := make([]string, len(e.Checks))
	for i, c := range e.Checks {
		names[i] = fmt.Sprintf("%q (%s)", c.Name, strings.Join(c.Argv, " "))
	}
	return fmt.Sprintf("team: the stories file has gates, commands this host would run in every story's worktree: %s; "+
		"a stories file with gates is code: run them only if you trust whoever wrote the file", strings.Join(names, ", "))
}

// Is matches ErrPlanGates.
func (e *PlanGatesError) Is(target error) bool { return target == ErrPlanGates }

// GatesNeedConsent returns nil when the file has no gates, and otherwise a
// *PlanGatesError (matching ErrPlanGates) naming each gate and its
// command: what a host shows the person whose consent it needs before it
// runs UntrustedGates.
func (p Plan) GatesNeedConsent() error {
	var checks []phases.GateCheck
	for _, l := range p.UntrustedGates.Levels {
		checks = append(checks, l.Checks...)
	}
	if len(checks) == 0 {
		return nil
	}
	return &PlanGatesError{Checks: checks}
}

// planFile is the YAML shape of a stories file.
type planFile struct {
	Workers *int         `yaml:"workers"`
	Gates   []gateFile   `yaml:"gates"`
	Stories []*storyFile `yaml:"stories"`
}

type gateFile struct {
	Name    string        `yaml:"name"`
	Level   string        `yaml:"level"`
	Argv    []string      `yaml:"argv"`
	Timeout time.Duration `yaml:"timeout"`
	Env     []string      `yaml:"env"`
}

type storyFile struct {
	ID    foreman.ItemID   `yaml:"id"`
	Title string           `yaml:"title"`
	Body  string           `yaml:"body"`
	After []foreman.ItemID `yaml:"after"`
}

// LoadPlan reads the stories file at path (see ParsePlan); its errors
// name the file.
func LoadPlan(path string) (Plan, error) {
	f, err := os.Open(path)
	if err != nil {
		return Plan{}, err
	}
	defer f.Close()
	p, err := ParsePlan(f)
	if pe := (*PlanError)(nil); errors.As(err, &pe) {
		pe.File = path
	}
	return p, err
}

// ParsePlan reads a stories file: YAML holding a list of stories (id,
// title, body, after) and, optionally, the team's workers and gate checks;
// PlanExample shows every field. The file's gates are kept apart, in
// Plan.UntrustedGates: they are commands the host would run, so a stories
// file with gates is code, and a host runs them only with consent
// (Plan.GatesNeedConsent). A bad file is a *PlanError (matching
// ErrInvalidPlan) with the line: a YAML syntax error, an unknown field, a
// field of the wrong type, a story that Add would refuse (invalid id, empty
// or multi-line title), a duplicate id, an after naming a story that is not
// in the file, a dependency cycle, a gate without argv or with an unknown
// level, no stories at all.
func ParsePlan(r io.Reader) (Plan, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxPlanBytes+1))
	if err != nil {
		return Plan{}, err
	}
	if len(data) > MaxPlanBytes {
		return Plan{}, &PlanError{Reason: fmt.Sprintf("larger than %d bytes", MaxPlanBytes)}
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return Plan{}, &PlanError{Reason: "empty; it needs a list of stories (see the example in the documentation)"}
	} else if err != nil {
		return Plan{}, yamlError(err, data)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return Plan{}, &PlanError{Line: extra.Line, Reason: "a second YAML document (---); a stories file holds one"}
	} else if !errors.Is(err, io.EOF) {
		return Plan{}, yamlError(err, data)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return Plan{}, &PlanError{Line: root.Line, Reason: "the file must be a mapping with a stories list (stories: [...])"}
	}
	var pf planFile
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	if err := strict.Decode(&pf); err != nil {
		return Plan{}, yamlError(err, data)
	}
	lines := planLines(root)
	return pf.plan(lines)
}

// yamlLine finds the line number the YAML library puts in its messages.
var yamlLine = regexp.MustCompile(`line (\d+)`)

// yamlError turns the YAML library's error into a *PlanError carrying the
// first line it names (and a hint when that line is indented with a tab,
// which the library reports only as a character that cannot start a token).
func yamlError(err error, data []byte) *PlanError {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = strings.Join(te.Errors, "; ")
	}
	msg = unknownField.ReplaceAllStringFunc(msg, func(m string) string {
		sub := unknownField.FindStringSubmatch(m)
		return fmt.Sprintf("unknown field %q (%s)", sub[1], knownFields[sub[2]])
	})
	pe := &PlanError{Reason: goTypeNames.Replace(strings.TrimPrefix(msg, "yaml: ")), Err: err}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		pe.Line, _ = strconv.Atoi(m[1])
		pe.Reason = strings.TrimSpace(strings.TrimPrefix(strings.Replace(pe.Reason, m[0], "", 1), ":"))
		if lines := bytes.Split(data, []byte("\n")); pe.Line >= 1 && pe.Line <= len(lines) && bytes.Contains(lines[pe.Line-1], []byte("\t")) {
			pe.Reason += " (the line holds a tab: YAML indents with spaces)"
		}
	}
	return pe
}

// unknownField is the YAML library's message for a field the struct has
// not, which names the Go type; knownFields says what the file may hold.
var unknownField = regexp.MustCompile(`field (\S+) not found in type (\S+)`)

var knownFields = map[string]string{
	"team.planFile":  "a stories file has workers, gates, stories",
	"team.storyFile": "a story has id, title, body, after",
	"team.gateFile":  "a gate has name, level, argv, timeout, env",
}

// goTypeNames puts the YAML library's Go type names in the file's words.
var goTypeNames = strings.NewReplacer(
	"[]*team.storyFile", "a list of stories",
	"team.storyFile", "a story",
	"[]team.gateFile", "a list of gates",
	"team.gateFile", "a gate",
	"team.planFile", "a stories file",
	"[]foreman.ItemID", "a list of story ids",
	"foreman.ItemID", "a story id",
	"time.Duration", "a duration (such as 90s or 10m)",
	"[]string", "a list of strings",
)

// lineMap holds where things are in the file, for the errors the YAML
// library cannot report: stories[i] and its fields, gates[i].
type lineMap struct {
	stories []map[string]int // "" is the story's own line
	gates   []map[string]int
	key     map[string]int // top-level keys
}

func planLines(root *yaml.Node) lineMap {
	lm := lineMap{key: map[string]int{}}
	items := func(seq *yaml.Node) []map[string]int {
		if seq.Kind != yaml.SequenceNode {
			return nil
		}
		out := make([]map[string]int, len(seq.Content))
		for i, it := range seq.Content {
			m := map[string]int{"": it.Line}
			if it.Kind == yaml.MappingNode {
				for j := 0; j+1 < len(it.Content); j += 2 {
					m[it.Content[j].Value] = it.Content[j+1].Line
				}
			}
			out[i] = m
		}
		return out
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		lm.key[k.Value] = k.Line
		switch k.Value {
		case "stories":
			lm.stories = items(v)
		case "gates":
			lm.gates = items(v)
		}
	}
	return lm
}

func at(lines []map[string]int, i int, field string) int {
	if i >= len(lines) {
		return 0
	}
	if l, ok := lines[i][field]; ok {
		return l
	}
	return lines[i][""]
}

// levelNames reads a gate's level as a person writes it.
var levelNames = map[string]phases.Level{
	"l0": phases.L0Contracts, "contracts": phases.L0Contracts,
	"l1": phases.L1Tests, "tests": phases.L1Tests,
	"l2": phases.L2BlackBox, "black-box": phases.L2BlackBox, "blackbox": phases.L2BlackBox,
	"l3": phases.L3CI, "ci": phases.L3CI,
}

func (pf planFile) plan(lines lineMap) (Plan, error) {
	var p Plan
	if pf.Workers != nil {
		if *pf.Workers < 1 {
			return Plan{}, &PlanError{Line: lines.key["workers"], Reason: fmt.Sprintf("workers is %d; at least 1", *pf.Workers)}
		}
		p.Workers = *pf.Workers
	}
	gates, err := pf.gatePlan(lines)
	if err != nil {
		return Plan{}, err
	}
	p.UntrustedGates = gates
	if len(pf.Stories) == 0 {
		return Plan{}, &PlanError{Line: lines.key["stories"], Reason: "no stories (a stories: list with at least one)"}
	}
	index := map[foreman.ItemID]int{}
	specs := make([]taskgraph.TaskSpec, 0, len(pf.Stories))
	for i, sf := range pf.Stories {
		if sf == nil {
			return Plan{}, &PlanError{Line: at(lines.stories, i, ""), Reason: fmt.Sprintf("story %d is empty", i+1)}
		}
		s := Story{ID: sf.ID, Title: sf.Title, Body: sf.Body, After: sf.After}
		if s.ID == "" {
			return Plan{}, &PlanError{Line: at(lines.stories, i, ""), Reason: fmt.Sprintf("story %d has no id", i+1), Err: ErrInvalidStory}
		}
		if err := s.validate(); err != nil {
			var se *StoryError
			errors.As(err, &se)
			return Plan{}, &PlanError{Line: at(lines.stories, i, storyField(s, se.Reason)), Story: s.ID, Reason: se.Reason, Err: err}
		}
		if j, dup := index[s.ID]; dup {
			return Plan{}, &PlanError{Line: at(lines.stories, i, "id"), Story: s.ID,
				Reason: fmt.Sprintf("id already used by story %d (line %d)", j+1, at(lines.stories, j, "id")), Err: ErrInvalidStory}
		}
		index[s.ID] = i
		p.Stories = append(p.Stories, s)
		specs = append(specs, taskSpec(s))
	}
	// The same check Add makes: blockers exist, no cycle.
	if _, err := taskgraph.NewGraph([]string{storyRole}, specs...); err != nil {
		pe := &PlanError{Reason: err.Error(), Err: errors.Join(ErrInvalidStory, err)}
		var ub *taskgraph.UnknownBlockerError
		var ce *taskgraph.CycleError
		switch {
		case errors.As(err, &ub):
			pe.Story = foreman.ItemID(ub.Task)
			pe.Line = at(lines.stories, index[pe.Story], "after")
			pe.Reason = fmt.Sprintf("after names %q, which is not a story of this file", ub.Blocker)
		case errors.As(err, &ce) && len(ce.Cycle) > 0:
			pe.Story = foreman.ItemID(ce.Cycle[0])
			pe.Line = at(lines.stories, index[pe.Story], "after")
			pe.Reason = "dependency cycle: " + strings.Join(append(ce.Cycle, ce.Cycle[0]), " after ")
		}
		return Plan{}, pe
	}
	return p, nil
}

// storyField guesses which field of a story a validation reason is about,
// to point at its line.
func storyField(s Story, reason string) string {
	switch {
	case strings.HasPrefix(reason, "title"):
		return "title"
	case strings.Contains(reason, "After") || strings.Contains(reason, "after itself"):
		return "after"
	case s.ID == "" || strings.HasPrefix(reason, "id"):
		return "id"
	}
	return "id"
}

// gatePlan groups the file's gate checks by level, in run order.
func (pf planFile) gatePlan(lines lineMap) (phases.GatePlan, error) {
	byLevel := map[phases.Level][]phases.GateCheck{}
	names := map[string]int{}
	for i, g := range pf.Gates {
		bad := func(field, format string, args ...any) error {
			return &PlanError{Line: at(lines.gates, i, field), Reason: fmt.Sprintf("gate %d: ", i+1) + fmt.Sprintf(format, args...)}
		}
		if len(g.Argv) == 0 || strings.TrimSpace(g.Argv[0]) == "" {
			return phases.GatePlan{}, bad("argv", "argv is empty; it is the command, as a list: [go, test, ./...]")
		}
		level := phases.L1Tests
		if g.Level != "" {
			l, ok := levelNames[strings.ToLower(strings.TrimSpace(g.Level))]
			if !ok {
				return phases.GatePlan{}, bad("level", "level %q is not one of L0 (contracts), L1 (tests), L2 (black-box), L3 (ci)", g.Level)
			}
			level = l
		}
		if g.Timeout < 0 {
			return phases.GatePlan{}, bad("timeout", "timeout %s is negative", g.Timeout)
		}
		for _, kv := range g.Env {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				return phases.GatePlan{}, bad("env", "env entry %q is not KEY=VALUE", kv)
			}
		}
		name := g.Name
		if name == "" {
			name = strings.Join(g.Argv, " ")
		}
		if j, dup := names[name]; dup {
			return phases.GatePlan{}, bad("name", "name %q already used by gate %d", name, j+1)
		}
		names[name] = i
		byLevel[level] = append(byLevel[level], phases.GateCheck{Name: name, Argv: g.Argv, Timeout: g.Timeout, Env: g.Env})
	}
	var plan phases.GatePlan
	for _, l := range phases.Levels() {
		if checks := byLevel[l]; len(checks) > 0 {
			plan.Levels = append(plan.Levels, phases.GateLevel{Level: l, Checks: checks})
		}
	}
	return plan, nil
}
