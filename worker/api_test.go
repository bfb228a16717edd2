package worker_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentforeman/foreman/worker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The house rules allow no package-level mutable state but sentinel errors:
// an exported variable could be reassigned by any importer, changing every
// Dispatcher in the process.
func TestNoExportedPackageVariablesButSentinelErrors(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.VAR {
				continue
			}
			for _, spec := range gen.Specs {
				for _, id := range spec.(*ast.ValueSpec).Names {
					if id.IsExported() {
						assert.True(t, strings.HasPrefix(id.Name, "Err"), "%s: exported variable %s", name, id.Name)
					}
				}
			}
		}
	}
}

func TestNoCommitsReadsNothing(t *testing.T) {
	var r worker.CommitReader = worker.NoCommits
	head, err := r.Head(context.Background(), t.TempDir())
	assert.NoError(t, err)
	assert.Empty(t, head)
}
