package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/pipeline/store"
)

// Options configures Open and OpenPool. The zero value means the documented
// defaults.
type Options struct {
	// Schema is the PostgreSQL schema that holds Foreman's tables, created
	// if missing. Several independent stores can share one database under
	// different schemas. A plain identifier only (ValidateSchema:
	// [a-z_][a-z0-9_]{0,62}, not pg_...): it is written into SQL, function
	// bodies included. Default: "foreman".
	Schema string
	// Clock stamps UpdatedAt. Default: the wall clock of this host.
	Clock foreman.Clock
	// MaxBatch caps how many concurrent Applies one group commit carries
	// (one round trip, one transaction, one WAL flush); 1 turns group
	// commit off. Default: 64 (each Apply runs in a subtransaction, and
	// PostgreSQL tracks up to 64 of them per transaction cheaply).
	MaxBatch int
	// Writers is how many group commits may be in flight at once, each on
	// its own connection. Default: 2.
	Writers int
	// WriteTimeout bounds one group commit once it is on its way: callers
	// whose Applies it carries wait for it whatever their own contexts
	// say, so that each learns whether its write landed. Default: 30 s.
	WriteTimeout time.Duration
}

const (
	defaultSchema       = "foreman"
	defaultMaxBatch     = 64
	defaultWriters      = 2
	defaultWriteTimeout = 30 * time.Second
	// maxBatchBytes keeps one group commit's documents to a sane size; a
	// single larger Apply still goes alone.
	maxBatchBytes = 16 << 20
)

// Store is the PostgreSQL implementation of store.Store. It is safe for
// concurrent use, and any number of Stores, in any number of processes,
// may use one schema at once.
type Store struct {
	pool     *pgxpool.Pool
	ownsPool bool
	schema   string
	clock    clock.Clock
	sql      statements
	group    *applyQueue
	timeout  time.Duration
	stats    counters
	// beforeWrite, when set (by tests), runs before each group commit is
	// written, with the number of Applies it carries.
	beforeWrite func(applies int)

	// mu is held shared by every call for its whole duration and
	// exclusively by Close, so that Close never closes the pool under a
	// running call.
	mu     sync.RWMutex
	closed bool
}

var _ store.Store = (*Store)(nil)

// statements are the store's SQL with the schema filled in.
type statements struct {
	get, list, apply, purge                             string
	takeLock, tryLead, readLease, renewLease, dropLease string
}

// Open connects to the database at connString (a postgres:// URL or
// key=value string, as pgx accepts), creates or migrates Foreman's schema,
// and returns a store that owns its connection pool: Close closes it.
func Open(ctx context.Context, connString string, opts Options) (*Store, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	s, err := open(ctx, pool, true, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// OpenPool is Open on a pool the host already has. The store never closes
// it; Close only stops the store. Give the pool at least Options.Writers
// connections beyond those the host itself keeps busy.
func OpenPool(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil pool", ErrInvalidOptions)
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return open(ctx, pool, false, opts)
}

func (o Options) validate() error {
	switch {
	case o.MaxBatch < 0:
		return fmt.Errorf("%w: MaxBatch %d is negative", ErrInvalidOptions, o.MaxBatch)
	case o.Writers < 0:
		return fmt.Errorf("%w: Writers %d is negative", ErrInvalidOptions, o.Writers)
	case o.WriteTimeout < 0:
		return fmt.Errorf("%w: WriteTimeout %v is negative", ErrInvalidOptions, o.WriteTimeout)
	case o.Schema != "":
		return ValidateSchema(o.Schema)
	}
	return nil
}

// maxIdentifier is PostgreSQL's NAMEDATALEN - 1: a longer name is cut
// short, silently, to this many bytes.
const maxIdentifier = 63

// ValidateSchema returns a *SchemaNameError (ErrInvalidSchemaName) unless
// name is a plain PostgreSQL identifier: a lowercase ASCII letter or _,
// then at most 62 lowercase letters, digits or _, and not starting with
// pg_ (PostgreSQL reserves those). Schema names are written into SQL,
// the bodies of dollar-quoted functions included, where quoting an
// identifier does not protect the quote that ends the body; a plain
// identifier needs no escaping anywhere. Open, OpenPool and the
// PostgreSQL transport (worker/pgtransport) call it on their Schema.
func ValidateSchema(name string) error {
	bad := func(reason string) error { return &SchemaNameError{Schema: name, Reason: reason} }
	switch {
	case name == "":
		return bad("empty")
	case len(name) > maxIdentifier:
		return bad(fmt.Sprintf("%d bytes, more than %d", len(name), maxIdentifier))
	case strings.HasPrefix(name, "pg_"):
		return bad("PostgreSQL reserves names starting with pg_")
	case name[0] >= '0' && name[0] <= '9':
		return bad("starts with a digit")
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return bad(fmt.Sprintf("holds %q at byte %d", rune(c), i))
		}
	}
	return nil
}

func open(ctx context.Context, pool *pgxpool.Pool, owns bool, opts Options) (*Store, error) {
	s := &Store{
		pool:     pool,
		ownsPool: owns,
		schema:   or(opts.Schema, defaultSchema),
		clock:    clock.OrReal(opts.Clock),
		timeout:  orDuration(opts.WriteTimeout, defaultWriteTimeout),
	}
	s.group = newApplyQueue(s, orInt(opts.MaxBatch, defaultMaxBatch), orInt(opts.Writers, defaultWriters))
	if err := migrate(ctx, pool, s.schema, SchemaVersion); err != nil {
		return nil, err
	}
	s.sql = statements{
		get:        sqlFor(s.schema, `SELECT version, data, updated_at FROM @.records WHERE kind = $1 AND id = $2`),
		list:       sqlFor(s.schema, `SELECT id, version, data, updated_at FROM @.records WHERE kind = $1 ORDER BY id`),
		apply:      sqlFor(s.schema, `SELECT batch, outcome, versions, conflict_op, actual, current_term FROM @.apply_batch($1, $2, $3, $4, $5, $6, $7, $8, $9)`),
		purge:      sqlFor(s.schema, `DELETE FROM @.tombstones WHERE deleted_at < $1`),
		takeLock:   sqlFor(s.schema, takeLeaseLockSQL),
		tryLead:    sqlFor(s.schema, tryLeadSQL),
		readLease:  sqlFor(s.schema, readLeaseSQL),
		renewLease: sqlFor(s.schema, renewLeaseSQL),
		dropLease:  sqlFor(s.schema, dropLeaseSQL),
	}
	return s, nil
}

// Schema returns the PostgreSQL schema the store keeps its tables in.
func (s *Store) Schema() string { return s.schema }

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
	if !storable(kind) || !storable(id) {
		return store.Record{}, fmt.Errorf("%w: %s/%s", store.ErrNotFound, kind, id) // could never have been written
	}
	r := store.Record{Kind: kind, ID: id}
	err = s.pool.QueryRow(ctx, s.sql.get, kind, id).Scan(&r.Version, &r.Data, &r.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Record{}, fmt.Errorf("%w: %s/%s", store.ErrNotFound, kind, id)
	}
	if err != nil {
		return store.Record{}, s.fail("get", err)
	}
	r.Data = nonNil(r.Data)
	r.UpdatedAt = r.UpdatedAt.UTC()
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
	if !storable(kind) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.sql.list, kind)
	if err != nil {
		return nil, s.fail("list", err)
	}
	defer rows.Close()
	var out []store.Record
	for rows.Next() {
		r := store.Record{Kind: kind}
		if err := rows.Scan(&r.ID, &r.Version, &r.Data, &r.UpdatedAt); err != nil {
			return nil, s.fail("list", err)
		}
		r.Data = nonNil(r.Data)
		r.UpdatedAt = r.UpdatedAt.UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list", err)
	}
	return out, nil
}

// Close implements store.Store. It waits for calls under way to finish and
// closes the pool if Open made it.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.ownsPool {
		s.pool.Close()
	}
	return nil
}

// fail wraps an error of PostgreSQL, pgx or the context. Context errors
// stay matchable with errors.Is.
func (s *Store) fail(op string, err error) error {
	return fmt.Errorf("pgstore: %s (schema %q): %w", op, s.schema, err)
}

// storable reports whether PostgreSQL's text type can hold s: valid UTF-8
// without NUL.
func storable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// validateText rejects kinds and ids that PostgreSQL cannot store, with the
// same sentinel as store.ValidateOps.
func validateText(ops []store.Op) error {
	for i, op := range ops {
		if !storable(op.Kind) || !storable(op.ID) {
			return fmt.Errorf("%w: op %d: kind and id must be valid UTF-8 without NUL for PostgreSQL (%q/%q)", store.ErrInvalidOp, i, op.Kind, op.ID)
		}
	}
	return nil
}

// stamp is the store clock's now in UTC, truncated to PostgreSQL's
// microseconds, so that Apply returns exactly what Get reads back.
func (s *Store) stamp() time.Time {
	return s.clock.Now().UTC().Truncate(time.Microsecond).Round(0)
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func orInt(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

func orDuration(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
