package team

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/pipeline/store"
)

// A story's status shows every kind of attempt its agents were refused,
// not only the last: each kind with its count and when it was first and
// last refused. A flood of one kind, however the names in it vary (made-up
// assignments of every length, so that a clip falls anywhere), stays one
// kind and pushes out none of the others; past eight kinds the one seen
// longest ago goes, and the text says how many are no longer listed.
func TestTheStatusShowsEveryKindOfRefusalNotOnlyTheLast(t *testing.T) {
	ctx := context.Background()
	db := store.NewMemory(store.MemoryOptions{})
	start := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	tm := &Team{db: db, events: windowLog(t, db, 1000), clk: clk, log: slog.New(slog.DiscardHandler)}
	refuse := func(detail string) {
		tm.refuse(ctx, refusal{Item: "S", Assignment: "S-a3", Detail: detail})
		clk.Advance(time.Second)
	}
	write := `the OS sandbox: wrote "EVIL", "go.mod" into the hidden main checkout (/srv/repo): a decoy, nothing real changed`
	refuse(write)
	refuse(`the OS sandbox: refused the agent's move of refs/heads/foreman/OTHER: not carried back`)
	for i := range 300 {
		refuse(fmt.Sprintf("MCP report for assignment %q, not its own S-a3", "X"+strings.Repeat("y", i*3)+fmt.Sprint(i)))
	}
	refuse(`the OS sandbox: refused the agent's move of refs/heads/foreman/THIRD: not carried back`)

	rec := readRefused(t, db)
	assert.Equal(t, int64(303), rec.Count)
	kinds := rec.kinds()
	require.Len(t, kinds, 3, "%+v", kinds)
	assert.Equal(t, RefusalKind{Detail: write, Count: 1, First: start, Last: start}, kinds[0])
	assert.Equal(t, RefusalKind{Detail: `the OS sandbox: refused the agent's move of refs/heads/foreman/THIRD: not carried back`,
		Count: 2, First: start.Add(time.Second), Last: start.Add(302 * time.Second)}, kinds[1], "the last one's detail")
	assert.Equal(t, int64(300), kinds[2].Count)
	assert.Equal(t, start.Add(2*time.Second), kinds[2].First)
	assert.LessOrEqual(t, len(kinds[2].Detail), maxKindDetail+len("…"))
	assert.Contains(t, kinds[2].Detail, `MCP report for assignment "Xyyy`)

	// Eight more kinds: the three first are pushed out, oldest first.
	for i := range 8 {
		refuse(fmt.Sprintf("a printed kind %c", 'a'+i))
	}
	rec = readRefused(t, db)
	kinds = rec.kinds()
	require.Len(t, kinds, maxRefusalKinds)
	assert.Equal(t, "a printed kind a", kinds[0].Detail)
	assert.Equal(t, "a printed kind h", kinds[7].Detail)
	data, err := db.Get(ctx, kindRefused, "S")
	require.NoError(t, err)
	assert.Less(t, len(data.Data), 2000, "the record stays compact: %s", data.Data)

	st := Status{At: start.Add(time.Hour), Refused: rec.Count, Stories: []StoryStatus{{ID: "S", Refused: rec.Count,
		RefusedLast: rec.Last, RefusedKinds: kinds}}}
	text := st.Text()
	assert.Contains(t, text, "  S: 311, of these kinds (count, first and last refused, the last one's detail):\n")
	assert.Contains(t, text, "    1x 10:05:03 to 10:05:03: a printed kind a\n")
	assert.Contains(t, text, "    and 303 earlier of kinds no longer listed\n")
	st.At = start.Add(48 * time.Hour)
	assert.Contains(t, st.Text(), "    1x 2026-11-27 10:05:03 to 2026-11-27 10:05:03: a printed kind a\n", "another day's time says its date")
}

// A record counted before kinds were kept shows its count and its last
// detail as before.
func TestARefusalsRecordWithoutKindsShowsItsLast(t *testing.T) {
	st := Status{Refused: 3, Stories: []StoryStatus{{ID: "OLD", Refused: 3, RefusedLast: "MCP report for ..."}}}
	assert.Contains(t, st.Text(), "  OLD: 3, the last: MCP report for ...\n")
}

// refusalKey keeps what a refusal did and drops what it named.
func TestRefusalKey(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{`MCP report for assignment "US-1-a2", not its own S-a3`, `MCP report for assignment "x\"y", not its own S-a14`},
		{`wrote "EVIL" into the hidden main checkout (/a/b): a decoy`, `wrote "A", "B" (removed), "C" and 3 more into the hidden main checkout (/c): a decoy`},
		{`refused the agent's move of refs/heads/a`, `refused the agent's move of refs/heads/foreman/b/c`},
		{`its commit 0123abc is not in the repository`, `its commit deadbeefcafe is not in the repository`},
		{`MCP report for assignment "unterminated`, `MCP report for assignment "cut short by a clip, not its own`},
	} {
		assert.Equal(t, refusalKey(tc.a), refusalKey(tc.b), tc.a)
	}
	for _, tc := range []struct{ a, b string }{
		{`wrote "EVIL" into the hidden main checkout (/a)`, `wrote "EVIL" into the hidden state directory (/a)`},
		{`MCP report for assignment "A", not its own S-a3`, `MCP status for assignment "A", not its own S-a3`},
		{`a printed report line without its assignment's id and key`, `a printed report line with a wrong key`},
	} {
		assert.NotEqual(t, refusalKey(tc.a), refusalKey(tc.b), tc.a)
	}
}

func readRefused(t *testing.T, db store.Store) refusedRecord {
	t.Helper()
	var r refusedRecord
	_, found, err := getJSON(context.Background(), db, kindRefused, "S", &r)
	require.NoError(t, err)
	require.True(t, found)
	return r
}
