package modeltest_test

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/modeltest"
)

// TestMeasureStartup measures each real CLI's start-up against an instant
// server: the wall time of a one-turn run and when its first request
// arrives. FOREMAN_MEASURE=1 go test ./modeltest -run TestMeasureStartup -v
func TestMeasureStartup(t *testing.T) {
	if os.Getenv("FOREMAN_MEASURE") == "" {
		t.Skip("set FOREMAN_MEASURE=1 to measure")
	}
	const n = 7
	for _, cli := range []string{"claude", "codex", "gemini", "gemini-model"} {
		var walls, firsts, tails []time.Duration
		for range n {
			srv := modeltest.Start(t, modeltest.Script{Turns: []modeltest.Turn{modeltest.Say("ok")}})
			var r cliRun
			switch cli {
			case "claude":
				r = claude(t, srv, t.TempDir(), nil, streamJSON("hello")...)
			case "codex":
				r = codex(t, srv, t.TempDir(), execJSON("hello")...)
			case "gemini": // the default model, auto: a router request first
				r = gemini(t, srv, t.TempDir(), nil, geminiJSON("hello")...)
			default: // a model named: no router
				r = gemini(t, srv, t.TempDir(), nil, geminiJSON("hello", "-m", "gemini-2.5-pro")...)
			}
			require.NoError(t, r.err)
			walls = append(walls, r.wall)
			firsts = append(firsts, r.firstRequest)
			tails = append(tails, r.wall-r.firstRequest)
		}
		stat := func(d []time.Duration) string {
			slices.Sort(d)
			return d[0].Round(time.Millisecond).String() + " / " + d[len(d)/2].Round(time.Millisecond).String() + " / " + d[len(d)-1].Round(time.Millisecond).String()
		}
		t.Logf("%s, %d one-turn runs (min / median / max): wall %s; first request after %s; first request to exit %s",
			cli, n, stat(walls), stat(firsts), stat(tails))
	}
}
