package team_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDocExampleCompiles type-checks the package doc's first code block (a
// user's first read, from go doc) as the body of a function: it once used
// a variable defined nowhere. The block is compiled into a package that
// exists only in a go build overlay.
func TestDocExampleCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	require.NoError(t, err)
	var block []string
	for _, line := range strings.Split(docText(f.Doc), "\n") {
		if strings.HasPrefix(line, "\t") {
			block = append(block, line)
		} else if len(block) > 0 && line != "" {
			break
		}
	}
	require.NotEmpty(t, block, "the package doc's first code block")
	src := `package docexample

import (
	"context"
	"fmt"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline/team"
)

var (
	_ = foreman.ItemID("")
	_ = agentcmd.New
	_ = phases.Commands
	_ = fmt.Sprint
)

func example(ctx context.Context, dir string) error {
` + strings.Join(block, "\n") + `
	return err
}
`
	dir := t.TempDir()
	file := filepath.Join(dir, "example.go")
	require.NoError(t, os.WriteFile(file, []byte(src), 0o600))
	abs, err := filepath.Abs("internal/docexample/example.go")
	require.NoError(t, err)
	overlay, err := json.Marshal(map[string]any{"Replace": map[string]string{abs: file}})
	require.NoError(t, err)
	ov := filepath.Join(dir, "overlay.json")
	require.NoError(t, os.WriteFile(ov, overlay, 0o600))
	cmd := exec.Command(goBin, "build", "-overlay", ov, "./internal/docexample")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the package doc's example does not compile:\n%s\n%s", out, src)
}

func docText(g *ast.CommentGroup) string {
	var b strings.Builder
	for _, c := range g.List {
		b.WriteString(strings.TrimPrefix(strings.TrimPrefix(c.Text, "//"), " "))
		b.WriteByte('\n')
	}
	return b.String()
}
