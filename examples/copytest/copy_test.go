package copytest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/agentforeman/foreman"

// goCmd runs the go command in dir with env added, and returns its output.
func goCmd(t *testing.T, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// goList runs go list in dir and returns its standard output alone: on a
// fresh module cache the go command reports downloads on standard error.
func goList(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list %s: %s", strings.Join(args, " "), stderr.String())
	return string(out)
}

// repoRoot is the directory of this checkout's go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	gomod := strings.TrimSpace(goList(t, ".", "-m", "-f", "{{.GoMod}}"))
	require.NotEmpty(t, gomod, "not inside a module")
	return filepath.Dir(gomod)
}

type listedPackage struct {
	Dir, ImportPath, Name string
	GoFiles, TestGoFiles  []string
	Imports, TestImports  []string
}

// examples lists the example programs: every main package under examples/.
func examples(t *testing.T, root string) []listedPackage {
	t.Helper()
	out := goList(t, root, "-json", "./examples/...")
	var found []listedPackage
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var p listedPackage
		require.NoError(t, dec.Decode(&p))
		if p.Name == "main" {
			found = append(found, p)
		}
	}
	require.NotEmpty(t, found, "no example programs under %s/examples", root)
	return found
}

// No example, nor its test, imports a package a user's module could not:
// Foreman's internal/ packages.
func TestExamplesImportNothingInternal(t *testing.T) {
	for _, p := range examples(t, repoRoot(t)) {
		for _, imp := range append(p.Imports, p.TestImports...) {
			assert.False(t, strings.HasPrefix(imp, module+"/internal/") || imp == module+"/internal",
				"%s imports %s: examples are for copying, and a user's module cannot import internal/", p.ImportPath, imp)
		}
	}
}

// Each example, copied with its tests into a fresh module in a temporary
// directory outside the repository, requiring Foreman through a replace
// to this checkout, tidies, builds, and its tests compile (go vet).
func TestExamplesBuildInAFreshModule(t *testing.T) {
	// Building every example in a module of its own is a minute of CPU:
	// CI runs it (FOREMAN_STRESS=1), a developer's go test ./... does not.
	if v := os.Getenv("FOREMAN_STRESS"); v == "" || v == "0" {
		t.Skip("long run: FOREMAN_STRESS=1 runs it (CI does)")
	}
	root := repoRoot(t)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	// The proxy stays as the environment sets it: go mod tidy reads the
	// go.mod of every module in the graph, including some that building
	// Foreman never needs (a fresh machine's module cache lacks them).
	env := []string{"GOFLAGS=-mod=mod " + os.Getenv("GOFLAGS"), "GOWORK=off", "GOTOOLCHAIN=local"}
	for _, p := range examples(t, root) {
		name := filepath.Base(p.Dir)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), name)
			rel, err := filepath.Rel(root, dir)
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(rel, ".."), "the copy %s must be outside the repository %s (set TMPDIR elsewhere)", dir, root)
			require.NoError(t, os.MkdirAll(dir, 0o755))
			for _, f := range append(p.GoFiles, p.TestGoFiles...) {
				data, err := os.ReadFile(filepath.Join(p.Dir, f))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(dir, f), data, 0o644))
			}
			gomod := fmt.Sprintf("module example.com/%s\n\ngo 1.26\n\nrequire %s v0.0.0\n\nreplace %s => %s\n", name, module, module, root)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644))
			// Foreman's own checksums, so only modules new to the graph go
			// to the checksum database.
			require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
			// -buildvcs=false: the copy has no version control to stamp, and a
			// stray .git above it (Codex's own sandbox leaves an empty
			// /tmp/.git as a mount point) would fail the build.
			for _, args := range [][]string{{"mod", "tidy"}, {"build", "-buildvcs=false", "-o", os.DevNull, "."}, {"vet", "."}} {
				out, err := goCmd(t, dir, env, args...)
				require.NoError(t, err, "go %s in the copy of %s:\n%s", strings.Join(args, " "), p.ImportPath, out)
			}
		})
	}
}
