package teamcore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentforeman/foreman/pipeline/store"
)

// GetRecord reads one record into v; version 0 when it does not exist.
func GetRecord(ctx context.Context, db store.Store, kind, id string, v any) (int64, error) {
	rec, err := db.Get(ctx, kind, id)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if err := json.Unmarshal(rec.Data, v); err != nil {
		return 0, fmt.Errorf("team: corrupt %s record %q: %w", kind, id, err)
	}
	return rec.Version, nil
}

// UpdateRecord changes one record of the team's: a read-modify-write at
// the record's version, done again when another writer wrote in between
// (so that neither loses the other's field); change returns false to
// write nothing.
func UpdateRecord[T any](ctx context.Context, db store.Store, kind, id string, change func(*T) bool) error {
	for range 5 {
		var v T
		ver, err := GetRecord(ctx, db, kind, id, &v)
		if err != nil {
			return err
		}
		if !change(&v) {
			return nil
		}
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		_, err = db.Apply(ctx, store.Op{Kind: kind, ID: id, ExpectVersion: ver, Data: data})
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("team: updating %s record %q: too many conflicts", kind, id)
}
