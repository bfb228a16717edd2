package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/internal/testrepo"
)

// Identity is the git identity demo repositories and agents commit with.
func Identity() gitexec.Identity {
	return gitexec.Identity{Name: "Foreman Demo", Email: "demo@foreman.invalid"}
}

// IsolatedGitConfig keeps the machine's global and system git settings out
// of demo repositories: a global core.hooksPath, commit.gpgsign or the like
// would otherwise make a throwaway repository's commits fail or differ from
// machine to machine.
func IsolatedGitConfig() []string {
	return []string{"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1"}
}

// GitEnv is the environment a scripted agent needs to commit in a demo
// repository on any machine: an identity (there may be no global one) and
// IsolatedGitConfig.
func GitEnv() []string {
	id := Identity()
	return append([]string{
		"GIT_AUTHOR_NAME=" + id.Name, "GIT_AUTHOR_EMAIL=" + id.Email,
		"GIT_COMMITTER_NAME=" + id.Name, "GIT_COMMITTER_EMAIL=" + id.Email,
	}, IsolatedGitConfig()...)
}

const goMod = "module example.com/calc\n\ngo 1.21\n"

const calcGo = `// Package calc is the demo module Foreman's scripted agents work on.
package calc

// Sub returns a minus b.
func Sub(a, b int) int { return a - b }
`

const calcTestGo = `package calc

import "testing"

func TestSub(t *testing.T) {
	if got := Sub(5, 3); got != 2 {
		t.Fatalf("Sub(5, 3) = %d, want 2", got)
	}
}
`

// NewGoModuleRepo creates a git repository in dir (which must be empty or
// missing) holding a tiny Go module with one passing test, committed on
// branch main. The commit is written without running git (internal/testrepo:
// the same commit git init, add and commit would make), as the tests make
// many such repositories.
func NewGoModuleRepo(ctx context.Context, dir string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	files := map[string]string{"go.mod": goMod, "calc.go": calcGo, "calc_test.go": calcTestGo}
	if _, err := testrepo.New(dir, "main", testrepo.Commit{Files: files, Message: "calc: initial module", Author: Identity()}); err != nil {
		return fmt.Errorf("demo repo: %w", err)
	}
	return nil
}

// AddAgentScript is a scripted agent for the task "add an Add function with
// a test". Its first attempt is wrong (Add subtracts); when its prompt
// carries feedback naming the failing TestAdd, it fixes the bug. Each
// attempt is committed. The prompt arrives as $1.
const AddAgentScript = `#!/bin/sh
set -eu
prompt="$1"
echo "agent: iteration ${FOREMAN_ITERATION:-?} in $(pwd)"
if printf '%s' "$prompt" | grep -q 'TestAdd'; then
  echo "agent: feedback names TestAdd; fixing the operator"
  sed -i 's/return a - b \/\/ add/return a + b \/\/ add/' add.go
  git commit -qam "calc: fix Add after feedback"
else
  echo "agent: writing Add and its test"
  cat > add.go <<'GO'
package calc

// Add returns the sum of a and b.
func Add(a, b int) int {
	return a - b // add
}
GO
  cat > add_test.go <<'GO'
package calc

import "testing"

func TestAdd(t *testing.T) {
	if got := Add(2, 3); got != 5 {
		t.Fatalf("Add(2, 3) = %d, want 5", got)
	}
}
GO
  git add add.go add_test.go
  git commit -qm "calc: add Add"
fi
echo "agent: done"
`

// WriteScript writes an executable script to dir/name and returns its path.
func WriteScript(dir, name, body string) (string, error) {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		return "", err
	}
	return path, nil
}
