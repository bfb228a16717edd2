package team

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
)

// How an event is kept in the store (in its chunk's record: kindEvents).
// An event record is the
// event in a compact binary form, about half the size of its JSON: with
// the memory store, where every event of the team stays in memory, the
// events are most of what the store holds (110,000 at 10,000 stories).
// Records written as JSON by earlier versions (the first byte '{') are
// read as before.
//
// The form: the byte eventFormat; the sequence number (uvarint); the
// kind (a byte: its place in eventKinds plus one, or 0 when it is not
// there, and then the kind is a string field); At; a bit set (uvarint)
// of the fields that follow, each present only when not zero, in the
// order of the evField constants. A string is its length (uvarint) and
// its bytes; an int a zigzag varint; a time its Unix seconds (zigzag),
// nanoseconds (uvarint) and zone offset in seconds (zigzag; 0 is UTC);
// CostUSD the 8 bytes of its float64, little-endian; the escalation its
// JSON as a string; the files their count and each string.
const eventFormat byte = 1

// errCorruptEvent: an event record that neither form reads.
var errCorruptEvent = errors.New("team: corrupt event record")

// eventKinds are the kinds coded in one byte. Append only: a kind's
// place is its code in every record written.
var eventKinds = [...]EventKind{
	EventStoryAdded, EventStageStarted, EventStageFinished, EventGates, EventReviewed, EventStoryPaused,
	EventStoryMerged, EventStoryResolved, EventWorker, EventConflict, EventRebased, EventConflictRework,
	EventRunStarted, EventRunFinished, EventUsage, EventLanding, EventRefused, EventStoryDropped,
}

// The optional fields, by their bit.
const (
	evStory = iota
	evStage
	evRole
	evWorker
	evAssignment
	evOutcome
	evLine
	evDetail
	evCommit
	evAction
	evEscalation
	evTokens
	evCost
	evStarted
	evFiles
	evKind // a kind eventKinds does not have
)

func kindCode(k EventKind) byte {
	for i, c := range eventKinds {
		if c == k {
			return byte(i + 1)
		}
	}
	return 0
}

// appendEvent appends e's record to buf.
func appendEvent(buf []byte, e Event) ([]byte, error) {
	buf = append(buf, eventFormat)
	buf = binary.AppendUvarint(buf, e.Seq)
	code := kindCode(e.Kind)
	buf = append(buf, code)
	buf = appendTime(buf, e.At)
	var bits uint64
	set := func(bit int, present bool) {
		if present {
			bits |= 1 << bit
		}
	}
	set(evStory, e.Story != "")
	set(evStage, e.Stage != 0)
	set(evRole, e.Role != "")
	set(evWorker, e.Worker != "")
	set(evAssignment, e.Assignment != "")
	set(evOutcome, e.Outcome != "")
	set(evLine, e.Line != "")
	set(evDetail, e.Detail != "")
	set(evCommit, e.Commit != "")
	set(evAction, e.Action != "")
	set(evEscalation, e.Escalation != nil)
	set(evTokens, e.Tokens != 0)
	set(evCost, e.CostUSD != 0)
	set(evStarted, !e.Started.IsZero())
	set(evFiles, e.Files != nil)
	set(evKind, code == 0)
	buf = binary.AppendUvarint(buf, bits)
	has := func(bit int) bool { return bits&(1<<bit) != 0 }
	str := func(bit int, s string) {
		if has(bit) {
			buf = appendString(buf, s)
		}
	}
	str(evStory, string(e.Story))
	if has(evStage) {
		buf = binary.AppendVarint(buf, int64(e.Stage))
	}
	str(evRole, e.Role)
	str(evWorker, string(e.Worker))
	str(evAssignment, string(e.Assignment))
	str(evOutcome, string(e.Outcome))
	str(evLine, e.Line)
	str(evDetail, e.Detail)
	str(evCommit, e.Commit)
	str(evAction, string(e.Action))
	if has(evEscalation) {
		esc, err := json.Marshal(e.Escalation)
		if err != nil {
			return nil, err
		}
		buf = appendString(buf, string(esc))
	}
	if has(evTokens) {
		buf = binary.AppendVarint(buf, e.Tokens)
	}
	if has(evCost) {
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(e.CostUSD))
	}
	if has(evStarted) {
		buf = appendTime(buf, e.Started)
	}
	if has(evFiles) {
		buf = binary.AppendUvarint(buf, uint64(len(e.Files)))
		for _, f := range e.Files {
			buf = appendString(buf, f)
		}
	}
	str(evKind, string(e.Kind))
	return buf, nil
}

func appendString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

func appendTime(buf []byte, t time.Time) []byte {
	_, off := t.Zone()
	buf = binary.AppendVarint(buf, t.Unix())
	buf = binary.AppendUvarint(buf, uint64(t.Nanosecond()))
	return binary.AppendVarint(buf, int64(off))
}

// decodeEvent reads an event record of either form.
func decodeEvent(data []byte) (Event, error) {
	var e Event
	if len(data) > 0 && data[0] == '{' {
		err := json.Unmarshal(data, &e)
		return e, err
	}
	if len(data) == 0 || data[0] != eventFormat {
		return e, fmt.Errorf("%w: unknown form", errCorruptEvent)
	}
	d := eventDecoder{b: data[1:]}
	e.Seq = d.uvarint()
	code := d.byte()
	if code > 0 && int(code) <= len(eventKinds) {
		e.Kind = eventKinds[code-1]
	} else if code != 0 {
		d.fail()
	}
	e.At = d.time()
	bits := d.uvarint()
	has := func(bit int) bool { return bits&(1<<bit) != 0 }
	str := func(bit int) string {
		if has(bit) {
			return d.string()
		}
		return ""
	}
	e.Story = foreman.ItemID(str(evStory))
	if has(evStage) {
		e.Stage = int(d.varint())
	}
	e.Role = str(evRole)
	e.Worker = foreman.WorkerID(str(evWorker))
	e.Assignment = foreman.AssignmentID(str(evAssignment))
	e.Outcome = pipeline.Outcome(str(evOutcome))
	e.Line = str(evLine)
	e.Detail = str(evDetail)
	e.Commit = str(evCommit)
	e.Action = Action(str(evAction))
	if has(evEscalation) {
		var esc pipeline.Escalation
		if err := json.Unmarshal([]byte(d.string()), &esc); err != nil && d.err == nil {
			d.err = fmt.Errorf("%w: its escalation: %w", errCorruptEvent, err)
		}
		e.Escalation = &esc
	}
	if has(evTokens) {
		e.Tokens = d.varint()
	}
	if has(evCost) {
		e.CostUSD = math.Float64frombits(d.uint64())
	}
	if has(evStarted) {
		e.Started = d.time()
	}
	if has(evFiles) {
		n := d.uvarint()
		if n > uint64(len(d.b)) { // each file takes a byte at least
			d.fail()
			n = 0
		}
		e.Files = make([]string, 0, n)
		for range n {
			e.Files = append(e.Files, d.string())
		}
	}
	if has(evKind) {
		e.Kind = EventKind(d.string())
	}
	if d.err == nil && (len(d.b) != 0 || bits>>(evKind+1) != 0) {
		d.fail() // trailing bytes, or a field this version does not know
	}
	return e, d.err
}

// eventDecoder reads the parts of a record; the first that is not there
// or malformed sets err, and every read after it returns zero.
type eventDecoder struct {
	b   []byte
	err error
}

func (d *eventDecoder) fail() {
	if d.err == nil {
		d.err = fmt.Errorf("%w: malformed", errCorruptEvent)
	}
	d.b = nil
}

func (d *eventDecoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *eventDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if d.err != nil || n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *eventDecoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if d.err != nil || n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *eventDecoder) uint64() uint64 {
	if d.err != nil || len(d.b) < 8 {
		d.fail()
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *eventDecoder) string() string {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.fail()
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *eventDecoder) time() time.Time {
	sec, nsec, off := d.varint(), d.uvarint(), d.varint()
	if d.err != nil || nsec >= 1e9 || off < -100_000 || off > 100_000 {
		d.fail()
		return time.Time{}
	}
	t := time.Unix(sec, int64(nsec))
	if off == 0 {
		return t.UTC()
	}
	return t.In(time.FixedZone("", int(off)))
}
