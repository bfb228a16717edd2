package message

import (
	"bufio"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var updateCompat = flag.Bool("update-compat", false, "rewrite testdata/compat.golden from the current grammar")

// oldLines are report lines of the four-stage story flow as agents and the
// team wrote them before flows of any number of stages: every one must
// parse as it did.
var oldLines = []string{
	"Stage 0 COMPLETE for PROJ-42. 3 tasks created. Plan score: 4/4",
	"Stage 0 COMPLETE for PROJ-42.3 tasks created. Plan score: 4/4.",
	"Stage 0 COMPLETE for PROJ-42.   3 tasks created. Plan score: 4/4.",
	"Stage 0 COMPLETE for US-001. 1 tasks created. Plan score: 4/4.",
	"Stage 1 COMPLETE for PROJ-42. Verdict: GO. Readiness: 8",
	"Stage 1 COMPLETE for US-001. Verdict: GO. Readiness: 10.",
	"Stage 1 COMPLETE for PROJ-42. Verdict: NO-GO. Readiness: 3. Reason: too big.",
	"Stage 1 COMPLETE for US-001. Verdict: NO-GO. Readiness: 0. Reason: the story has no acceptance criteria",
	"Stage 2 COMPLETE for PROJ-42. All tasks Done. Story set to To Review",
	"Stage 2 COMPLETE for US-001. All tasks Done. Story set to To Review.",
	"Stage 2 ERROR for US-001: build failed after 3 iteration(s) (max_iterations): failing checks: go test ./... (L1) failed, exit status 1: --- FAIL: TestX",
	"Stage 3 COMPLETE for PROJ-42. Verdict: PASS. Quality Score: 90/100. Agents: SKIPPED(agents disabled)",
	"Stage 3 COMPLETE for PROJ-42. Verdict: PASS. Quality Score: 090/100.",
	"Stage 3 COMPLETE for US-001. Verdict: PASS. Quality Score: 100/100.",
	"Stage 3 COMPLETE for US-001. Verdict: FAIL. Quality Score: 50/100. Issues: go vet ./... (L1) failed, exit status 1: x.go:3: unreachable code",
	"Stage 0 ERROR for PROJ-42:boom",
	"Stage 0 ERROR for PROJ-42: ln-300:\tdépendance manquante",
	"Stage 3 ERROR for US-001: the agent could not run: exec: \"claude\": executable file not found in $PATH",
	"Stage 1 COMPLETE for US-001. Verdict: GO. Readiness: 8. [assignment US-001-a2 key <your report key>]",
	"Stage 4 COMPLETE for PROJ-42. All tasks Done. Story set to To Review.",
	"Stage 7 ERROR for PROJ-42: boom",
	"Stage 10 ERROR for PROJ-42: boom",
	"ACK Stage 3 for US-001",
	"Execute Stage 2 for US-001",
	"Status check: are you still working on Stage 1 for US-001?",
	"Status for US-001: Stage 2 EXECUTING. Current step: running tests.",
	"Pipeline complete for US-001. Shutting down.",
	"[executor] IMPL-001 completed: done",
}

// compatCorpus is every line the grammar must keep reading as it did: the
// canonical lines, the near misses, oldLines, and every line of what the
// real agent CLIs printed (phases/agentcmd/testdata/recorded), raw and
// inside each of its JSON strings.
func compatCorpus(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		for _, l := range strings.Split(s, "\n") {
			if l = strings.TrimSpace(l); l != "" && !seen[l] {
				seen[l] = true
				out = append(out, l)
			}
		}
	}
	for _, tc := range canonical {
		add(tc.line)
	}
	for _, l := range nearMisses {
		add(l)
	}
	for _, l := range oldLines {
		add(l)
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "phases", "agentcmd", "testdata", "recorded", "*.jsonl"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "the recorded agent outputs")
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			add(sc.Text())
			var v any
			if json.Unmarshal(sc.Bytes(), &v) == nil {
				walkStrings(v, add)
			}
		}
		require.NoError(t, sc.Err())
	}
	sort.Strings(out)
	return out
}

func walkStrings(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case []any:
		for _, e := range x {
			walkStrings(e, f)
		}
	case map[string]any:
		for _, e := range x {
			walkStrings(e, f)
		}
	}
}

// parsedAs is what Parse makes of a line, as the golden file keeps it.
func parsedAs(line string) string {
	m, err := Parse(line)
	if err != nil {
		return "unparseable"
	}
	return m.Kind().String() + " " + Format(m)
}

// TestGrammarReadsOldLinesAsBefore checks the grammar against the golden
// file written by the four-stage grammar: every recorded agent output,
// canonical line and old 1-4 stage line parses to the same message (or
// stays unparseable), whatever the grammar has learnt since.
func TestGrammarReadsOldLinesAsBefore(t *testing.T) {
	golden := filepath.Join("testdata", "compat.golden")
	corpus := compatCorpus(t)
	if *updateCompat {
		var b strings.Builder
		for _, l := range corpus {
			b.WriteString(strconv.Quote(l) + "\t" + strconv.Quote(parsedAs(l)) + "\n")
		}
		require.NoError(t, os.WriteFile(golden, []byte(b.String()), 0o644))
	}
	data, err := os.ReadFile(golden)
	require.NoError(t, err)
	want := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		q, a, ok := strings.Cut(l, "\t")
		require.True(t, ok, l)
		line, err := strconv.Unquote(q)
		require.NoError(t, err)
		want[line], err = strconv.Unquote(a)
		require.NoError(t, err)
	}
	// The golden lines are the old grammar's inputs themselves: a
	// recording made again since (a pinned CLI bumped) changes the corpus,
	// not what the old lines must still parse to.
	require.NotEmpty(t, want)
	for l, w := range want {
		if got := parsedAs(l); got != w {
			t.Errorf("%q parses as %q, was %q", l, got, w)
		}
	}
}
