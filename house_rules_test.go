package foreman_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// House rule: no package-level mutable state but sentinel errors. An exported
// variable can be reassigned by any importer, changing every component in the
// process, so across the whole module the only exported package-level
// variables allowed are Err* sentinels. (Packages may check stricter rules of
// their own, as merge does.)
func TestNoExportedPackageVariablesButSentinelErrors(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.VAR {
				continue
			}
			for _, spec := range gen.Specs {
				for _, id := range spec.(*ast.ValueSpec).Names {
					if id.IsExported() {
						assert.True(t, strings.HasPrefix(id.Name, "Err"), "%s: exported package-level variable %s", fset.Position(id.Pos()), id.Name)
					}
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, checked, 50, "the walk must have found the module's source files")
}

// House rule: the docs speak the user's language. Foreman was specified
// from four design documents of earlier orchestrators; code and docs name
// the concept (story flow, task graph, worker pool, crash protocol), never
// "seed 000" or "the seed", which mean nothing to a user reading go doc.
func TestLibraryCodeNamesConceptsNotDesignDocuments(t *testing.T) {
	seedRef := regexp.MustCompile(`(?i)\bseed 00[0-4]\b|\bthe seeds?\b|\bseed's\b`)
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		for i, line := range strings.Split(string(data), "\n") {
			assert.False(t, seedRef.MatchString(line), "%s:%d speaks of the design documents: %s", path, i+1, strings.TrimSpace(line))
		}
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, checked, 50)
}

// House rule: tests never sleep to wait. A time.Sleep in a test guesses
// how long something takes: on a loaded machine the guess is short and the
// test fails for nothing (a healthy leader lost its lease, a fake clock
// moved before its timer was armed), on an idle one it is long and wastes
// the time. A test waits on the thing itself: a channel or event, a FIFO
// another process writes, a fake clock (BlockUntil, Advance, Set), or, for
// the state of another process, a check on a ticker with a deadline. The
// sleeps left are listed here by file and function, each with why nothing
// else does; an entry whose sleep has gone fails too, so that the list stays
// short and true.
func TestTestsDoNotSleep(t *testing.T) {
	allowed := map[string]string{
		"bench/riverbench/handoff_test.go:benchRiver": "a benchmark polls river's jobs table for its completer's batched writes, " +
			"of which river reports nothing; its time is the measurement",
	}
	fset := token.NewFileSet()
	checked := 0
	found := map[string][]string{} // "file:func" -> positions
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		for _, sleep := range sleepsIn(f) {
			key := filepath.ToSlash(path) + ":" + sleep.fn
			found[key] = append(found[key], fset.Position(sleep.pos).String())
		}
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, checked, 100, "the walk must have found the module's test files")
	for key, at := range found {
		if _, ok := allowed[key]; !ok {
			assert.Fail(t, "a test sleeps", "%s: time.Sleep in a test (%s): wait on the condition itself (a channel, an event, "+
				"a FIFO, a fake clock's BlockUntil or Advance, a ticker with a deadline for another process's state); "+
				"if nothing else can do, add it to the allowed list with the reason", key, strings.Join(at, ", "))
		}
	}
	for key, why := range allowed {
		assert.NotEmpty(t, why, "%s: an allowed sleep says why", key)
		assert.Contains(t, found, key, "%s is on the allowed list but sleeps no more: take it off", key)
	}
}

type sleepCall struct {
	fn  string // the enclosing function, "Type.Method" for a method
	pos token.Pos
}

// sleepsIn finds every use of time.Sleep in f, called or not, whatever name
// the time package is imported under; a dot import of time counts as one.
func sleepsIn(f *ast.File) []sleepCall {
	names := map[string]bool{}
	var found []sleepCall
	for _, imp := range f.Imports {
		if imp.Path.Value != `"time"` {
			continue
		}
		switch {
		case imp.Name == nil:
			names["time"] = true
		case imp.Name.Name == ".":
			found = append(found, sleepCall{fn: "(dot import of time)", pos: imp.Pos()})
		case imp.Name.Name != "_":
			names[imp.Name.Name] = true
		}
	}
	for _, decl := range f.Decls {
		fn := "(package level)"
		if fd, ok := decl.(*ast.FuncDecl); ok {
			fn = fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) == 1 {
				recv := fd.Recv.List[0].Type
				if star, ok := recv.(*ast.StarExpr); ok {
					recv = star.X
				}
				if idx, ok := recv.(*ast.IndexExpr); ok {
					recv = idx.X
				}
				if id, ok := recv.(*ast.Ident); ok {
					fn = id.Name + "." + fn
				}
			}
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Sleep" {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && names[x.Name] {
				found = append(found, sleepCall{fn: fn, pos: sel.Pos()})
			}
			return true
		})
	}
	return found
}

// The check itself finds a sleep however it is written, and only a sleep.
func TestSleepsInFindsEverySleep(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"a call", "import \"time\"\nfunc TestX() { time.Sleep(time.Second) }", []string{"TestX"}},
		{"in a closure of a method", "import \"time\"\ntype f struct{}\nfunc (x *f) wait() { go func() { time.Sleep(1) }() }", []string{"f.wait"}},
		{"renamed import, not called", "import tm \"time\"\nvar nap = tm.Sleep", []string{"(package level)"}},
		{"dot import", "import . \"time\"\nfunc TestX() { Sleep(1) }", []string{"(dot import of time)"}},
		{"another package's Sleep", "import \"example.com/clock\"\nfunc TestX() { clock.Sleep(nil, nil, 1) }", nil},
		{"time used otherwise", "import \"time\"\nfunc TestX() { <-time.After(time.Second) }", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parser.ParseFile(token.NewFileSet(), "x_test.go", "package x\n"+tc.src, parser.SkipObjectResolution)
			require.NoError(t, err)
			var got []string
			for _, s := range sleepsIn(f) {
				got = append(got, s.fn)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}
