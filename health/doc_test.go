package health

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Comments point a library user only at what they can open: no design
// notes of the project's history (seed files, numbered invariants, other
// projects' file names).
func TestCommentsNameNothingAUserCannotResolve(t *testing.T) {
	unresolvable := regexp.MustCompile(`(?i)\bseeds?\b|\binvariants? \d|\boro\b|\b[a-z0-9_]+\.md\b|qg_stuck`)
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ParseComments)
		require.NoError(t, err)
		for _, g := range f.Comments {
			text := strings.ReplaceAll(g.Text(), "docs/architecture.md", "")
			text = strings.ReplaceAll(text, "seeded *rand.Rand", "")
			assert.Empty(t, unresolvable.FindAllString(text, -1), "%s: %q", name, g.Text())
		}
	}
}
