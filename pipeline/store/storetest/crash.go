package storetest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline/store"
)

// writerEnv tells a re-executed test binary to act as KillWriter's writer.
const writerEnv = "FOREMAN_STORETEST_KILL_WRITER"

// Crash records: each writer goroutine rewrites its own three records in
// every Apply, so that a batch cut in half would show as records of one
// writer at different versions.
const (
	crashKind       = "crash"
	crashWriters    = 16
	crashRecordsPer = 3
	defaultAcks     = 1500
)

// KillConfig describes a durable store to KillWriter.
type KillConfig struct {
	// HelperTest names the test function of the calling package that calls
	// WriterProcess; KillWriter runs the test binary again with only it.
	// Required.
	HelperTest string
	// Env is added to the writer process's environment: where the store is
	// (a path, a database URL). The store there must be empty. Default:
	// none (the test binary's environment only).
	Env []string
	// Reopen opens the store again after the writer was killed. Required.
	Reopen func(t *testing.T) store.Store
	// Acks is how many acknowledged Apply calls the writer reports before
	// it is killed. Default: 1500.
	Acks int
}

// KillWriter checks that every acknowledged Apply survives the death of
// the process that made it, and that a batch cut short is written whole
// or not at all. It starts a writer process (the test binary running
// cfg.HelperTest, which calls WriterProcess) where 16 goroutines each
// rewrite three records of their own in one Apply at a time and print
// every acknowledged write; once cfg.Acks are printed it kills the process
// with SIGKILL, mid-commit most likely, reopens the store and checks, for
// every goroutine, that its three records are at one version, at least
// the last one acknowledged (at most one more: a commit can land before
// its caller hears of it).
//
// The store needs to outlive its process, so Memory cannot take part.
func KillWriter(t *testing.T, cfg KillConfig) {
	t.Helper()
	require.NotEmpty(t, cfg.HelperTest, "KillConfig.HelperTest")
	require.NotNil(t, cfg.Reopen, "KillConfig.Reopen")
	acks := cfg.Acks
	if acks <= 0 {
		acks = defaultAcks
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+cfg.HelperTest+"$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), writerEnv+"=1"), cfg.Env...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())

	acked := map[int]int64{} // writer -> last version acknowledged
	var other []string
	seen := 0
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		var w int
		var v int64
		if _, err := fmt.Sscanf(lines.Text(), "ack %d %d", &w, &v); err != nil {
			other = append(other, lines.Text())
			continue
		}
		acked[w] = max(acked[w], v)
		if seen++; seen == acks {
			require.NoError(t, cmd.Process.Kill()) // SIGKILL: no defers, no Close
		}
	}
	waitErr := cmd.Wait()
	require.GreaterOrEqual(t, seen, acks, "the writer stopped before it was killed (%v):\n%s\n%s",
		waitErr, strings.Join(other, "\n"), stderr.String())
	var exit *exec.ExitError
	require.True(t, errors.As(waitErr, &exit) && !exit.Exited(), "the writer died of the kill, not otherwise: %v", waitErr)
	t.Logf("writer killed after %d acknowledged writes (%d printed before it died)", acks, seen)

	s := cfg.Reopen(t)
	require.NotNil(t, s)
	defer s.Close()
	for w := range crashWriters {
		var versions [crashRecordsPer]int64
		for i := range crashRecordsPer {
			r, err := s.Get(t.Context(), crashKind, crashID(w, i))
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			require.NoError(t, err)
			versions[i] = r.Version
			assert.Equal(t, strconv.FormatInt(r.Version, 10), string(r.Data), "data of %s/%s", crashKind, crashID(w, i))
		}
		for i := 1; i < crashRecordsPer; i++ {
			assert.Equal(t, versions[0], versions[i], "writer %d: one Apply's records are all at one version (all of a batch or none)", w)
		}
		assert.GreaterOrEqual(t, versions[0], acked[w], "writer %d: its last acknowledged write survived", w)
		assert.LessOrEqual(t, versions[0], acked[w]+1, "writer %d: at most the write in flight landed unacknowledged", w)
	}
}

// WriterProcess is the writer side of KillWriter: when the test binary runs
// as KillWriter's writer it opens the store with open and writes until it
// is killed; otherwise it skips the test. Call it from the test function
// that KillConfig.HelperTest names.
func WriterProcess(t *testing.T, open func(t *testing.T) store.Store) {
	if os.Getenv(writerEnv) == "" {
		t.Skip("runs only as the writer process that storetest.KillWriter kills")
	}
	s := open(t)
	require.NotNil(t, s)
	var out sync.Mutex
	var wg sync.WaitGroup
	for w := range crashWriters {
		wg.Go(func() {
			for v := int64(1); ; v++ {
				ops := make([]store.Op, crashRecordsPer)
				for i := range ops {
					ops[i] = put(crashKind, crashID(w, i), v-1, strconv.FormatInt(v, 10))
				}
				if _, err := s.Apply(t.Context(), ops...); err != nil {
					fmt.Fprintf(os.Stdout, "writer %d failed: %v\n", w, err)
					return
				}
				// One write(2) per line: once it returns, the line is in
				// the pipe and outlives this process.
				out.Lock()
				_, err := fmt.Fprintf(os.Stdout, "ack %d %d\n", w, v)
				out.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	t.Fatal("every writer stopped before the kill")
}

func crashID(writer, record int) string { return fmt.Sprintf("w%02d-r%d", writer, record) }
