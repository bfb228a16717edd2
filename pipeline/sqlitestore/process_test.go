package sqlitestore_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline/sqlitestore"
	"github.com/agentforeman/foreman/pipeline/store"
)

// readerDBEnv tells the re-executed test binary to act as the reader
// process of TestAnotherProcessReadsWhileWriting.
const readerDBEnv = "FOREMAN_SQLITESTORE_READER_DB"

// The reader stops once it has read this often and seen this many
// different versions, so that its run overlaps many of the parent's commits.
const (
	readerMinReads    = 300
	readerMinVersions = 30
)

// TestAnotherProcessReadsWhileWriting runs a reader in a separate process
// (this test binary again) that lists a pair of records the parent keeps
// rewriting in one Apply each: the reader must never fail and never see the
// pair out of step or going back.
func TestAnotherProcessReadsWhileWriting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path, sqlitestore.Options{})
	_, err := s.Apply(t.Context(),
		store.Op{Kind: "pair", ID: "a", Data: []byte("1")},
		store.Op{Kind: "pair", ID: "b", Data: []byte("1")})
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestReaderProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), readerDBEnv+"="+path)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	writes := 0
	var readerErr error
write:
	for v := int64(1); ; v++ {
		select {
		case readerErr = <-exited:
			break write
		default:
		}
		data := []byte(strconv.FormatInt(v+1, 10))
		_, err := s.Apply(ctx,
			store.Op{Kind: "pair", ID: "a", ExpectVersion: v, Data: data},
			store.Op{Kind: "pair", ID: "b", ExpectVersion: v, Data: data})
		if err != nil {
			cancel()
			<-exited
			require.NoError(t, err, "writer failed; reader output:\n%s", out.String())
		}
		writes++
	}
	require.NoError(t, readerErr, "reader process failed:\n%s", out.String())
	m := regexp.MustCompile(`reader ok: reads=(\d+) versions=(\d+)`).FindStringSubmatch(out.String())
	require.NotNil(t, m, "reader output:\n%s", out.String())
	t.Logf("parent wrote %d batches while the reader process made %s reads and saw %s versions", writes, m[1], m[2])
	assert.Positive(t, writes)
}

// TestReaderProcess is the reader side of TestAnotherProcessReadsWhileWriting;
// run on its own it does nothing.
func TestReaderProcess(t *testing.T) {
	path := os.Getenv(readerDBEnv)
	if path == "" {
		t.Skip("runs only as the reader process of TestAnotherProcessReadsWhileWriting")
	}
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer s.Close()

	var last int64
	versions := map[int64]bool{}
	reads := 0
	for reads < readerMinReads || len(versions) < readerMinVersions {
		list, err := s.List(t.Context(), "pair")
		require.NoError(t, err)
		require.Len(t, list, 2)
		a, b := list[0], list[1]
		require.Equal(t, a.Version, b.Version, "one Apply, seen whole")
		require.Equal(t, string(a.Data), string(b.Data))
		require.Equal(t, strconv.FormatInt(a.Version, 10), string(a.Data))
		require.GreaterOrEqual(t, a.Version, last, "versions never go back")
		got, err := s.Get(t.Context(), "pair", "a")
		require.NoError(t, err)
		require.GreaterOrEqual(t, got.Version, a.Version)
		last = got.Version
		versions[a.Version] = true
		reads++
	}
	fmt.Printf("reader ok: reads=%d versions=%d\n", reads, len(versions))
}
