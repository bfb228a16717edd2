package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

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
// the agent: it printed more than ..."). Story, Stage, Worker and
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
		return pipeline.MergeOutcome{Refused: fmt.Sprintf("its agents were refused %d time(s) since a person last looked (the last: %s): "+
			"look at its branch's change and the refusals in the events, then resolve it: Resume lands it as it is "+
			"(a host that lands such stories without asking sets Config.LandRefused: the foreman binary's -land-refused)", n, rec.Last)}, nil
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
	t.log.Warn("team: refused: "+r.Detail, "story", r.Item, "assignment", r.Assignment)
	if err := addRefused(context.WithoutCancel(ctx), t.db, r.Item, r.Detail); err != nil {
		t.log.Warn("team: counting a refusal", "story", r.Item, "err", err)
	}
	detail := r.Detail
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

// addRefused adds one to a story's refusals.
func addRefused(ctx context.Context, db store.Store, item foreman.ItemID, detail string) error {
	return updateRefused(ctx, db, item, "counting the refusals of", func(r *refusedRecord, _ bool) bool {
		r.Count++
		r.Last = oneLine(detail, maxDetail)
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
// text.
func writeRefused(b *strings.Builder, s Status) {
	if s.Refused == 0 {
		return
	}
	fmt.Fprintf(b, "\nRefused: %d attempt(s) of agents beyond their own assignment, none applied\n", s.Refused)
	for _, st := range s.Stories {
		if st.Refused > 0 {
			fmt.Fprintf(b, "  %s: %d, the last: %s\n", st.ID, st.Refused, clip(st.RefusedLast, 120))
		}
	}
}
