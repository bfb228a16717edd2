package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentforeman/foreman/pipeline/store"
)

// The happy path of every op is one statement whose WHERE clause (or, for
// a create, ON CONFLICT) is the version check; only when it changes no row
// does Apply read the actual version, to report the conflict. A tombstone
// is not in records, so it matches only a create and reads as version 0.
// Deletes, and creates of a deleted record, take a second statement to
// write or drop the tombstone; updates, the common case, take one.
const (
	insertSQL = `INSERT INTO records (kind, id, version, data, updated_at)
		VALUES (?1, ?2, 1 + coalesce((SELECT version FROM tombstones WHERE kind = ?1 AND id = ?2), 0), ?3, ?4)
		ON CONFLICT (kind, id) DO NOTHING
		RETURNING version`
	updateSQL = `UPDATE records SET version = version + 1, data = ?, updated_at = ?
		WHERE kind = ? AND id = ? AND version = ?`
	deleteSQL = `DELETE FROM records WHERE kind = ? AND id = ? AND version = ?`
	// A live record has no tombstone; max() keeps the version from going
	// back should a file edited by hand hold one anyway.
	buryDeletedSQL = `INSERT INTO tombstones (kind, id, version, deleted_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (kind, id) DO UPDATE SET version = max(version, excluded.version), deleted_at = excluded.deleted_at`
	unburySQL  = `DELETE FROM tombstones WHERE kind = ? AND id = ?`
	versionSQL = `SELECT version FROM records WHERE kind = ? AND id = ?`
	// A caller's ops inside a group commit run under a savepoint when there
	// is more than one, so that a conflict undoes that caller's ops only.
	savepointSQL  = `SAVEPOINT apply`
	releaseSQL    = `RELEASE apply`
	rollbackToSQL = `ROLLBACK TO apply`
)

// writeStmts are prepared once on the single writing connection, so that
// a transaction reuses them instead of compiling SQL for every op.
type writeStmts struct {
	insert, update, delete, bury, unbury *sql.Stmt
	savepoint, release, rollbackTo       *sql.Stmt
}

func prepareWrites(ctx context.Context, db *sql.DB) (writeStmts, error) {
	var ws writeStmts
	for _, p := range []struct {
		dst   **sql.Stmt
		query string
	}{
		{&ws.insert, insertSQL}, {&ws.update, updateSQL}, {&ws.delete, deleteSQL},
		{&ws.bury, buryDeletedSQL}, {&ws.unbury, unburySQL},
		{&ws.savepoint, savepointSQL}, {&ws.release, releaseSQL}, {&ws.rollbackTo, rollbackToSQL},
	} {
		stmt, err := db.PrepareContext(ctx, p.query)
		if err != nil {
			return ws, err
		}
		*p.dst = stmt
	}
	return ws, nil
}

// txWriter runs the ops of one Apply in its transaction, binding each
// prepared statement to the transaction on first use. Each method reports
// ok == false when the version check failed and nothing was written.
type txWriter struct {
	ctx      context.Context
	tx       *sql.Tx
	prepared *writeStmts
	bound    writeStmts // the prepared ones bound to tx, nil until used
	nanos    int64
}

func (w *txWriter) bind(st **sql.Stmt, prepared *sql.Stmt) *sql.Stmt {
	if *st == nil {
		*st = w.tx.StmtContext(w.ctx, prepared)
	}
	return *st
}

func (w *txWriter) create(op store.Op) (version int64, ok bool, err error) {
	err = w.bind(&w.bound.insert, w.prepared.insert).QueryRowContext(w.ctx, op.Kind, op.ID, nonNil(op.Data), w.nanos).Scan(&version)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil // ON CONFLICT DO NOTHING: the record exists
	}
	if err != nil {
		return 0, false, err
	}
	if version > 1 { // it continued from a tombstone, which is spent now
		if _, err := w.bind(&w.bound.unbury, w.prepared.unbury).ExecContext(w.ctx, op.Kind, op.ID); err != nil {
			return 0, false, err
		}
	}
	return version, true, nil
}

func (w *txWriter) update(op store.Op) (version int64, ok bool, err error) {
	res, err := w.bind(&w.bound.update, w.prepared.update).ExecContext(w.ctx, nonNil(op.Data), w.nanos, op.Kind, op.ID, op.ExpectVersion)
	if ok, err = changedOne(res, err); !ok || err != nil {
		return 0, ok, err
	}
	return op.ExpectVersion + 1, true, nil
}

func (w *txWriter) delete(op store.Op) (ok bool, err error) {
	res, err := w.bind(&w.bound.delete, w.prepared.delete).ExecContext(w.ctx, op.Kind, op.ID, op.ExpectVersion)
	if ok, err = changedOne(res, err); !ok || err != nil {
		return ok, err
	}
	_, err = w.bind(&w.bound.bury, w.prepared.bury).ExecContext(w.ctx, op.Kind, op.ID, op.ExpectVersion, w.nanos)
	return err == nil, err
}

func changedOne(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (s *Store) conflict(ctx context.Context, tx *sql.Tx, op store.Op) error {
	var actual int64
	err := tx.QueryRowContext(ctx, versionSQL, op.Kind, op.ID).Scan(&actual)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return s.fail("apply", err)
	}
	if actual == op.ExpectVersion {
		// Cannot happen inside one transaction; say so rather than report
		// a conflict that names no difference.
		return fmt.Errorf("sqlitestore: apply %s/%s: write changed no row at the expected version %d", op.Kind, op.ID, actual)
	}
	return &store.ConflictError{Kind: op.Kind, ID: op.ID, Expected: op.ExpectVersion, Actual: actual}
}
