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
		"bench/riverbench/heartbeat_test.go:BenchmarkHeartbeats": "a benchmark measures what 10,000 heartbeating runs cost over " +
			"whole heartbeat periods (one to settle, then the measured ones): the window is the measurement, no condition ends it",
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

// House rule: every exported field of a Config or Options struct says what
// happens when the host leaves it out, in one form: its doc explains the
// field and ends with the sentence "Required." or "Default: <value or
// behaviour>." (a field with no default behaviour says "Default: none (…)."
// with what its zero value means). Checked in every package a host imports:
// all but internal/, examples/ and tests.
func TestConfigFieldsSayRequiredOrDefault(t *testing.T) {
	fset := token.NewFileSet()
	packages := map[string]bool{} // every package directory walked
	types := map[string]bool{}    // every Config or Options type found
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path == "." {
				return nil
			}
			if strings.HasPrefix(name, ".") || name == "testdata" || name == "internal" || name == "examples" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module (bench/riverbench)
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(path))
		if pkg == "." {
			pkg = "foreman"
		}
		packages[pkg] = true
		for _, p := range configFieldProblems(f) {
			key := pkg + "." + p.typ
			types[key] = true
			if p.field == "" {
				continue
			}
			assert.Fail(t, "a Config field does not say Required or its default",
				"%s: %s.%s: %s; end its doc with the sentence \"Required.\" or \"Default: <value or behaviour>.\"",
				fset.Position(p.pos), key, p.field, p.why)
		}
		return nil
	})
	require.NoError(t, err)
	// The walk must reach every package a host imports, the nested ones too.
	for _, pkg := range []string{"foreman", "health", "merge", "merge/gitremote", "phases", "phases/agentmcp", "phases/gates",
		"phases/gitsnap", "pipeline/pgstore", "pipeline/sqlitestore", "pipeline/store", "pipeline/store/storetest",
		"pipeline/taskgraph", "pipeline/team", "pipeline/team/teammetrics", "pipeline/team/teamnotify",
		"pipeline/team/teampg", "pipeline/team/teamsim", "pipeline/team/teamweb", "worker", "worker/pgtransport", "worker/transporttest"} {
		assert.True(t, packages[pkg], "the walk did not reach package %s", pkg)
	}
	assert.Greater(t, len(types), 40, "the walk must have found the module's Config and Options types")
}

type configFieldProblem struct {
	typ   string    // the Config or Options type
	field string    // the field breaking the rule, "" for a type reported only as found
	why   string    // what is wrong with its doc
	pos   token.Pos // the field's position
}

// sentenceStart finds where a sentence begins after another ends: a full
// stop, question or exclamation mark (and a closing parenthesis or quote)
// followed by white space and a capital letter.
var sentenceStart = regexp.MustCompile(`[.!?][)"']?\s+[A-Z]`)

// configFieldProblems reports, for every exported struct type of f whose name
// ends in Config or Options, the type itself (field "") and each exported
// field whose doc does not end with the sentence "Required." or a sentence
// starting "Default:" (an embedded exported type counts as a field).
func configFieldProblems(f *ast.File) []configFieldProblem {
	var found []configFieldProblem
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.TYPE {
			continue
		}
		for _, spec := range gen.Specs {
			ts := spec.(*ast.TypeSpec)
			st, ok := ts.Type.(*ast.StructType)
			name := ts.Name.Name
			if !ok || !ts.Name.IsExported() || !(strings.HasSuffix(name, "Config") || strings.HasSuffix(name, "Options")) {
				continue
			}
			found = append(found, configFieldProblem{typ: name, pos: ts.Pos()})
			for _, fld := range st.Fields.List {
				names := fld.Names
				if len(names) == 0 { // embedded: named after its type
					typ := fld.Type
					if star, ok := typ.(*ast.StarExpr); ok {
						typ = star.X
					}
					if sel, ok := typ.(*ast.SelectorExpr); ok {
						typ = sel.Sel
					}
					if id, ok := typ.(*ast.Ident); ok {
						names = []*ast.Ident{id}
					}
				}
				for _, id := range names {
					if !id.IsExported() {
						continue
					}
					if why := configDocProblem(fld.Doc.Text() + " " + fld.Comment.Text()); why != "" {
						found = append(found, configFieldProblem{typ: name, field: id.Name, why: why, pos: id.Pos()})
					}
				}
			}
		}
	}
	return found
}

// configDocProblem says what is wrong with a Config field's doc, "" if
// nothing is.
func configDocProblem(doc string) string {
	doc = strings.Join(strings.Fields(doc), " ")
	if doc == "" {
		return "no doc"
	}
	last := doc
	if m := sentenceStart.FindAllStringIndex(doc, -1); len(m) > 0 {
		last = doc[m[len(m)-1][1]-1:]
	}
	switch {
	case last == "Required.":
		return ""
	case strings.HasPrefix(last, "Default:") && strings.HasSuffix(last, ".") && len(last) > len("Default: ."):
		return ""
	case strings.HasPrefix(last, "Default:"):
		return "the default is not a sentence: " + quoteShort(last)
	}
	return "the last sentence is " + quoteShort(last)
}

func quoteShort(s string) string {
	const max = 80
	if len(s) > max {
		s = s[:max] + "…"
	}
	return `"` + s + `"`
}

// The check itself: what passes, what fails, and what counts as a Config field.
func TestConfigFieldProblemsFindsEveryUndocumentedDefault(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string // "Type.Field"
	}{
		{"required", "type Config struct {\n// Repo is the repository.\n// Required.\nRepo string }", nil},
		{"a default", "type Config struct {\n// Workers is how many run at once. Default: 4.\nWorkers int }", nil},
		{"a default of none", "type Options struct {\n// Hook is called after each step. Default: none (nil: no call).\nHook func() }", nil},
		{"a default with a decimal", "type Config struct {\n// Factor multiplies. Default: 1.5 (i.e. half again).\nFactor float64 }", nil},
		{"a trailing comment", "type Config struct {\nN int // How many. Default: 3.\n}", nil},
		{"no doc", "type Config struct {\nClock any }", []string{"Config.Clock"}},
		{"a loose default", "type Config struct {\n// Timeout bounds a call; zero means 30s.\nTimeout int }", []string{"Config.Timeout"}},
		{"required, lower case", "type Config struct {\n// Prober probes; required.\nProber any }", []string{"Config.Prober"}},
		{"the default not last", "type Config struct {\n// Limit caps it. Default: 8. Zero means none.\nLimit int }", []string{"Config.Limit"}},
		{"a default without its value", "type Config struct {\n// Limit caps it. Default:\nLimit int }", []string{"Config.Limit"}},
		{"Required inside a sentence", "type Config struct {\n// Required. Store keeps it.\nStore any }", []string{"Config.Store"}},
		{"several names, one doc", "type Options struct {\n// The bounds.\nMin, Max int }", []string{"Options.Min", "Options.Max"}},
		{"an embedded type", "type Config struct {\nforeman.Clock\n}", []string{"Config.Clock"}},
		{"an embedded pointer, documented", "type Config struct {\n// Default: the wall clock.\n*Clock\n}", nil},
		{"unexported fields", "type Config struct {\nclock any\nsecret string }", nil},
		{"an unexported Config", "type coreConfig struct {\nClock any }", nil},
		{"another struct", "type Settings struct {\nClock any }", nil},
		{"a grouped declaration", "type (\nA int\nBuildOptions struct {\nDir string }\n)", []string{"BuildOptions.Dir"}},
		{"not a struct", "type FooConfig map[string]int", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parser.ParseFile(token.NewFileSet(), "x.go", "package x\n"+tc.src, parser.ParseComments|parser.SkipObjectResolution)
			require.NoError(t, err)
			var got []string
			for _, p := range configFieldProblems(f) {
				if p.field != "" {
					got = append(got, p.typ+"."+p.field)
				}
			}
			assert.Equal(t, tc.want, got)
		})
	}
}
