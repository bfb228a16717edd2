package teamweb_test

import (
	"bufio"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/stress"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teamweb"
)

// The host stops while a page is away and starts again (a new team over
// the same store, a new handler, a new server): the page reconnects with
// the Last-Event-ID it had and gets every event since, those recorded
// before the restart and after, in order, none twice, then the live ones.
func TestAReconnectAfterAHostRestartMissesNothing(t *testing.T) {
	stress.Long(t) // TestTheStreamFollowsLiveAndAReconnectMissesNothing reconnects within a run
	t.Parallel()
	f := newFixture(t)
	f.add(t, team.Story{ID: "A", Title: "first"}, team.Story{ID: "B", Title: "second", After: []foreman.ItemID{"A"}})
	_, srv := serve(t, f, teamweb.Config{})

	ctx1, drop := context.WithCancel(context.Background())
	defer drop()
	var got []team.Event
	for e := range readSSE(bufio.NewReader(openStream(t, ctx1, srv.URL+"/api/stream", nil).Body)) {
		got = append(got, decodeEvent(t, e))
		if len(got) == 2 {
			break
		}
	}
	drop()
	seen := got[len(got)-1].Seq

	// While the page is away the old host records more (a run, here), then
	// stops: its server and its team go.
	res := f.run(t)
	require.Equal(t, 2, res.Merged, res.String())
	before := f.team.Events(0)
	srv.Close()
	require.NoError(t, f.team.Close())

	// The new host: the same Config, so the same store.
	again, err := team.New(context.Background(), f.cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = again.Close() })
	f.team = again
	require.Equal(t, asReceived(t, before), asReceived(t, again.Events(0)), "the events outlived the host")
	f.add(t, team.Story{ID: "C", Title: "after the restart"})
	_, srv2 := serve(t, f, teamweb.Config{})

	ctx2, stop := context.WithCancel(context.Background())
	defer stop()
	stream := readSSE(bufio.NewReader(openStream(t, ctx2, srv2.URL+"/api/stream", map[string]string{"Last-Event-ID": u(seen)}).Body))
	want := len(again.Events(0)) + 1 // and one live event after the reconnect
	live := false
	for e := range stream {
		got = append(got, decodeEvent(t, e))
		if !live && len(got) == len(again.Events(0)) {
			live = true
			f.add(t, team.Story{ID: "D", Title: "live"})
		}
		if len(got) >= want {
			break
		}
	}
	stop()
	all := again.Events(0)
	require.Len(t, all, want)
	require.Equal(t, asReceived(t, all), asReceived(t, got), "every event once, in order, across the restart")
	for i, e := range got {
		assert.Equal(t, uint64(i+1), e.Seq)
	}
	assert.Equal(t, team.EventStoryAdded, got[len(got)-1].Kind)
	assert.Equal(t, foreman.ItemID("D"), got[len(got)-1].Story)
}
