package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/worker"
)

// The example end to end on real processes and the wall clock (the
// timeouts are what is shown, so they cannot be faked): two items
// complete, the stalling worker is escalated STUCK_WORKER twice (requeued,
// then parked), the twice-rejected item REVIEW_LIMIT; no worktree and no
// agent process is left.
func TestDispatcherEscalations(t *testing.T) {
	skipUnlessLong(t) // 20 s of real supervision timeouts; worker's own tests cover each escalation
	token := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Setenv("FOREMAN_DISPATCHER_TEST", token)
	var out bytes.Buffer
	res, err := run(context.Background(), options{progress: 5 * time.Second, keep: true, dir: t.TempDir(), timeout: 2 * time.Minute}, &out)
	require.NoError(t, err, out.String())
	text := out.String()

	assert.Equal(t, map[foreman.ItemID]int{"US-101": 1, "US-102": 2}, res.Completed, text)
	assert.Equal(t, map[foreman.ItemID]bool{"US-103": true, "US-104": true}, res.Parked, text)

	var kinds []string
	for _, e := range res.Escalations {
		kinds = append(kinds, fmt.Sprintf("%s %s requeued=%v", e.Kind, e.Item, e.Requeued))
		if e.Kind == worker.ReviewLimit {
			assert.Equal(t, 2, e.Rejections)
			assert.NotEmpty(t, e.SuggestedAction)
		}
	}
	assert.ElementsMatch(t, []string{
		"STUCK_WORKER US-103 requeued=true", "STUCK_WORKER US-103 requeued=false", "REVIEW_LIMIT US-104 requeued=false",
	}, kinds, text)
	assert.Contains(t, text, "US-102 review_rejected: Max needs a doc comment")
	assert.Contains(t, text, "though heartbeats continued")
	assert.Greater(t, res.Stats.Heartbeats, uint64(0))

	list, err := git(context.Background(), res.Repo, "worktree", "list")
	require.NoError(t, err)
	assert.Len(t, strings.Split(strings.TrimSpace(list), "\n"), 1, "only the main worktree")
	assert.Empty(t, leftovers(t, "FOREMAN_DISPATCHER_TEST="+token))
}

// leftovers lists the processes other than this one whose environment
// carries entry.
func leftovers(t *testing.T, entry string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc: cannot look for leftover processes")
	}
	var found []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(env, []byte(entry+"\x00")) {
			found = append(found, e.Name())
		}
	}
	return found
}

// skipUnlessLong skips a second whole-program run unless FOREMAN_STRESS is
// set, as CI sets it: a developer's go test ./... stays about a minute.
func skipUnlessLong(t *testing.T) {
	t.Helper()
	if v := os.Getenv("FOREMAN_STRESS"); v == "" || v == "0" {
		t.Skip("long end-to-end run: FOREMAN_STRESS=1 runs it (CI does)")
	}
}
