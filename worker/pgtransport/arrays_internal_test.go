package pgtransport

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// textArray and int8Array reach PostgreSQL as the []string and []int64
// they are made of do through pgx's own encoding: the same elements, NULL
// for nil, an empty array for an empty slice; and their elements cost no
// allocation each.
func TestArrayParametersAreTheSlicesTheyWrap(t *testing.T) {
	url := os.Getenv("FOREMAN_TEST_POSTGRES")
	if url == "" {
		t.Skip("FOREMAN_TEST_POSTGRES is not set")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer func() { _ = conn.Close(ctx) }()
	for _, texts := range [][]string{nil, {}, {""}, {"a", "", "ü€𝄞", `"quoted", {braced} \back`, "NULL", strings.Repeat("long ", 100) + string(rune(0x10FFFF))}} {
		var same, null bool
		var n int
		require.NoError(t, conn.QueryRow(ctx, `SELECT $1::text[] IS NOT DISTINCT FROM $2::text[], $1::text[] IS NULL, coalesce(cardinality($1::text[]), -1)`,
			textArray(texts), texts).Scan(&same, &null, &n))
		assert.True(t, same, "%q", texts)
		assert.Equal(t, texts == nil, null, "%q", texts)
		if texts != nil {
			assert.Equal(t, len(texts), n)
		}
	}
	for _, nums := range [][]int64{nil, {}, {0}, {1, -1, 255, 256, -257, math.MaxInt64, math.MinInt64}} {
		var same, null bool
		require.NoError(t, conn.QueryRow(ctx, `SELECT $1::bigint[] IS NOT DISTINCT FROM $2::bigint[], $1::bigint[] IS NULL`,
			int8Array(nums), nums).Scan(&same, &null))
		assert.True(t, same, "%v", nums)
		assert.Equal(t, nums == nil, null, "%v", nums)
	}
	texts, nums := textArray{"a", "b"}, int8Array{1 << 40, 1 << 41}
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = texts.Index(1), nums.Index(1) }))
}
