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
