package pgstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/pipeline/store"
)

// A schema name is written into SQL, the bodies of dollar-quoted functions
// included, where no identifier quoting protects the $fn$ that ends the
// body: only plain identifiers are taken, refused before any connection.
func TestASchemaNameIsAPlainIdentifier(t *testing.T) {
	good := []string{"foreman", "_", "a", "team_2", "x" + strings.Repeat("9", 62), "foreman_test_0a1b"}
	for _, name := range good {
		assert.NoError(t, pgstore.ValidateSchema(name), name)
	}
	bad := map[string]string{
		"":                                   "empty",
		"Foreman":                            `holds 'F' at byte 0`,
		"team-2":                             `holds '-'`,
		"9lives":                             "starts with a digit",
		"pg_catalog":                         "reserves names starting with pg_",
		strings.Repeat("a", 64):              "64 bytes, more than 63",
		`x"; DROP SCHEMA public CASCADE; --`: `holds '"'`,
		"x$fn$ BEGIN PERFORM pg_sleep(9); END $fn$": `holds '$'`,
		"a b":       `holds ' '`,
		"caf\u00e9": `holds 'Ã'`,
		"a\x00b":    `holds '\x00'`,
		"a'b":       `holds '\''`,
		"a.b":       `holds '.'`,
	}
	for name, reason := range bad {
		t.Run(name, func(t *testing.T) {
			err := pgstore.ValidateSchema(name)
			require.ErrorIs(t, err, pgstore.ErrInvalidSchemaName)
			var se *pgstore.SchemaNameError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, name, se.Schema)
			assert.Contains(t, err.Error(), reason)
			assert.Contains(t, err.Error(), "[a-z_][a-z0-9_]{0,62}")

			// Open refuses it as a bad option, before it connects (port 1
			// answers nobody).
			_, err = pgstore.Open(context.Background(), "postgres://127.0.0.1:1/none", pgstore.Options{Schema: name})
			if name == "" {
				assert.NotErrorIs(t, err, pgstore.ErrInvalidOptions, "empty means the default")
				return
			}
			assert.ErrorIs(t, err, pgstore.ErrInvalidOptions)
			assert.ErrorIs(t, err, pgstore.ErrInvalidSchemaName)
			pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/none") // connects lazily
			require.NoError(t, err)
			defer pool.Close()
			_, err = pgstore.OpenPool(context.Background(), pool, pgstore.Options{Schema: name})
			assert.ErrorIs(t, err, pgstore.ErrInvalidOptions)
		})
	}
}

// The longest and the oddest names a store takes work in PostgreSQL: the
// schema, its tables and its function are created and written through.
func TestEdgeSchemaNamesWork(t *testing.T) {
	unique := strings.TrimPrefix(newSchema(t), "foreman_test_") // 12 hex digits, dropped at the end
	for _, name := range []string{"_" + unique, "z" + unique + strings.Repeat("_", 50)} {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, pgstore.ValidateSchema(name))
			dropAtEnd(t, name)
			s := openStore(t, pgstore.Options{Schema: name})
			assert.Equal(t, name, s.Schema())
			recs, err := s.Apply(t.Context(), store.Op{Kind: "item", ID: "a", Data: []byte("x")})
			require.NoError(t, err)
			assert.Equal(t, int64(1), recs[0].Version)
			got, err := s.Get(t.Context(), "item", "a")
			require.NoError(t, err)
			assert.Equal(t, "x", string(got.Data))
		})
	}
}

// dropAtEnd drops schema when the test ends, after its stores are closed.
func dropAtEnd(t *testing.T, schema string) {
	t.Helper()
	pool := sharedPool(t)
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		assert.NoError(t, err)
	})
}

// A fenced write says why: a newer term holds the lease, or no one does
// (the writer never took it: the error says how to).
func TestAFencedWriteSaysWhoHoldsTheLease(t *testing.T) {
	for _, c := range []struct {
		err        pgstore.FencedError
		want, hint string
	}{
		{pgstore.FencedError{Lease: "coordinator", Term: 1, Current: 2}, `lease "coordinator" is at term 2, this writer holds term 1`, ""},
		{pgstore.FencedError{Lease: "coordinator", Term: 1}, `lease "coordinator" is at term 0, this writer holds term 1`, "no one holds the lease: take it with Store.TryLead or Store.Campaign"},
	} {
		msg := c.err.Error()
		assert.Contains(t, msg, c.want)
		if c.hint == "" {
			assert.NotContains(t, msg, "no one holds")
		} else {
			assert.Contains(t, msg, c.hint)
		}
		assert.ErrorIs(t, &c.err, pgstore.ErrFenced)
	}
}
