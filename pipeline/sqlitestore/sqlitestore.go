package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/pipeline/store"
)

// Options configures Open. The zero value means the documented defaults.
type Options struct {
	// Clock stamps UpdatedAt. Default: the wall clock.
	Clock foreman.Clock
	// BusyTimeout is how long a statement waits for a lock held by another
	// connection or process before failing with SQLITE_BUSY. Default: 5 s.
	BusyTimeout time.Duration
	// ReadConns caps the pool of reading connections. Default: 4.
	ReadConns int
	// ReadOnly opens an existing database for reading only, the way a
	// status command reads while a coordinator writes: no writing
	// connection, no migration, and Apply fails with ErrReadOnly. The
	// database must already have the current schema. Default: false
	// (read and write).
	ReadOnly bool
	// SkipQuickCheck skips PRAGMA quick_check at Open. The check reads the
	// whole file (milliseconds for a pipeline's state, longer for a huge
	// one) so that corruption is reported at Open as a *CorruptError.
	// Default: false (the check runs).
	SkipQuickCheck bool
}

const (
	defaultBusyTimeout = 5 * time.Second
	defaultReadConns   = 4
)

// Store is the SQLite implementation of store.Store. It is safe for
// concurrent use. Writes go through one connection, in immediate
// transactions; reads use a separate pool and, thanks to WAL, never wait
// for the writer.
type Store struct {
	path     string
	clock    clock.Clock
	readOnly bool

	// mu is held shared by every call for its whole duration and
	// exclusively by Close, so that Close never pulls a connection from
	// under a running call.
	mu     sync.RWMutex
	closed bool
	writer *sql.DB // nil when read-only
	stmts  writeStmts
	reader *sql.DB
	// group queues concurrent Apply calls into shared commits.
	group  *applyQueue
	writes writeCounters
}

var _ store.Store = (*Store)(nil)

// Open opens the database at path, creating it (and its schema) when the
// file is missing or empty, and migrating an older schema forward. It
// refuses, leaving the file untouched, a database from a newer schema
// (*SchemaVersionError), a SQLite database that is not Foreman's
// (ErrForeignDatabase) and a damaged file (*CorruptError).
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("sqlitestore: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	if opts.ReadOnly {
		if _, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("sqlitestore: read-only open: %w", err)
		}
	}
	s := &Store{path: abs, clock: clock.OrReal(opts.Clock), readOnly: opts.ReadOnly}
	s.group = newApplyQueue(s)
	if err := s.open(ctx, opts); err != nil {
		s.closeDBs()
		return nil, err
	}
	return s, nil
}

func (s *Store) open(ctx context.Context, opts Options) error {
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = defaultBusyTimeout
	}
	readConns := opts.ReadConns
	if readConns <= 0 {
		readConns = defaultReadConns
	}
	if !opts.ReadOnly {
		writer, err := sql.Open("sqlite", dsn(s.path, busy, false))
		if err != nil {
			return fmt.Errorf("sqlitestore: %w", err)
		}
		// One writing connection: SQLite has one writer at a time anyway,
		// and queueing in Go (honouring ctx) beats spinning on the lock.
		writer.SetMaxOpenConns(1)
		writer.SetMaxIdleConns(1)
		writer.SetConnMaxLifetime(0)
		writer.SetConnMaxIdleTime(0)
		s.writer = writer
		if err := migrateWhenFree(ctx, writer, s.path, busy); err != nil {
			return err
		}
		if s.stmts, err = prepareWrites(ctx, writer); err != nil {
			return s.fail("prepare", err)
		}
	}
	reader, err := sql.Open("sqlite", dsn(s.path, busy, true))
	if err != nil {
		return fmt.Errorf("sqlitestore: %w", err)
	}
	reader.SetMaxOpenConns(readConns)
	reader.SetMaxIdleConns(readConns)
	s.reader = reader
	found, err := readSchemaVersion(ctx, reader, s.path)
	if err != nil {
		return err
	}
	if found != SchemaVersion {
		return &SchemaVersionError{Path: s.path, Found: found, Supported: SchemaVersion}
	}
	if !opts.SkipQuickCheck {
		return quickCheck(ctx, reader, s.path)
	}
	return nil
}

// migrateWhenFree migrates, trying again for up to busy while the file is
// locked. The first connections to a new file race to turn WAL on, and
// SQLite answers the loser SQLITE_BUSY at once, without its busy handler
// (17 of 100 runs of two stores opening one new file failed). The retries
// are paced by the wall clock: the other opener may be another process,
// which a fake Options.Clock does not govern.
func migrateWhenFree(ctx context.Context, db *sql.DB, path string, busy time.Duration) error {
	wall := clock.Real()
	deadline := wall.Now().Add(busy)
	for {
		err := migrate(ctx, db, path)
		if !isBusy(err) || !wall.Now().Before(deadline) {
			return err
		}
		if err := clock.Sleep(ctx, wall, 10*time.Millisecond); err != nil {
			return err
		}
	}
}

// dsn builds the URI for modernc.org/sqlite: WAL with synchronous=FULL so
// that a committed Apply survives a power cut, a busy timeout so that
// other processes' locks are waited for, and immediate transactions so
// that a writer takes the lock at BEGIN instead of failing at its first
// write. Readers open the file read-only.
func dsn(path string, busy time.Duration, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(busy.Milliseconds(), 10)+")")
	if readOnly {
		q.Set("mode", "ro")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(FULL)")
		q.Set("_txlock", "immediate")
	}
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// enter admits a call unless the store is closed; the caller must call the
// returned function when done.
func (s *Store) enter() (func(), error) {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, store.ErrClosed
	}
	return s.mu.RUnlock, nil
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, kind, id string) (store.Record, error) {
	if err := ctx.Err(); err != nil {
		return store.Record{}, err
	}
	leave, err := s.enter()
	if err != nil {
		return store.Record{}, err
	}
	defer leave()
	r := store.Record{Kind: kind, ID: id}
	var nanos int64
	err = s.reader.QueryRowContext(ctx,
		`SELECT version, data, updated_at FROM records WHERE kind = ? AND id = ?`, kind, id).
		Scan(&r.Version, &r.Data, &nanos)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Record{}, fmt.Errorf("%w: %s/%s", store.ErrNotFound, kind, id)
	}
	if err != nil {
		return store.Record{}, s.fail("get", err)
	}
	r.Data = nonNil(r.Data)
	r.UpdatedAt = fromNanos(nanos)
	return r, nil
}

// List implements store.Store. It is one statement, so it reads one
// snapshot: a concurrent Apply is seen whole or not at all.
func (s *Store) List(ctx context.Context, kind string) ([]store.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	leave, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	rows, err := s.reader.QueryContext(ctx,
		`SELECT id, version, data, updated_at FROM records WHERE kind = ? ORDER BY id`, kind)
	if err != nil {
		return nil, s.fail("list", err)
	}
	defer rows.Close()
	var out []store.Record
	for rows.Next() {
		r := store.Record{Kind: kind}
		var nanos int64
		if err := rows.Scan(&r.ID, &r.Version, &r.Data, &nanos); err != nil {
			return nil, s.fail("list", err)
		}
		r.Data = nonNil(r.Data)
		r.UpdatedAt = fromNanos(nanos)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list", err)
	}
	return out, nil
}

// Close implements store.Store. It waits for calls under way to finish.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.closeDBs()
}

func (s *Store) closeDBs() error {
	var errs []error
	if s.reader != nil {
		errs = append(errs, s.reader.Close())
	}
	if s.writer != nil {
		// Closing the last connection checkpoints the WAL into the file.
		errs = append(errs, s.writer.Close())
	}
	return errors.Join(errs...)
}

// fail wraps an error of SQLite, the driver or the context. Context errors
// stay matchable with errors.Is.
func (s *Store) fail(op string, err error) error {
	return fmt.Errorf("sqlitestore: %s %s: %w", op, s.path, classify(s.path, err))
}

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
