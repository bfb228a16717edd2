package message_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentforeman/foreman/pipeline/message"
)

func TestDetailAlwaysMakesAParseableLine(t *testing.T) {
	for _, in := range []string{"a\nb\tc\x00d", strings.Repeat("é", 1000), "x. Agents: y", "", "\xff\xfe", "  spaced   out  "} {
		d := message.Detail(in, 200)
		assert.LessOrEqual(t, len(d), 200+len("…"))
		for _, m := range []message.Message{
			message.Stage2Error{Item: "US-1", Details: d},
			message.Stage1Complete{Item: "US-1", Verdict: message.VerdictNoGo, Readiness: 1, Reason: d},
			message.Stage3Complete{Item: "US-1", Verdict: message.VerdictFail, Score: 1, Issues: d},
		} {
			got, err := message.Parse(message.Format(m))
			assert.NoError(t, err, "%q", in)
			assert.Equal(t, m, got, "%q", in)
		}
	}
	assert.Equal(t, "spaced out", message.Detail("  spaced   out  ", 0))
	assert.Equal(t, "(no details)", message.Detail(" \n", 10))
	assert.Equal(t, "ab…", message.Detail("abé", 3), "cut before a split character")
}
