package team

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/store"
)

// fullEvent has every field of Event set (not zero), found by reflection,
// so that a field added to Event and not to the record's form fails
// TestEventRecordsKeepEveryField.
func fullEvent(t *testing.T) Event {
	t.Helper()
	at := time.Date(2026, 11, 27, 17, 30, 1, 123456789, time.UTC)
	var e Event
	v := reflect.ValueOf(&e).Elem()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch f.Interface().(type) {
		case time.Time:
			f.Set(reflect.ValueOf(at.Add(time.Duration(i) * time.Hour)))
		case *pipeline.Escalation:
			f.Set(reflect.ValueOf(&pipeline.Escalation{Key: "k", Item: "S1", Stage: 2, Reason: pipeline.PauseReason("stuck"),
				Message: "Story S1 ...", Files: []string{"a.go"}, SuggestedAction: "look", At: at}))
		case []string:
			f.Set(reflect.ValueOf([]string{"a.go", "", "b/c.go"}))
		default:
			switch f.Kind() {
			case reflect.String:
				f.SetString("x-" + name)
			case reflect.Int, reflect.Int64:
				f.SetInt(int64(-3 - i))
			case reflect.Uint64:
				f.SetUint(uint64(1<<40 + i))
			case reflect.Float64:
				f.SetFloat(0.25 + float64(i))
			default:
				t.Fatalf("Event.%s (%s): the test does not know how to set it", name, f.Type())
			}
		}
		require.False(t, f.IsZero(), "Event.%s is set", name)
	}
	return e
}

// Every field of an event is kept by its record, each alone and all
// together, and a record reads back as the event written.
func TestEventRecordsKeepEveryField(t *testing.T) {
	full := fullEvent(t)
	cases := map[string]Event{"every field": full, "none": {}, "a known kind only": {Kind: EventStoryMerged}}
	v := reflect.ValueOf(full)
	for i := range v.NumField() {
		var e Event
		reflect.ValueOf(&e).Elem().Field(i).Set(v.Field(i))
		cases["only "+v.Type().Field(i).Name] = e
	}
	cases["an unknown kind"] = Event{Seq: 9, Kind: "later_kind", Detail: "d"}
	cases["a zone"] = Event{Kind: EventGates, At: time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("", -5*3600)),
		Started: time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("CET", 3600))}
	cases["empty files"] = Event{Kind: EventConflict, Files: []string{}}
	for name, e := range cases {
		t.Run(name, func(t *testing.T) {
			data, err := appendEvent(nil, e)
			require.NoError(t, err)
			got, err := decodeEvent(data)
			require.NoError(t, err)
			assertSameEvent(t, e, got)

			// The same event as the JSON of earlier versions reads the same.
			old, err := json.Marshal(e)
			require.NoError(t, err)
			fromJSON, err := decodeEvent(old)
			require.NoError(t, err)
			assertSameEvent(t, e, fromJSON)
			if e.Kind == EventStageFinished && e.Line != "" {
				assert.Less(t, len(data), len(old)*2/3, "the record is smaller than its JSON")
			}
		})
	}
}

// assertSameEvent compares two events, times with Equal and the zone's
// offset.
func assertSameEvent(t *testing.T, want, got Event) {
	t.Helper()
	for _, tm := range []struct{ want, got time.Time }{{want.At, got.At}, {want.Started, got.Started}} {
		assert.True(t, tm.want.Equal(tm.got), "time %v read back as %v", tm.want, tm.got)
		_, wo := tm.want.Zone()
		_, go_ := tm.got.Zone()
		assert.Equal(t, wo, go_, "zone offset of %v", tm.want)
	}
	if want.Escalation != nil && got.Escalation != nil {
		assert.True(t, want.Escalation.At.Equal(got.Escalation.At))
		we, ge := *want.Escalation, *got.Escalation
		we.At, ge.At = time.Time{}, time.Time{}
		assert.Equal(t, we, ge)
	} else {
		assert.Equal(t, want.Escalation == nil, got.Escalation == nil, "escalation")
	}
	want.At, got.At, want.Started, got.Started, want.Escalation, got.Escalation = time.Time{}, time.Time{}, time.Time{}, time.Time{}, nil, nil
	if len(want.Files) == 0 && len(got.Files) == 0 {
		want.Files, got.Files = nil, nil // JSON's omitempty drops an empty list
	}
	assert.Equal(t, want, got)
}

// A record cut short, with bytes after it, with a field this version does
// not know or in no known form is refused with errCorruptEvent.
func TestCorruptEventRecordsAreRefused(t *testing.T) {
	data, err := appendEvent(nil, fullEvent(t))
	require.NoError(t, err)
	for n := range len(data) {
		_, err := decodeEvent(data[:n])
		require.ErrorIs(t, err, errCorruptEvent, "cut at %d of %d", n, len(data))
	}
	_, err = decodeEvent(append(data[:len(data):len(data)], 0))
	assert.ErrorIs(t, err, errCorruptEvent, "a byte after the record")
	_, err = decodeEvent([]byte{2, 1, 1})
	assert.ErrorIs(t, err, errCorruptEvent, "an unknown form")
	unknownBit, err := appendEvent(nil, Event{Seq: 1, Kind: EventGates})
	require.NoError(t, err)
	require.Equal(t, byte(0), unknownBit[len(unknownBit)-1], "no field: the bit set is the last byte")
	unknownBit = append(unknownBit[:len(unknownBit)-1], 0x80, 0x80, 0x04) // the bit after evKind's
	require.Equal(t, evKind+1, 16)
	_, err = decodeEvent(unknownBit)
	assert.ErrorIs(t, err, errCorruptEvent, "a field this version does not know")
}

// The event log writes its records in the compact form and reads back
// both forms: a store holding JSON records of an earlier version, then
// compact ones, gives every event in order.
func TestTheEventLogReadsRecordsOfEitherForm(t *testing.T) {
	db := store.NewMemory(store.MemoryOptions{})
	for seq := 1; seq <= 300; seq++ {
		data, err := json.Marshal(Event{Seq: uint64(seq), Kind: EventStageStarted, Story: "S1", Detail: fmt.Sprint(seq)})
		require.NoError(t, err)
		_, err = db.Apply(t.Context(), store.Op{Kind: kindEvent, ID: eventID(uint64(seq)), Data: data})
		require.NoError(t, err)
	}
	_, err := db.Apply(t.Context(), store.Op{Kind: kindEventSeq, ID: eventSeqRecord, Data: []byte("300")})
	require.NoError(t, err)
	l := windowLog(t, db, 4)
	addEvents(l, 301, 320)
	rec, err := db.Get(t.Context(), kindEvents, chunkID(chunkOf(310)))
	require.NoError(t, err)
	var inChunk []uint64
	require.NoError(t, eachChunkEvent(rec.Data, func(e Event) { inChunk = append(inChunk, e.Seq) }))
	assert.Equal(t, []uint64{301, 302, 303, 304, 305, 306, 307, 308, 309, 310, 311, 312, 313, 314, 315, 316, 317, 318, 319, 320}, inChunk,
		"new events are written to their chunk's record, in the compact form")
	for _, after := range []uint64{0, 100, 280, 299, 305} {
		evs, _ := l.since(after)
		checkSeqs(t, evs, after+1, 320)
	}
}

// Events are kept eventChunk to a record: a store holds one record per
// chunk and none per event, a log opened again appends to the chunk it
// left, and a chunk record that cannot be read is reported.
func TestEventsAreKeptInChunks(t *testing.T) {
	db := store.NewMemory(store.MemoryOptions{})
	l := windowLog(t, db, 8)
	addEvents(l, 1, 100)
	again := windowLog(t, db, 8)
	addEvents(again, 101, 150)
	chunks, err := db.List(t.Context(), kindEvents)
	require.NoError(t, err)
	require.Len(t, chunks, (150+eventChunk-1)/eventChunk)
	single, err := db.List(t.Context(), kindEvent)
	require.NoError(t, err)
	assert.Empty(t, single, "no record per event")
	for i, r := range chunks {
		assert.Equal(t, chunkID(uint64(i)), r.ID)
		var seqs []uint64
		require.NoError(t, eachChunkEvent(r.Data, func(e Event) { seqs = append(seqs, e.Seq) }))
		require.NotEmpty(t, seqs)
		assert.Equal(t, uint64(i*eventChunk+1), seqs[0], "chunk %d starts at its first number", i)
		assert.Len(t, seqs, min(eventChunk, 150-i*eventChunk), "chunk %d holds its numbers, those of both logs", i)
	}
	for _, after := range []uint64{0, 31, 32, 33, 99, 100, 101, 149} {
		evs, _ := again.since(after)
		checkSeqs(t, evs, after+1, 150)
	}

	_, err = db.Apply(t.Context(), store.Op{Kind: kindEvents, ID: chunkID(0), ExpectVersion: chunks[0].Version, Data: []byte{5, 1}})
	require.NoError(t, err)
	_, err = again.stored(0, 150)
	assert.ErrorIs(t, err, errCorruptEvent)
}

// An event too long for its chunk's record (an agent's long line) gets a
// record of its own: the chunk's record stays within maxChunkBytes, and
// every event is read back in order, long and short.
func TestALongEventGetsARecordOfItsOwn(t *testing.T) {
	db := store.NewMemory(store.MemoryOptions{})
	l := windowLog(t, db, 4)
	long := strings.Repeat("x", 3000)
	for i := 1; i <= 100; i++ {
		e := Event{Kind: EventStageFinished, Story: "S1", Detail: fmt.Sprint(i)}
		if i%3 == 0 {
			e.Line = long
		}
		l.add(e)
	}
	chunks, err := db.List(t.Context(), kindEvents)
	require.NoError(t, err)
	for _, r := range chunks {
		assert.LessOrEqual(t, len(r.Data), maxChunkBytes, "chunk %s", r.ID)
	}
	single, err := db.List(t.Context(), kindEvent)
	require.NoError(t, err)
	assert.NotEmpty(t, single, "long events have records of their own")
	for _, after := range []uint64{0, 2, 30, 31, 32, 33, 90} {
		evs, _ := l.since(after)
		checkSeqs(t, evs, after+1, 100)
		for _, e := range evs {
			assert.Equal(t, e.Seq%3 == 0, e.Line == long, "event %d", e.Seq)
		}
	}
}

// An event costs a memory store little more than its compact record: a
// stage's report (a 250-byte JSON record) takes at most 160 bytes of heap
// with its share of its chunk's record. One JSON record per event took
// about 450.
func TestAnEventCostsAMemoryStoreLittleMoreThanItsRecord(t *testing.T) {
	const n = 20000
	evs := make([]Event, n)
	for i := range evs {
		id := fmt.Sprintf("S%05d", i)
		evs[i] = Event{Kind: EventStageFinished, At: time.Date(2026, 11, 27, 17, 0, 0, i, time.UTC), Story: foreman.ItemID(id), Stage: 1,
			Role: "validator", Worker: foreman.WorkerID("story-" + id + "-s1"), Assignment: foreman.AssignmentID(id + "-a2"),
			Outcome: "GO", Line: "Stage 1 COMPLETE for " + id + ". Verdict: GO. Readiness: 9."}
	}
	db := store.NewMemory(store.MemoryOptions{})
	l := windowLog(t, db, 8)
	before := liveHeap()
	for _, e := range evs {
		l.add(e)
	}
	perEvent := float64(liveHeap()-before) / n
	runtime.KeepAlive(l)
	runtime.KeepAlive(evs)
	t.Logf("%.0f bytes an event", perEvent)
	assert.Less(t, perEvent, 160.0, "bytes an event")
}

// liveHeap is the heap allocated after a collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// The record's form does not change under records already written: a
// kind's code is its place in eventKinds (append only), and an event
// encodes to the same bytes as when the form was made.
func TestTheEventRecordFormStaysTheSame(t *testing.T) {
	assert.Equal(t, []EventKind{EventStoryAdded, EventStageStarted, EventStageFinished, EventGates, EventReviewed,
		EventStoryPaused, EventStoryMerged, EventStoryResolved, EventWorker, EventConflict, EventRebased,
		EventConflictRework, EventRunStarted, EventRunFinished, EventUsage, EventLanding, EventRefused,
		EventStoryDropped}, eventKinds[:18], "the kinds' codes")
	e := Event{Seq: 300, Kind: EventStageFinished, At: time.Date(2026, 11, 27, 18, 0, 0, 5, time.UTC), Story: "S1",
		Stage: 2, Outcome: "GO", Tokens: -1, Started: time.Date(2026, 11, 27, 17, 0, 0, 0, time.FixedZone("", 3600))}
	data, err := appendEvent(nil, e)
	require.NoError(t, err)
	// form, seq 300, kind 3, At (seconds, nanoseconds, offset), the bit set, Story, Stage (zigzag),
	// Outcome, Tokens (zigzag), Started with its offset (3600: zigzag a038).
	assert.Equal(t, "01"+"ac02"+"03"+"c094ceb00d"+"05"+"00"+"a350"+"025331"+"04"+"02474f"+"01"+"80a4cdb00d"+"00"+"a038",
		fmt.Sprintf("%x", data))
}
