package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The demo repository's and the agent's commits are made by this identity,
// with the machine's global and system git config left out: a newcomer's
// core.hooksPath or commit.gpgsign would otherwise make them fail.
const gitName, gitEmail = "Foreman Demo", "demo@foreman.invalid"

func isolatedGit() []string {
	return []string{"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1"}
}

// gitEnv is the environment the demo's agent commits with.
func gitEnv() []string {
	return append([]string{"GIT_AUTHOR_NAME=" + gitName, "GIT_AUTHOR_EMAIL=" + gitEmail,
		"GIT_COMMITTER_NAME=" + gitName, "GIT_COMMITTER_EMAIL=" + gitEmail}, isolatedGit()...)
}

// newRepo creates a git repository in dir holding a tiny Go module with
// one passing test, committed on branch main.
func newRepo(ctx context.Context, dir string) error {
	files := map[string]string{
		"go.mod":  "module example.com/calc\n\ngo 1.21\n",
		"calc.go": "// Package calc is the demo module the scripted agent works on.\npackage calc\n\n// Sub returns a minus b.\nfunc Sub(a, b int) int { return a - b }\n",
		"calc_test.go": `package calc

import "testing"

func TestSub(t *testing.T) {
	if got := Sub(5, 3); got != 2 {
		t.Fatalf("Sub(5, 3) = %d, want 2", got)
	}
}
`,
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "calc: initial module"}} {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), gitEnv()...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("demo repo: git %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// agentScript is the demo's scripted agent for the task "add an Add
// function with a test". Its first attempt is wrong (Add subtracts); when
// its prompt carries feedback naming the failing TestAdd, it fixes the
// bug. Each attempt is committed. The prompt arrives as $1.
const agentScript = `#!/bin/sh
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
  git add -A
  git commit -qm "calc: add Add"
fi
echo "agent: done"
`

// shellCheck reports a command line sh cannot parse, in sh's words.
func shellCheck(cmdline string) error {
	if out, err := exec.Command("sh", "-n", "-c", cmdline).CombinedOutput(); err != nil {
		return fmt.Errorf("%s (%w)", strings.TrimSpace(string(out)), err)
	}
	return nil
}

// shellArgv runs an agent command line with sh, which splits it (quotes
// and all) as the user's shell would. agentcmd's placeholders become sh's
// positional arguments, so a prompt is never pasted into the command line;
// with none of {prompt}, {task} and {feedback}, the prompt comes last, as
// agentcmd would put it.
func shellArgv(cmdline string) ([]string, error) {
	if err := shellCheck(cmdline); err != nil {
		return nil, err
	}
	names := []string{"prompt", "task", "feedback", "session", "workspace", "iteration"}
	line, vars := cmdline, ""
	argv := []string{"sh", "-c", "", "agent"}
	for i, n := range names {
		line = strings.ReplaceAll(line, "{"+n+"}", `"$`+n+`"`)
		vars += fmt.Sprintf("%s=$%d ", n, i+1)
		argv = append(argv, "{"+n+"}")
	}
	if !strings.Contains(cmdline, "{prompt}") && !strings.Contains(cmdline, "{task}") && !strings.Contains(cmdline, "{feedback}") {
		line += ` "$prompt"`
	}
	// "$@" carries the arguments agentcmd adds after the command (a resume).
	argv[2] = vars + "; shift " + fmt.Sprint(len(names)) + "; " + line + ` "$@"`
	return argv, nil
}
