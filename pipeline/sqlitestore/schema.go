package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// SchemaVersion is the schema version this build writes and reads.
const SchemaVersion = 2

// migrations()[i] takes the schema from version i to version i+1. Steps are
// only ever appended (and SchemaVersion raised with them); a released step
// is never edited.
func migrations() []string {
	return []string{
		// 0 -> 1: the records table. The primary key index serves Get and the
		// ordered range scan of List; TEXT compares byte-wise (BINARY), which is
		// Go's string order.
		`CREATE TABLE records (
		kind       TEXT    NOT NULL,
		id         TEXT    NOT NULL,
		version    INTEGER NOT NULL CHECK (version >= 1),
		data       BLOB    NOT NULL,
		updated_at INTEGER NOT NULL, -- Unix nanoseconds, UTC
		PRIMARY KEY (kind, id)
	)`,
		// 1 -> 2: tombstones. A delete moves the record's last version here,
		// and creating the record again continues from it, so that versions
		// never repeat for a (kind, id). Keeping them out of records keeps
		// that table the live records only: Get, List and anything that
		// counts records never see a deleted one, and List does not slow
		// down as deletes pile up. Records deleted before this step left no
		// trace: created again, they start over at 1.
		`CREATE TABLE tombstones (
		kind       TEXT    NOT NULL,
		id         TEXT    NOT NULL,
		version    INTEGER NOT NULL CHECK (version >= 1),
		deleted_at INTEGER NOT NULL, -- Unix nanoseconds, UTC
		PRIMARY KEY (kind, id)
	)`,
	}
}

const schemaTable = "foreman_schema"

// migrate brings the database to SchemaVersion inside one immediate
// transaction, so that two processes opening a new file at once cannot both
// create it. A database from a newer schema, or a foreign one, is refused
// untouched.
func migrate(ctx context.Context, db *sql.DB, path string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return classify(path, err)
	}
	defer func() { _ = tx.Rollback() }()

	found, err := readSchemaVersion(ctx, tx, path)
	if err != nil {
		return err
	}
	if found > SchemaVersion {
		return &SchemaVersionError{Path: path, Found: found, Supported: SchemaVersion}
	}
	if found == SchemaVersion {
		return nil
	}
	if found == 0 {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE `+schemaTable+` (
			id      INTEGER PRIMARY KEY CHECK (id = 1),
			version INTEGER NOT NULL
		)`); err != nil {
			return classify(path, err)
		}
	}
	steps := migrations()
	for v := found; v < SchemaVersion; v++ {
		if _, err := tx.ExecContext(ctx, steps[v]); err != nil {
			return fmt.Errorf("sqlitestore: migrating %s to schema version %d: %w", path, v+1, classify(path, err))
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+schemaTable+` (id, version) VALUES (1, ?)
		ON CONFLICT (id) DO UPDATE SET version = excluded.version`, SchemaVersion); err != nil {
		return classify(path, err)
	}
	return classify(path, tx.Commit())
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readSchemaVersion returns 0 for an empty database, and refuses one that
// has tables but no schema table.
func readSchemaVersion(ctx context.Context, q querier, path string) (int, error) {
	var tables int
	var haveSchema bool
	err := q.QueryRowContext(ctx, `SELECT count(*), coalesce(max(name = ?), 0)
		FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\'`, schemaTable).Scan(&tables, &haveSchema)
	if err != nil {
		return 0, classify(path, err)
	}
	if !haveSchema {
		if tables > 0 {
			return 0, fmt.Errorf("%w: %s has %d tables but no %s table", ErrForeignDatabase, path, tables, schemaTable)
		}
		return 0, nil
	}
	var version int
	err = q.QueryRowContext(ctx, `SELECT version FROM `+schemaTable+` WHERE id = 1`).Scan(&version)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, &CorruptError{Path: path, Err: fmt.Errorf("%s table has no row", schemaTable)}
	}
	if err != nil {
		return 0, classify(path, err)
	}
	return version, nil
}

// quickCheck runs SQLite's quick_check, which reads every page: a damaged
// file is reported at Open rather than at the first unlucky read.
func quickCheck(ctx context.Context, db *sql.DB, path string) error {
	rows, err := db.QueryContext(ctx, `PRAGMA quick_check(8)`)
	if err != nil {
		return classify(path, err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return classify(path, err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return classify(path, err)
	}
	if len(problems) > 0 {
		return &CorruptError{Path: path, Err: fmt.Errorf("quick_check: %v", problems)}
	}
	return nil
}
