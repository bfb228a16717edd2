package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/team/internal/teamcore"
)

// Store kinds of the team's own records (the layers keep theirs: kind
// pipeline.RecordKind per story, taskgraph.RecordKind for the graph).
const (
	kindStory    = "team.story"       // storyRecord, by story id
	kindBoard    = teamcore.KindBoard // boardRecord, by story id
	kindBase     = "team.base"        // phases.BeforeState, by assignment id
	kindDecision = "team.decision"    // decision, by story id
	kindMemory   = "team.memory"      // memory, by story id
	kindTriage   = "team.triage"      // triageRecord, by story id
	// kindSession (sessions.go): sessionRecord, by assignment id.
)

// graphSession is the id of the team's task graph session.
const graphSession = teamcore.GraphSession

// storyRole is the task graph role of every story.
const storyRole = teamcore.StoryRole

// boardRecord is the team's board entry for a story: the stage runner
// writes what it verified, and the flow's board checks read it.
type boardRecord = teamcore.Board

// memory is what the next worker of a story is told about earlier
// rounds: the quality gate's full feedback.
type memory struct {
	GateFeedback string `json:"gateFeedback,omitempty"`
	// WorkerCause is what the worker pool last said went wrong with the
	// story's worker (stalled, dead, failed, rate-limited, waiting for a
	// person), so that a crash escalation carries its cause.
	WorkerCause string `json:"workerCause,omitempty"`
	// Verified is the change the last passing build verified with the gate
	// plan: measured from Base, its content was DiffHash.
	Verified *verifiedChange `json:"verified,omitempty"`
	// OpenBuild is where the build stage's current visit started: the
	// base of its first assignment, kept for the assignments after it
	// that a crash, a stall or a person's Retry start while no build has
	// passed, so that the work already on the story's branch counts;
	// cleared when a build passes (a rework measures from its own start).
	OpenBuild *phases.BeforeState `json:"openBuild,omitempty"`
	// Conflict is the last merge conflict conflict triage gave back to the
	// builder: the files and both sides (bounded), for its prompt.
	Conflict string `json:"conflict,omitempty"`
}

// verifiedChange identifies a change the gate plan passed on.
type verifiedChange struct {
	Base     phases.BeforeState `json:"base"`
	DiffHash string             `json:"diffHash"`
}

// getJSON reads one record into v; found is false when it does not exist.
func getJSON(ctx context.Context, db store.Store, kind, id string, v any) (version int64, found bool, err error) {
	rec, err := db.Get(ctx, kind, id)
	if errors.Is(err, store.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if err := json.Unmarshal(rec.Data, v); err != nil {
		return 0, false, fmt.Errorf("team: corrupt %s record %q: %w", kind, id, err)
	}
	return rec.Version, true, nil
}

// putJSON writes v over whatever version of the record is there, retrying
// on a conflict (the team's records have one writer per key at a time;
// a conflict means a concurrent write of the same fact).
func putJSON(ctx context.Context, db store.Store, kind, id string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	for range 5 {
		ver := int64(0)
		rec, err := db.Get(ctx, kind, id)
		switch {
		case err == nil:
			ver = rec.Version
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		_, err = db.Apply(ctx, store.Op{Kind: kind, ID: id, ExpectVersion: ver, Data: data})
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("team: writing %s record %q: too many conflicts", kind, id)
}

// updateMemory changes one field or another of a story's memory: a
// read-modify-write at the record's version, done again when another
// writer (the worker pool's cause, a stage's result) wrote in between, so
// that neither overwrites the other's field.
func updateMemory(ctx context.Context, db store.Store, item foreman.ItemID, change func(*memory)) error {
	return teamcore.UpdateRecord(ctx, db, kindMemory, string(item), func(m *memory) bool {
		change(m)
		return true
	})
}

// storeBoard is the pipeline.Board the team keeps in its store (one
// implementation with the simulator's: teamcore.StoreBoard).
func storeBoard(db store.Store) teamcore.StoreBoard { return teamcore.StoreBoard{DB: db} }
