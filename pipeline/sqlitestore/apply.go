package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentforeman/foreman/pipeline/store"
)

// The happy path of every op is one statement whose WHERE clause is the
// version check; only when it changes no row does Apply read the actual
// version, to report the conflict.
const (
	insertSQL = `INSERT INTO records (kind, id, version, data, updated_at) VALUES (?, ?, 1, ?, ?)
		ON CONFLICT (kind, id) DO NOTHING`
	updateSQL = `UPDATE records SET version = version + 1, data = ?, updated_at = ?
		WHERE kind = ? AND id = ? AND version = ?`
	deleteSQL  = `DELETE FROM records WHERE kind = ? AND id = ? AND version = ?`
	versionSQL = `SELECT version FROM records WHERE kind = ? AND id = ?`
)

// writeStmts are prepared once on the single writing connection, so that
// a transaction reuses them instead of compiling SQL for every op.
type writeStmts struct {
	insert, update, delete *sql.Stmt
}

func prepareWrites(ctx context.Context, db *sql.DB) (writeStmts, error) {
	var ws writeStmts
	for _, p := range []struct {
		dst   **sql.Stmt
		query string
	}{{&ws.insert, insertSQL}, {&ws.update, updateSQL}, {&ws.delete, deleteSQL}} {
		stmt, err := db.PrepareContext(ctx, p.query)
		if err != nil {
			return ws, err
		}
		*p.dst = stmt
	}
	return ws, nil
}

// Apply implements store.Store: one immediate transaction, committed with a
// full fsync of the WAL, or rolled back on the first conflict.
func (s *Store) Apply(ctx context.Context, ops ...store.Op) ([]store.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.ValidateOps(ops); err != nil {
		return nil, err
	}
	leave, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	if s.readOnly {
		return nil, ErrReadOnly
	}
	if len(ops) == 0 {
		return []store.Record{}, nil
	}
	nanos := s.clock.Now().UnixNano()
	now := fromNanos(nanos)

	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return nil, s.fail("begin", err)
	}
	defer func() { _ = tx.Rollback() }()

	var insert, update, del *sql.Stmt // bound to tx on first use
	bind := func(st **sql.Stmt, prepared *sql.Stmt) *sql.Stmt {
		if *st == nil {
			*st = tx.StmtContext(ctx, prepared)
		}
		return *st
	}
	out := make([]store.Record, len(ops))
	for i, op := range ops {
		var res sql.Result
		var err error
		switch {
		case op.Delete:
			res, err = bind(&del, s.stmts.delete).ExecContext(ctx, op.Kind, op.ID, op.ExpectVersion)
		case op.ExpectVersion == 0:
			res, err = bind(&insert, s.stmts.insert).ExecContext(ctx, op.Kind, op.ID, nonNil(op.Data), nanos)
		default:
			res, err = bind(&update, s.stmts.update).ExecContext(ctx, nonNil(op.Data), nanos, op.Kind, op.ID, op.ExpectVersion)
		}
		if err != nil {
			return nil, s.fail("apply", err)
		}
		changed, err := res.RowsAffected()
		if err != nil {
			return nil, s.fail("apply", err)
		}
		if changed != 1 {
			return nil, s.conflict(ctx, tx, op)
		}
		out[i] = store.Record{Kind: op.Kind, ID: op.ID, UpdatedAt: now}
		if !op.Delete {
			out[i].Version = op.ExpectVersion + 1
			out[i].Data = append([]byte{}, op.Data...)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, s.fail("commit", err)
	}
	return out, nil
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
