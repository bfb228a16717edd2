package team

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/pipeline/store"
)

// The EventRefused events of an assignment's own requests stop at ten (the
// tenth says so); what its driver saw after it is always an event, so an
// agent cannot push its writes out of the events with cheap requests
// first; the story's status counts every one.
func TestRefusalEventsCapTheAgentsRequestsNotItsDriversNotes(t *testing.T) {
	db := store.NewMemory(store.MemoryOptions{})
	tm := &Team{db: db, events: windowLog(t, db, 1000), clk: clock.Real(), log: slog.New(slog.DiscardHandler)}
	ctx := context.Background()
	for i := range 15 {
		tm.refuse(ctx, refusal{Item: "S", Assignment: "S-a3", Detail: fmt.Sprintf("request %d", i)})
	}
	tm.refuse(ctx, refusal{Item: "S", Assignment: "S-a3", Detail: "the OS sandbox: wrote EVIL", driver: true})
	tm.refuse(ctx, refusal{Item: "S", Assignment: "S-a3", Detail: "the OS sandbox: opened .env", driver: true})

	var details []string
	evs, _ := tm.events.since(0)
	for _, e := range evs {
		if e.Kind == EventRefused {
			details = append(details, e.Detail)
		}
	}
	require.Len(t, details, 12)
	assert.Equal(t, "request 9 (10 refused requests of this assignment; later ones are counted in the story's status only)", details[9])
	assert.Equal(t, []string{"the OS sandbox: wrote EVIL", "the OS sandbox: opened .env"}, details[10:])
	var r refusedRecord
	_, _, err := getJSON(ctx, db, kindRefused, "S", &r)
	require.NoError(t, err)
	assert.Equal(t, int64(17), r.Count)
	assert.Equal(t, "the OS sandbox: opened .env", r.Last)
}

// A refusal's detail is the agent's choice (a name, a request): the event
// and the log carry it in one bounded line, however long it was.
func TestARefusalsDetailIsBoundedInTheEventAndTheLog(t *testing.T) {
	db := store.NewMemory(store.MemoryOptions{})
	var logged strings.Builder
	tm := &Team{db: db, events: windowLog(t, db, 1000), clk: clock.Real(), log: slog.New(slog.NewTextHandler(&logged, nil))}
	huge := "the OS sandbox: wrote " + strings.Repeat("<b>x</b>\n", 10_000)
	tm.refuse(context.Background(), refusal{Item: "S", Assignment: "S-a1", Detail: huge, driver: true})

	evs, _ := tm.events.since(0)
	require.Len(t, evs, 1)
	d := evs[0].Detail
	assert.LessOrEqual(t, len(d), maxDetail+8, "the event's detail is bounded")
	assert.True(t, strings.HasPrefix(d, "the OS sandbox: wrote <b>x</b>"), "the detail's start is kept")
	assert.False(t, strings.Contains(d, "\n"), "one line")
	assert.Less(t, logged.Len(), 2*maxDetail, "the log line is bounded")
}
