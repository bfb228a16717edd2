package pgtransport

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/worker"
)

// tricky are strings that encoding/json escapes, or that a hand-written
// reader could get wrong.
var tricky = []string{"", "a", "w-1", "line\nnext", `quote " and \ backslash`, "<html> & </html>", "tab\there",
	"\x00\x01\x1f", "é ü 字 🚀", "\u2028\u2029", "bad \xff utf-8", "/slash/", "\b\f\r", "del\x7f"}

func randomString(r *rand.Rand) string {
	s := ""
	for range r.IntN(3) {
		s += tricky[r.IntN(len(tricky))]
	}
	return s
}

func randomMessage(r *rand.Rand) worker.Message {
	m := worker.Message{Kind: worker.MessageKind(r.IntN(10)), Worker: foreman.WorkerID(randomString(r)),
		Assignment: foreman.AssignmentID(randomString(r))}
	pick := func() bool { return r.IntN(2) == 0 }
	if pick() {
		m.Status = randomString(r)
	}
	if pick() {
		m.Commit = randomString(r)
	}
	m.QGPassed = pick()
	if pick() {
		m.QGOutput = randomString(r)
	}
	if pick() {
		m.Reason = randomString(r)
	}
	if pick() {
		m.Question = randomString(r)
	}
	if r.IntN(4) == 0 {
		m.LastOutput = time.Unix(r.Int64N(4e9), r.Int64N(1e9)).UTC()
	}
	if r.IntN(6) == 0 {
		m.ResetsAt = time.Unix(r.Int64N(4e9), 0).UTC()
	}
	if pick() {
		costs := []float64{0, 0.5, 1e-7, 3e21, 123.456, -2, 1e-320, math.MaxFloat64}
		m.Usage = worker.Usage{Tokens: r.Int64N(1e12) - 5, CostUSD: costs[r.IntN(len(costs))]}
	}
	return m
}

func randomAssignment(r *rand.Rand) worker.Assignment {
	a := worker.Assignment{ID: foreman.AssignmentID(randomString(r)), Worker: foreman.WorkerID(randomString(r)),
		Item: foreman.ItemID(randomString(r)), Prompt: randomString(r), Worktree: randomString(r),
		Attempt: r.IntN(5) - 1, MemoryContext: randomString(r), Feedback: randomString(r), RequireReview: r.IntN(2) == 0}
	if r.IntN(2) == 0 {
		a.Stage = r.IntN(1 << 40)
	}
	return a
}

// The hand-written encoders write what encoding/json writes, byte for
// byte, and the decoders read it back as encoding/json does.
func TestTheHandWrittenCodecIsEncodingJSONs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		m := randomMessage(r)
		want, err := json.Marshal(jsonMessage{Message: m, Status: m.Status, LastOutput: m.LastOutput, Commit: m.Commit,
			QGPassed: m.QGPassed, QGOutput: m.QGOutput, Reason: m.Reason, ResetsAt: m.ResetsAt, Question: m.Question,
			Usage: m.Usage})
		require.NoError(t, err)
		got := encodeMessage(m)
		require.Equal(t, string(want), string(got))
		back, err := decodeMessage(got)
		require.NoError(t, err)
		var ref jsonMessage
		require.NoError(t, json.Unmarshal(got, &ref))
		wantBack := ref.Message
		wantBack.Status, wantBack.LastOutput, wantBack.Commit, wantBack.QGPassed, wantBack.QGOutput = ref.Status, ref.LastOutput, ref.Commit, ref.QGPassed, ref.QGOutput
		wantBack.Reason, wantBack.ResetsAt, wantBack.Question, wantBack.Usage = ref.Reason, ref.ResetsAt, ref.Question, ref.Usage
		require.Equal(t, wantBack, back, "%s", got)

		a := randomAssignment(r)
		wantA, err := json.Marshal(jsonAssignment{Assignment: a, Stage: a.Stage, MemoryContext: a.MemoryContext,
			Feedback: a.Feedback, RequireReview: a.RequireReview})
		require.NoError(t, err)
		gotA := encodeAssignment(&a)
		require.Equal(t, string(wantA), string(gotA))
		backA, err := decodeAssignment(gotA)
		require.NoError(t, err)
		var refA jsonAssignment
		require.NoError(t, json.Unmarshal(gotA, &refA))
		wantA2 := refA.Assignment
		wantA2.Stage, wantA2.MemoryContext, wantA2.Feedback, wantA2.RequireReview = refA.Stage, refA.MemoryContext, refA.Feedback, refA.RequireReview
		require.Equal(t, wantA2, backA, "%s", gotA)
	}
	nan := worker.Message{Kind: worker.MsgDone, Worker: "w", Assignment: "a", Usage: worker.Usage{CostUSD: math.NaN()}}
	assert.Empty(t, encodeMessage(nan), "encoding/json refuses NaN, and so does the transport")
}

// decodeBoth reads b with the transport's decoders and with encoding/json
// and requires the same outcome.
func decodeBoth(t *testing.T, b []byte) {
	t.Helper()
	m, err := decodeMessage(b)
	var ref jsonMessage
	refErr := json.Unmarshal(b, &ref)
	require.Equal(t, refErr != nil, err != nil, "%q: %v / %v", b, err, refErr)
	if err == nil {
		want := ref.Message
		want.Status, want.LastOutput, want.Commit, want.QGPassed, want.QGOutput = ref.Status, ref.LastOutput, ref.Commit, ref.QGPassed, ref.QGOutput
		want.Reason, want.ResetsAt, want.Question, want.Usage = ref.Reason, ref.ResetsAt, ref.Question, ref.Usage
		require.Equal(t, want, m, "%q", b)
	}
	a, err := decodeAssignment(b)
	var refA jsonAssignment
	refErr = json.Unmarshal(b, &refA)
	require.Equal(t, refErr != nil, err != nil, "%q: %v / %v", b, err, refErr)
	if err == nil {
		want := refA.Assignment
		want.Stage, want.MemoryContext, want.Feedback, want.RequireReview = refA.Stage, refA.MemoryContext, refA.Feedback, refA.RequireReview
		require.Equal(t, want, a, "%q", b)
	}
	ids, err := decodeIDs(string(b))
	var refIDs []string
	refErr = json.Unmarshal(b, &refIDs)
	require.Equal(t, refErr != nil, err != nil, "%q: %v / %v", b, err, refErr)
	if err == nil {
		require.Equal(t, refIDs, ids, "%q", b)
	}
}

var decodeSeeds = []string{
	`{"Kind": 3, "Worker": "w1", "Assignment": "a1"}`, // PostgreSQL's jsonb text
	`{"ID": "a1", "Item": "i", "Stage": 2, "Prompt": "p\nq \"r\" \\ \/", "Worker": "w", "Attempt": 1, "Worktree": "/wt"}`,
	` { "Kind" :3 , "kind": 4 } `, `{"kind": 4}`, `{"KIND": 4, "Kind": 3}`, `{"Kind": 300}`, `{"Kind": -1}`,
	`{"Kind": 03}`, `{"Kind": 3.0}`, `{"Kind": 3e0}`, `{"Kind": "3"}`, `{"Kind": null}`, `{"Worker": null}`,
	`{"Worker": "\u0041"}`, `{"Worker": "\ud800"}`, `{"Worker": "a\x01"}`, "{\"Worker\": \"\xff\"}", `{"Worker": "é"}`,
	`{"Worker": "a" "b"}`, `{"Worker": "a",}`, `{}`, `{} x`, `[]`, `null`, `{"Worker": "a"}}`, `{"QGPassed": true}`,
	`{"QGPassed": tru}`, `{"QGPassed": truex}`, `{"QGPassed": "true"}`, `{"RequireReview": false, "Attempt": -0}`,
	`{"Attempt": 123456789012345678901}`, `{"Attempt": 9223372036854775807}`, `{"Attempt": -}`, `{"Usage": {"Tokens": 1}}`,
	`{"LastOutput": "2026-11-27T09:30:00Z"}`, `{"Unknown": 1}`, `{"ID": "x", "ID": "y"}`, `{"Prompt": "\q"}`,
	`{"Prompt": "unterminated`, `{"Prompt": "x\`, `{"Stage": 1,"Stage": "a"}`, "{\"Kind\":\t3\r\n}", ``, `{`,
	// A notification's ids (decodeIDs).
	`["a-1","a-2"]`, ` [ "a-1" , "a\n2" ] `, `[ ]`, `["a-1",]`, `["a-1" "a-2"]`, `[null]`, `["a", null]`, `[1]`,
	`["\u0041"]`, "[\"\xff\"]", `["a"] x`, `[`, `["a"`, `[[]]`, `["é"]`, "[\"a\x01\"]",
}

func TestTheDecodersReadAsEncodingJSONDoes(t *testing.T) {
	for _, s := range decodeSeeds {
		decodeBoth(t, []byte(s))
	}
}

func FuzzTheDecodersReadAsEncodingJSONDoes(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { decodeBoth(t, b) })
}

func BenchmarkWire(b *testing.B) {
	m := worker.Message{Kind: worker.MsgDone, Worker: "w-12", Assignment: "a-12345"}
	a := worker.Assignment{ID: "a-12345", Worker: "w-12", Item: "item-12345", Prompt: "noop", Worktree: "/nowhere", Attempt: 1}
	pgMessage := []byte(`{"Kind": 3, "Worker": "w-12", "Assignment": "a-12345"}`)
	pgAssignment := []byte(`{"ID": "a-12345", "Item": "item-12345", "Prompt": "noop", "Worker": "w-12", "Attempt": 1, "Worktree": "/nowhere"}`)
	b.Run("encodeMessage", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = encodeMessage(m)
		}
	})
	b.Run("decodeMessage", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = decodeMessage(pgMessage)
		}
	})
	b.Run("encodeAssignment", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = encodeAssignment(&a)
		}
	})
	b.Run("decodeAssignment", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = decodeAssignment(pgAssignment)
		}
	})
}

// BenchmarkWireEncodingJSON is the same with encoding/json, for comparison.
func BenchmarkWireEncodingJSON(b *testing.B) {
	m := worker.Message{Kind: worker.MsgDone, Worker: "w-12", Assignment: "a-12345"}
	pgMessage := []byte(`{"Kind": 3, "Worker": "w-12", "Assignment": "a-12345"}`)
	pgAssignment := []byte(`{"ID": "a-12345", "Item": "item-12345", "Prompt": "noop", "Worker": "w-12", "Attempt": 1, "Worktree": "/nowhere"}`)
	b.Run("encodeMessage", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(jsonMessage{Message: m})
		}
	})
	b.Run("decodeMessage", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var w jsonMessage
			_ = json.Unmarshal(pgMessage, &w)
		}
	})
	b.Run("decodeAssignment", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var w jsonAssignment
			_ = json.Unmarshal(pgAssignment, &w)
		}
	})
}
