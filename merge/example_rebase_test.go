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

// A squash that conflicts, rebased in the item's worktree: the rebase
// conflicts too, and the conflict comes back with both sides of it, the
// rebase aborted. A host gives it to the item's agent (or to a person).
func ExampleManager_Rebase() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "foreman-rebase-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ada := merge.Identity{Name: "Ada", Email: "ada@example.com"}
	run := func(dir string, args ...string) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME="+ada.Name, "GIT_AUTHOR_EMAIL="+ada.Email,
			"GIT_COMMITTER_NAME="+ada.Name, "GIT_COMMITTER_EMAIL="+ada.Email)
		if out, err := cmd.CombinedOutput(); err != nil {
			log.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	write := func(dir, content string) {
		if err := os.WriteFile(filepath.Join(dir, "greeting.txt"), []byte(content), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	run(dir, "init", "-q", "-b", "main")
	write(dir, "hello\nworld\n")
	run(dir, "add", "-A")
	run(dir, "commit", "-q", "-m", "initial")

	m, err := merge.New(ctx, merge.Config{Repo: dir, Author: ada})
	if err != nil {
		log.Fatal(err)
	}
	wt, err := m.Create(ctx, "story-7")
	if err != nil {
		log.Fatal(err)
	}
	write(wt.Path, "hello\nthere\n") // the item's change
	run(wt.Path, "commit", "-q", "-am", "greet them")
	write(dir, "hello\neveryone\n") // landed on main meanwhile
	run(dir, "commit", "-q", "-am", "greet everyone")

	_, err = m.Rebase(ctx, "story-7", merge.RebaseOptions{Context: 1})
	var conflict *merge.ConflictError
	if !errors.As(err, &conflict) {
		log.Fatal("want a conflict, got ", err)
	}
	for _, f := range conflict.Conflicts {
		for _, h := range f.Hunks {
			fmt.Printf("%s line %d: main has %q, the item %q\n", f.Path, h.Line, h.Target, h.Item)
		}
	}
	out, _ := exec.Command("git", "-C", wt.Path, "status", "--porcelain").Output()
	fmt.Printf("worktree after the abort: %q\n", out)
	// Output:
	// greeting.txt line 1: main has ["everyone"], the item ["there"]
	// worktree after the abort: ""
}
