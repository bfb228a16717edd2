package sqlitestore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline/sqlitestore"
)

// pragmas reads what one connection runs with.
type pragmas struct {
	journalMode string
	synchronous int
	busyTimeout int64
}

func readPragmas(t *testing.T, ctx context.Context, conn *sql.Conn) pragmas {
	t.Helper()
	var p pragmas
	require.NoError(t, conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&p.journalMode))
	require.NoError(t, conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&p.synchronous))
	require.NoError(t, conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&p.busyTimeout))
	return p
}

// TestPragmas asserts what the DSN asks for is what SQLite applies: the
// writer in WAL mode with synchronous=FULL (2), every reading connection
// seeing WAL, and the busy timeout on both sides.
func TestPragmas(t *testing.T) {
	const readConns = 3
	cases := []struct {
		name        string
		opts        sqlitestore.Options
		wantTimeout time.Duration
	}{
		{"defaults", sqlitestore.Options{ReadConns: readConns}, 5 * time.Second},
		{"busy timeout set", sqlitestore.Options{ReadConns: readConns, BusyTimeout: 1500 * time.Millisecond}, 1500 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), "state.db")
			s := openStore(t, path, tc.opts)
			writer, reader := s.DBs()
			require.NotNil(t, writer)

			wc, err := writer.Conn(ctx)
			require.NoError(t, err)
			defer wc.Close()
			assert.Equal(t, pragmas{journalMode: "wal", synchronous: 2, busyTimeout: tc.wantTimeout.Milliseconds()},
				readPragmas(t, ctx, wc), "writer: WAL, synchronous=FULL, busy timeout")

			// Hold every reading connection at once so each is checked,
			// not the same idle one again and again.
			conns := make([]*sql.Conn, readConns)
			for i := range conns {
				conns[i], err = reader.Conn(ctx)
				require.NoError(t, err)
				defer conns[i].Close()
			}
			for i, c := range conns {
				p := readPragmas(t, ctx, c)
				assert.Equal(t, "wal", p.journalMode, "reader %d sees the WAL database", i)
				assert.Equal(t, tc.wantTimeout.Milliseconds(), p.busyTimeout, "reader %d busy timeout", i)
			}

			// A read-only store opened by another "process" sees WAL too.
			ro := openStore(t, path, sqlitestore.Options{ReadOnly: true, BusyTimeout: tc.opts.BusyTimeout})
			roWriter, roReader := ro.DBs()
			assert.Nil(t, roWriter, "a read-only store has no writer")
			rc, err := roReader.Conn(ctx)
			require.NoError(t, err)
			defer rc.Close()
			p := readPragmas(t, ctx, rc)
			assert.Equal(t, "wal", p.journalMode)
			assert.Equal(t, tc.wantTimeout.Milliseconds(), p.busyTimeout)
		})
	}
}
