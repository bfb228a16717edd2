package teamcore

import (
	"context"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/store"
)

// KindBoard is the store kind of the board's entries, by story id.
const KindBoard = "team.board"

// StoreBoard is the team's pipeline.Board, one record per story in a
// store. It has two writers, the stage runner (Verified: the claim it
// checked) and the flow (SetStatus); each change is a read-modify-write
// at the record's version, done again when the other wrote in between,
// so that neither loses the other's field (a plain overwrite could put
// back a stale Tasks or Status) and neither fails on the other's write.
type StoreBoard struct{ DB store.Store }

func (b StoreBoard) get(ctx context.Context, item foreman.ItemID) (Board, int64, error) {
	var r Board
	ver, err := GetRecord(ctx, b.DB, KindBoard, string(item), &r)
	return r, ver, err
}

// update changes a story's entry; change returns false to write nothing.
func (b StoreBoard) update(ctx context.Context, item foreman.ItemID, change func(*Board) bool) error {
	return UpdateRecord(ctx, b.DB, KindBoard, string(item), change)
}

// Story implements pipeline.Board.
func (b StoreBoard) Story(ctx context.Context, item foreman.ItemID) (pipeline.BoardStory, error) {
	r, ver, err := b.get(ctx, item)
	if err != nil || ver == 0 {
		return pipeline.BoardStory{}, err
	}
	return pipeline.BoardStory{Found: true, Status: r.Status, Tasks: r.Tasks}, nil
}

// SetStatus implements pipeline.Board.
func (b StoreBoard) SetStatus(ctx context.Context, item foreman.ItemID, status string) error {
	return b.update(ctx, item, func(r *Board) bool {
		r.Status = status
		return true
	})
}

// Verified records what a stage's report claims once the stage's evidence
// was checked (BoardAfterReport decides the entry; nothing is written
// when the report needs no board or the entry says it already).
func (b StoreBoard) Verified(ctx context.Context, flow *pipeline.Flow, item foreman.ItemID, r message.Report) error {
	return b.update(ctx, item, func(cur *Board) bool {
		next, ok := BoardAfterReport(flow, r, *cur)
		if !ok || next == *cur {
			return false
		}
		*cur = next
		return true
	})
}
