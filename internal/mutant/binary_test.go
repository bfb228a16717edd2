//go:build !foreman_mutants

package mutant_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agentforeman/foreman/internal/mutant"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// build compiles testdata/probe, which links every function that holds a
// mutant's guard (pipeline.Runtime.Handle, Flow.Step,
// DispatcherSpawner.Spawn, worker.Dispatcher.Submit and Deliver), with
// the given build tags, and returns the binary.
func build(t *testing.T, tags string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "probe")
	cmd := exec.Command("go", "build", "-tags", tags, "-o", out, "./testdata/probe")
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", msg)
	bin, err := os.ReadFile(out)
	require.NoError(t, err)
	return bin
}

// A plain build holds no mutant: the compiler removed every guarded bug
// (the mutants' names, the environment variable and the
// merge-before-persist helper are absent from the binary), while a build
// with the foreman_mutants tag holds them. (A method's name would stay in
// its type's method table even with its code removed, which is why the
// merge-before-persist helper is a function.)
func TestPlainBinaryHoldsNoMutant(t *testing.T) {
	markers := []string{mutant.Env, "mergeFirst"}
	for _, m := range mutant.All() {
		markers = append(markers, string(m))
	}
	plain := build(t, "")
	for _, m := range markers {
		assert.False(t, bytes.Contains(plain, []byte(m)), "a plain build holds %q", m)
	}
	tagged := build(t, "foreman_mutants")
	for _, m := range []string{mutant.Env, "mergeFirst", string(mutant.SpawnTwice), string(mutant.NoBudget)} {
		assert.True(t, bytes.Contains(tagged, []byte(m)), "a foreman_mutants build lacks %q: the check cannot see it", m)
	}
}
