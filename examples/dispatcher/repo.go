package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The demo repository's and the agents' commits are made by this identity,
// with the machine's global and system git config left out: a newcomer's
// core.hooksPath or commit.gpgsign would otherwise make them fail.
const gitName, gitEmail = "Foreman Demo", "demo@foreman.invalid"

func isolatedGit() []string {
	return []string{"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1"}
}

// gitEnv is the environment the agents commit with.
func gitEnv() []string {
	return append([]string{"GIT_AUTHOR_NAME=" + gitName, "GIT_AUTHOR_EMAIL=" + gitEmail,
		"GIT_COMMITTER_NAME=" + gitName, "GIT_COMMITTER_EMAIL=" + gitEmail}, isolatedGit()...)
}

// git runs git in dir and returns its output.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), gitEnv()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// newRepo creates a git repository in dir holding a tiny Go module,
// committed on branch main.
func newRepo(ctx context.Context, dir string) error {
	files := map[string]string{
		"go.mod":  "module example.com/calc\n\ngo 1.21\n",
		"calc.go": "// Package calc is the demo module the scripted agents work on.\npackage calc\n\n// Sub returns a minus b.\nfunc Sub(a, b int) int { return a - b }\n",
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
		if _, err := git(ctx, dir, args...); err != nil {
			return err
		}
	}
	return nil
}
