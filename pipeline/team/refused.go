package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentmcp"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/store"
)

// EventRefused: a story's agent acted beyond its own assignment and was
// refused: a report or status query through the MCP server for another
// assignment, its MCP token used after its stage ended, a result file
// naming another assignment, printed report lines without its
// assignment's id and key (the prompt's example line echoed back among
// them), or what its OS sandbox refused or repaired after it
// (phases.StreamSandbox: a write into a hidden place, such as the main
// checkout, which its sandbox's decoy took; another story's branch moved
// in its private copy of the refs, its HEAD moved off its branch; an
// output flood its driver stopped: "the agent's driver: output: stopped
// the agent: it printed more than ..."), what a gate check's sandbox
// refused of the story's code it ran ("gate check "x" (sandboxed, running
// the story's code): ..."), and files the gates wrote or changed in the
// worktree they verified (they would land unverified). Story, Stage, Worker and
// Assignment are the agent's own; Detail
// says what it tried. Nothing of it was applied. The story's status
// counts them all (StoryStatus.Refused); the events of an assignment's
// own requests stop at ten (the tenth says so), what its driver saw is
// always an event. Each is logged too (Config.Logger, at warn).
const EventRefused EventKind = "refused"

// kindRefused counts each story's refusals (refusedRecord, by story id).
const kindRefused = "team.refused"

type refusedRecord struct {
	Count int64  `json:"count"`
	Last  string `json:"last,omitempty"`
	// Seen is Count when a person last resolved the story (Retry or
	// Resume): what the refusalGate lets land.
	Seen int64 `json:"seen,omitempty"`
	// Kinds are the kinds of refusal seen last (addKind), at most
	// maxRefusalKinds, in the order first seen.
	Kinds []refusalKindRecord `json:"kinds,omitempty"`
}

// refusalKindRecord is a RefusalKind as a story's refusals record keeps
// it, with its kind's key: an FNV-64a hash of refusalKey of the whole
// detail (Detail is clipped, and where a clip falls depends on the
// lengths of what the detail names).
type refusalKindRecord struct {
	Key uint64 `json:"key"`
	RefusalKind
}

// kinds is the record's kinds as the status shows them.
func (r refusedRecord) kinds() []RefusalKind {
	if len(r.Kinds) == 0 {
		return nil
	}
	out := make([]RefusalKind, len(r.Kinds))
	for i, k := range r.Kinds {
		out[i] = k.RefusalKind
	}
	return out
}

// RefusalKind is one kind of attempt a story's agents were refused
// (StoryStatus.RefusedKinds): the refusals whose details differ only in
// what they named (quoted names, paths, numbers, object ids: refusalKey),
// such as every "MCP report for assignment "…", not its own …", or every
// write into one hidden place. Detail is the last one's (clipped to 240
// bytes), Count how many there were, First and Last when the
// first and the last were refused.
type RefusalKind struct {
	Detail string    `json:"detail"`
	Count  int64     `json:"count"`
	First  time.Time `json:"first"`
	Last   time.Time `json:"last"`
}

// maxRefusalKinds bounds the kinds a story's refusals record keeps: the
// kind seen longest ago goes first. A flood of one kind, however its
// details vary in what they name, stays one kind and pushes out none.
const maxRefusalKinds = 8

// maxKindDetail bounds a RefusalKind's Detail: the record is read with
// every change to the story's refusals, and the status view keeps it.
const maxKindDetail = 240

// Patterns refusalKey masks, in its order: a quoted name (Go's %q; one a
// clip cut short runs to the end), a list of them (with its "and N more"), a path (absolute or a ref's), an object id, a number.
var (
	kindQuoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*(?:"|$)`)
	kindList   = regexp.MustCompile(`"…"(?: \(removed\))?(?:, "…"(?: \(removed\))?)*(?: and (?:[0-9]+ )?more)?`)
	kindPath   = regexp.MustCompile(`(?:[A-Za-z0-9._~-]*/[^\s,;:()"']+)+`)
	kindHex    = regexp.MustCompile(`\b[0-9a-f]{7,64}\b`)
	kindNumber = regexp.MustCompile(`[0-9]+`)
)

// refusalKey is the kind of a refusal's detail: the detail without what
// it named (an agent chooses those: a flood of reports for made-up
// assignments, of writes to made-up names, is one kind).
func refusalKey(detail string) string {
	k := kindQuoted.ReplaceAllLiteralString(detail, `"…"`)
	k = kindList.ReplaceAllLiteralString(k, `"…"`)
	k = kindPath.ReplaceAllLiteralString(k, "/…")
	k = kindHex.ReplaceAllLiteralString(k, "#")
	return kindNumber.ReplaceAllLiteralString(k, "0")
}

// addKind counts a refusal with detail at at in r's kinds.
func (r *refusedRecord) addKind(detail string, at time.Time) {
	h := fnv.New64a()
	h.Write([]byte(refusalKey(detail)))
	key := h.Sum64()
	shown := oneLine(detail, maxKindDetail)
	for i := range r.Kinds {
		if k := &r.Kinds[i]; k.Key == key {
			k.Detail, k.Count, k.Last = shown, k.Count+1, at
			return
		}
	}
	if len(r.Kinds) >= maxRefusalKinds {
		oldest := 0
		for i, k := range r.Kinds {
			if k.Last.Before(r.Kinds[oldest].Last) {
				oldest = i
			}
		}
		r.Kinds = slices.Delete(r.Kinds, oldest, oldest+1)
	}
	r.Kinds = append(r.Kinds, refusalKindRecord{Key: key, RefusalKind: RefusalKind{Detail: shown, Count: 1, First: at, Last: at}})
}

// refusalGate is the pipeline's Merger unless Config.LandRefused: a story
// whose agents were refused since a person last resolved it does not
// land; its merge is refused with the refusals as the cause, which pauses
// it at its last stage.
type refusalGate struct {
	next pipeline.Merger
	db   store.Store
}

// Merge implements pipeline.Merger.
func (g refusalGate) Merge(ctx context.Context, r pipeline.MergeRequest) (pipeline.MergeOutcome, error) {
	var rec refusedRecord
	_, found, err := getJSON(ctx, g.db, kindRefused, string(r.Item), &rec)
	if err != nil {
		return pipeline.MergeOutcome{}, err
	}
	if n := rec.Count - rec.Seen; found && n > 0 {
		kinds := ""
		if len(rec.Kinds) > 1 {
			kinds = fmt.Sprintf("; %d kinds of attempt in all, each in the story's status (RefusedKinds)", len(rec.Kinds))
		}
		return pipeline.MergeOutcome{Refused: fmt.Sprintf("its agents were refused %d time(s) since a person last looked (the last: %s%s): "+
			"look at its change (its branch, and what its worktree holds uncommitted: that lands too) and the refusals in the events, then resolve it: Resume lands it as it is "+
			"(a host that lands such stories without asking sets Config.LandRefused: the foreman binary's -land-refused)", n, rec.Last, kinds)}, nil
	}
	return g.next.Merge(ctx, r)
}

// seeRefusals records that a person resolved story with its refusals so
// far in view: the refusalGate lets it land unless more come.
func seeRefusals(ctx context.Context, db store.Store, item foreman.ItemID) error {
	return updateRefused(ctx, db, item, "recording that a person saw the refusals of", func(r *refusedRecord, found bool) bool {
		if !found || r.Seen == r.Count {
			return false
		}
		r.Seen = r.Count
		return true
	})
}

// maxRefusedEvents bounds the EventRefused events of the requests of one
// assignment's agent (MCP reports and queries, result files, printed
// lines) in one process: an agent that keeps trying is counted on, not
// logged on. What its driver saw (phases.StreamSandbox notes, a bounded
// few per execution) is always an event: no agent can push those out
// with cheap requests first.
const maxRefusedEvents = 10

// refusal is one attempt of an assignment's agent beyond the assignment.
type refusal struct {
	Item       foreman.ItemID
	Stage      int
	Worker     foreman.WorkerID
	Assignment foreman.AssignmentID
	Detail     string
	// driver: what the agent's driver saw once it was gone, not a request
	// of the agent's: always an event.
	driver bool
}

// refuse records a refusal: counted in the story's record (which the
// status shows), and an EventRefused: always for what the agent's driver
// saw, while the assignment's requests have had fewer than
// maxRefusedEvents for the rest.
func (t *Team) refuse(ctx context.Context, r refusal) {
	if err := addRefused(context.WithoutCancel(ctx), t.db, r.Item, r.Detail, t.clk.Now()); err != nil {
		t.log.Warn("team: counting a refusal", "story", r.Item, "err", err)
	}
	// The detail holds what the agent chose (a path, a tool's name, a
	// request): the log line and the event carry it in one bounded line,
	// as the story's record does, so a long one cannot swell the event
	// log, its stream and the page.
	detail := oneLine(r.Detail, maxDetail)
	t.log.Warn("team: refused: "+detail, "story", r.Item, "assignment", r.Assignment)
	if !r.driver {
		t.refusedMu.Lock()
		if t.refusedEvents == nil {
			t.refusedEvents = map[foreman.AssignmentID]int{}
		}
		t.refusedEvents[r.Assignment]++
		n := t.refusedEvents[r.Assignment]
		t.refusedMu.Unlock()
		if n > maxRefusedEvents {
			return
		}
		if n == maxRefusedEvents {
			detail += fmt.Sprintf(" (%d refused requests of this assignment; later ones are counted in the story's status only)", n)
		}
	}
	t.events.add(Event{Kind: EventRefused, At: t.clk.Now(), Story: r.Item, Stage: r.Stage, Role: t.role(r.Stage),
		Worker: r.Worker, Assignment: r.Assignment, Outcome: "REFUSED", Detail: detail})
}

// mcpRefused records a request the MCP server refused against the agent
// whose token it carried (agentmcp.Config.OnRefused).
func (t *Team) mcpRefused(ctx context.Context, r agentmcp.Refusal) {
	t.refuse(ctx, refusal{Item: r.By.Item, Stage: r.By.Stage, Worker: r.By.Worker, Assignment: r.By.ID, Detail: r.String()})
}

// watchSandbox records what the agent's OS sandbox refused or repaired
// once the agent was gone (phases.StreamSandbox: agentcmd's "agentcmd:
// sandbox: ..." lines, such as a write into a hidden place's decoy, another
// story's branch moved in the agent's private copy, or its HEAD put back)
// as refusals of the assignment.
func (t *Team) watchSandbox(ctx context.Context, a pipeline.AgentAssignment, onEvent phases.StreamCallback) phases.StreamCallback {
	return func(ev phases.StreamEvent) {
		if ev.Kind == phases.StreamSandbox {
			detail := "the agent's driver: " + ev.Text
			if note, ok := strings.CutPrefix(ev.Text, "agentcmd: sandbox: "); ok {
				detail = "the OS sandbox: " + note
			} else if note, ok := strings.CutPrefix(ev.Text, "agentcmd: "); ok {
				detail = "the agent's driver: " + note
			}
			t.refuse(ctx, refusal{Item: a.Item, Stage: a.Stage, Worker: a.Worker, Assignment: a.Assignment, Detail: detail, driver: true})
		}
		if onEvent != nil {
			onEvent(ev)
		}
	}
}

// addRefused adds one to a story's refusals, refused at at.
func addRefused(ctx context.Context, db store.Store, item foreman.ItemID, detail string, at time.Time) error {
	return updateRefused(ctx, db, item, "counting the refusals of", func(r *refusedRecord, _ bool) bool {
		r.Count++
		r.Last = oneLine(detail, maxDetail)
		r.addKind(detail, at)
		return true
	})
}

// updateRefused changes a story's refusals record with change (which
// says whether to write it): a read-modify-write at the record's version,
// done again on a conflict; what says what it was doing when it gives up.
func updateRefused(ctx context.Context, db store.Store, item foreman.ItemID, what string, change func(r *refusedRecord, found bool) bool) error {
	for range 5 {
		var r refusedRecord
		ver, found, err := getJSON(ctx, db, kindRefused, string(item), &r)
		if err != nil || !change(&r, found) {
			return err
		}
		data, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = db.Apply(ctx, store.Op{Kind: kindRefused, ID: string(item), ExpectVersion: ver, Data: data})
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("team: %s %s: too many conflicts", what, item)
}

// refusedByStory reads every story's refusals.
func refusedByStory(ctx context.Context, db store.Store) (map[foreman.ItemID]refusedRecord, error) {
	recs, err := db.List(ctx, kindRefused)
	if err != nil {
		return nil, err
	}
	out := make(map[foreman.ItemID]refusedRecord, len(recs))
	for _, rec := range recs {
		var r refusedRecord
		if err := json.Unmarshal(rec.Data, &r); err != nil {
			return nil, fmt.Errorf("team: corrupt %s record %q: %w", kindRefused, rec.ID, err)
		}
		out[foreman.ItemID(rec.ID)] = r
	}
	return out, nil
}

// writeRefused adds the stories whose agents were refused to a status
// text: each kind of attempt with its count and when it was first and
// last refused.
func writeRefused(b *strings.Builder, s Status) {
	if s.Refused == 0 {
		return
	}
	fmt.Fprintf(b, "\nRefused: %d attempt(s) of agents beyond their own assignment, none applied\n", s.Refused)
	for _, st := range s.Stories {
		if st.Refused == 0 {
			continue
		}
		if len(st.RefusedKinds) == 0 {
			fmt.Fprintf(b, "  %s: %d, the last: %s\n", st.ID, st.Refused, clip(st.RefusedLast, 120))
			continue
		}
		fmt.Fprintf(b, "  %s: %d, of these kinds (count, first and last refused, the last one's detail):\n", st.ID, st.Refused)
		listed := int64(0)
		for _, k := range st.RefusedKinds {
			listed += k.Count
			fmt.Fprintf(b, "    %dx %s to %s: %s\n", k.Count, when(k.First, s.At), when(k.Last, s.At), k.Detail)
		}
		if n := st.Refused - listed; n > 0 {
			fmt.Fprintf(b, "    and %d earlier of kinds no longer listed\n", n)
		}
	}
}

// when is t as a status text at now shows it: the time of day on now's
// day, else the date too.
func when(t, now time.Time) string {
	if y, m, d := t.Date(); now.Year() == y && now.Month() == m && now.Day() == d {
		return t.Format(time.TimeOnly)
	}
	return t.Format(time.DateTime)
}
