package riverbench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// A profiling aid: with RIVERBENCH_PGSS=1, on a server that preloads
// pg_stat_statements (shared_preload_libraries=pg_stat_statements,
// pg_stat_statements.track=all, pg_stat_statements.track_planning=on),
// each benchmark prints its top statements by time, nested ones included.

// resetStatements empties pg_stat_statements before the timed part.
func resetStatements(b *testing.B, pool *pgxpool.Pool) {
	if os.Getenv("RIVERBENCH_PGSS") == "" {
		return
	}
	ctx := context.Background()
	_, _ = pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
	_, _ = pool.Exec(ctx, "SELECT pg_stat_statements_reset()")
}

// dumpStatements prints the top statements by execution and planning time.
func dumpStatements(b *testing.B, pool *pgxpool.Pool) {
	if os.Getenv("RIVERBENCH_PGSS") == "" {
		return
	}
	rows, err := pool.Query(context.Background(), `SELECT calls, total_exec_time + total_plan_time, rows, plans || ' plans ' || round(total_plan_time::numeric,1) || 'ms ' || query FROM pg_stat_statements ORDER BY total_exec_time + total_plan_time DESC LIMIT 25`)
	if err != nil {
		b.Log(err)
		return
	}
	defer rows.Close()
	var sb strings.Builder
	for rows.Next() {
		var calls, nrows int64
		var t float64
		var q string
		_ = rows.Scan(&calls, &t, &nrows, &q)
		q = strings.Join(strings.Fields(q), " ")
		if len(q) > 150 {
			q = q[:150]
		}
		fmt.Fprintf(&sb, "%8d calls %9.1f ms %8d rows  %s\n", calls, t, nrows, q)
	}
	fmt.Fprintf(os.Stderr, "%s: pg_stat_statements for N=%d\n%s", b.Name(), b.N, sb.String())
}
