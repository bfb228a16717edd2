package merge_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/agentforeman/foreman/merge"
)

// A host keeps its state in .state, git-ignored, and protects it: an
// agent's commit of a file named .state (which git would check out in
// place of the directory, deleting it) is refused, and the state stays.
func ExampleProtectedPathError() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "foreman-merge-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	run := func(dir string, args ...string) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Ada", "GIT_AUTHOR_EMAIL=ada@example.com",
			"GIT_COMMITTER_NAME=Ada", "GIT_COMMITTER_EMAIL=ada@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			log.Fatalf("%v: %s", err, out)
		}
	}
	write := func(path, content string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	run(dir, "init", "-q", "-b", "main")
	run(dir, "commit", "-q", "--allow-empty", "-m", "initial")
	write(filepath.Join(dir, ".git", "info", "exclude"), "/.state/\n")
	write(filepath.Join(dir, ".state", "db"), "the host's database\n")

	m, err := merge.New(ctx, merge.Config{Repo: dir, Protected: []string{".state"}})
	if err != nil {
		log.Fatal(err)
	}
	wt, err := m.Create(ctx, "story-13")
	if err != nil {
		log.Fatal(err)
	}
	write(filepath.Join(wt.Path, ".state"), "gotcha\n")
	run(wt.Path, "add", "-A")
	run(wt.Path, "commit", "-q", "-m", "a file named .state")

	_, err = m.Merge(ctx, "story-13", merge.Request{Title: "Innocent"})
	var protected *merge.ProtectedPathError
	if errors.As(err, &protected) {
		fmt.Println("PAUSE", protected.Item, "- its", protected.Source, "adds", protected.Paths)
	}
	db, _ := os.ReadFile(filepath.Join(dir, ".state", "db"))
	fmt.Print("state: ", string(db))
	// Output:
	// PAUSE story-13 - its branch adds [.state]
	// state: the host's database
}
