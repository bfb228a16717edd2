package teampg

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/pipeline/store"
)

// WorkerStoreConfig configures OpenWorkerStore.
type WorkerStoreConfig struct {
	// Pool reaches the team's database. It logs in as the worker host's
	// own role (GrantWorker), or as the coordinators'. Required.
	Pool *pgxpool.Pool
	// Schema is the team's PostgreSQL schema; a plain identifier
	// (pgstore.ValidateSchema). Default: "foreman" (pgstore's default).
	Schema string
	// Clock stamps the records' UpdatedAt. Default: the wall clock.
	Clock foreman.Clock
}

// WorkerStore is the team's store as a worker host sees it: the store a
// host gives team.NewStageAgent and HostConfig.Store. Its Get and Apply
// go through the team's worker functions (see GrantWorker), so a host
// reads and writes only what its stages need, of the stories its role
// claimed, and deletes nothing; anything else is refused with a
// *pgconn.PgError of SQLSTATE 42501. List is refused (ErrNotGranted): no
// stage needs it. It works the same whether the pool logs in as a
// worker's role or the coordinators'.
type WorkerStore struct {
	pool   *pgxpool.Pool
	schema string
	clk    foreman.Clock
	get    string
	apply  string

	mu     sync.RWMutex
	closed bool
}

var _ store.Store = (*WorkerStore)(nil)

// OpenWorkerStore checks that the team's worker functions are in the
// schema and that the pool's role may call them. When they are missing
// (no coordinator of this build has led yet) it installs them if its role
// may (the coordinators' may); a worker's role may not, and gets an error
// matching ErrNotGranted that says to start a coordinator first, as it
// does when no coordinator granted the role (GrantWorker).
func OpenWorkerStore(ctx context.Context, cfg WorkerStoreConfig) (*WorkerStore, error) {
	if cfg.Pool == nil {
		return nil, fmt.Errorf("%w: WorkerStoreConfig.Pool is nil", ErrInvalidConfig)
	}
	if cfg.Schema == "" {
		cfg.Schema = defaultSchema
	}
	if err := pgstore.ValidateSchema(cfg.Schema); err != nil {
		return nil, fmt.Errorf("%w: WorkerStoreConfig.Schema: %w", ErrInvalidConfig, err)
	}
	notGranted := fmt.Errorf("%w: this role may not call the team's worker functions in schema %q: "+
		"the coordinators grant it (teampg.GrantWorker, LeadConfig.WorkerRoles; foreman -role coordinator -worker-role ROLE)",
		ErrNotGranted, cfg.Schema)
	current, callable, err := workerFunctionsState(ctx, cfg.Pool, cfg.Schema)
	if refused(err) { // not even the schema's USAGE
		return nil, fmt.Errorf("%w (%w)", notGranted, err)
	}
	if err != nil {
		return nil, err
	}
	if !current {
		if err := installWorkerFunctions(ctx, cfg.Pool, cfg.Schema); err != nil {
			if refused(err) {
				return nil, fmt.Errorf("%w: schema %q does not have this build's worker functions, and this role may not install them: "+
					"start a coordinator of this build first (%w)", ErrNotGranted, cfg.Schema, err)
			}
			return nil, err
		}
		if _, callable, err = workerFunctionsState(ctx, cfg.Pool, cfg.Schema); err != nil {
			return nil, err
		}
	}
	if !callable {
		return nil, notGranted
	}
	return &WorkerStore{pool: cfg.Pool, schema: cfg.Schema, clk: clock.OrReal(cfg.Clock),
		get: sqlFor(cfg.Schema, `SELECT o_version, o_data, o_updated_at FROM @.team_worker_get($1, $2)`),
		apply: sqlFor(cfg.Schema, `SELECT o_outcome, o_versions, o_conflict_op, o_actual
			FROM @.team_worker_apply($1, $2, $3, $4, $5, $6)`),
	}, nil
}

// Schema is the team's PostgreSQL schema.
func (s *WorkerStore) Schema() string { return s.schema }

func (s *WorkerStore) enter() (func(), error) {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, store.ErrClosed
	}
	return s.mu.RUnlock, nil
}

// Get implements store.Store for the records a worker host may read.
func (s *WorkerStore) Get(ctx context.Context, kind, id string) (store.Record, error) {
	if err := ctx.Err(); err != nil {
		return store.Record{}, err
	}
	leave, err := s.enter()
	if err != nil {
		return store.Record{}, err
	}
	defer leave()
	if !storable(kind) || !storable(id) {
		return store.Record{}, fmt.Errorf("%w: %s/%s", store.ErrNotFound, kind, id)
	}
	r := store.Record{Kind: kind, ID: id}
	err = s.pool.QueryRow(ctx, s.get, kind, id).Scan(&r.Version, &r.Data, &r.UpdatedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.Record{}, fmt.Errorf("%w: %s/%s", store.ErrNotFound, kind, id)
	case err != nil:
		return store.Record{}, fmt.Errorf("teampg: worker store: get %s/%s: %w", kind, id, err)
	}
	if r.Data == nil {
		r.Data = []byte{}
	}
	r.UpdatedAt = r.UpdatedAt.UTC()
	return r, nil
}

// List is refused: a worker host lists nothing.
func (s *WorkerStore) List(_ context.Context, kind string) ([]store.Record, error) {
	return nil, fmt.Errorf("%w: a worker host lists no records (List %q)", ErrNotGranted, kind)
}

// Apply implements store.Store for the records a worker host may write:
// all ops or none, with the store's versions and conflicts.
func (s *WorkerStore) Apply(ctx context.Context, ops ...store.Op) ([]store.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.ValidateOps(ops); err != nil {
		return nil, err
	}
	n := len(ops)
	kinds, ids, expects, datas, deletes := make([]string, n), make([]string, n), make([]int64, n), make([][]byte, n), make([]bool, n)
	for i, op := range ops {
		if !storable(op.Kind) || !storable(op.ID) {
			return nil, fmt.Errorf("%w: op %d: kind and id must be valid UTF-8 without NUL for PostgreSQL (%q/%q)", store.ErrInvalidOp, i, op.Kind, op.ID)
		}
		kinds[i], ids[i], expects[i], deletes[i] = op.Kind, op.ID, op.ExpectVersion, op.Delete
		datas[i] = op.Data
		if datas[i] == nil {
			datas[i] = []byte{}
		}
	}
	leave, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	if n == 0 {
		return []store.Record{}, nil
	}
	at := s.clk.Now().UTC().Truncate(time.Microsecond).Round(0)
	var (
		outcome    string
		versions   []int64
		conflictOp *int32
		actual     *int64
	)
	for range 3 { // a deadlock or serialization failure wrote nothing: try again
		err = s.pool.QueryRow(ctx, s.apply, at, kinds, ids, expects, datas, deletes).Scan(&outcome, &versions, &conflictOp, &actual)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || (pe.Code != "40P01" && pe.Code != "40001") {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("teampg: worker store: apply: %w", err)
	}
	switch {
	case outcome == "ok" && len(versions) == n:
		out := make([]store.Record, n)
		for i, op := range ops {
			out[i] = store.Record{Kind: op.Kind, ID: op.ID, Version: versions[i], Data: append([]byte{}, op.Data...), UpdatedAt: at}
		}
		return out, nil
	case outcome == "conflict" && conflictOp != nil && int(*conflictOp) < n:
		op := ops[*conflictOp]
		var got int64
		if actual != nil {
			got = *actual
		}
		return nil, &store.ConflictError{Kind: op.Kind, ID: op.ID, Expected: op.ExpectVersion, Actual: got}
	}
	return nil, fmt.Errorf("teampg: worker store: apply returned outcome %q with %d versions for %d ops", outcome, len(versions), n)
}

// Close implements store.Store; the pool stays open (it is the host's).
func (s *WorkerStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// storable reports whether PostgreSQL's text type can hold s.
func storable(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }
