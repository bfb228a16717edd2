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

// One item's life: a worktree of its own, work committed there, one squash
// commit on main, and the worktree removed.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "foreman-merge-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ada := merge.Identity{Name: "Ada", Email: "ada@example.com"}
	run := func(dir string, args ...string) string {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME="+ada.Name, "GIT_AUTHOR_EMAIL="+ada.Email,
			"GIT_COMMITTER_NAME="+ada.Name, "GIT_COMMITTER_EMAIL="+ada.Email)
		out, err := cmd.Output()
		if err != nil {
			log.Fatal(err)
		}
		return string(out)
	}
	run(dir, "init", "-q", "-b", "main")
	run(dir, "commit", "-q", "--allow-empty", "-m", "initial")

	m, err := merge.New(ctx, merge.Config{Repo: dir, Author: ada, DeleteBranchOnRemove: true})
	if err != nil {
		log.Fatal(err)
	}
	wt, err := m.Create(ctx, "story-42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("worktree:", filepath.Base(wt.Path), "on", wt.Branch)

	// The agent works in wt.Path and commits.
	if err := os.WriteFile(filepath.Join(wt.Path, "hello.txt"), []byte("hello\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	run(wt.Path, "add", "-A")
	run(wt.Path, "commit", "-q", "-m", "wip")

	res, err := m.Merge(ctx, "story-42", merge.Request{Title: "Say hello", Body: "Adds hello.txt."})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("merge:", res.Status)
	fmt.Print(run(dir, "log", "-1", "--format=%B", "main"))

	again, _ := m.Merge(ctx, "story-42", merge.Request{Title: "Say hello"})
	fmt.Println("retry:", again.Status, again.Commit == res.Commit)

	if err := m.Remove(ctx, "story-42"); err != nil {
		log.Fatal(err)
	}
	list, _ := m.List(ctx)
	fmt.Println("worktrees left:", len(list))
	// Output:
	// worktree: story-42 on foreman/story-42
	// merge: merged
	// story-42: Say hello
	//
	// Adds hello.txt.
	//
	// Foreman-Item: story-42
	//
	// retry: already-merged true
	// worktrees left: 0
}

// A conflict changes nothing: the host pauses the item and tells a person
// which files to look at.
func ExampleConflictError() {
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
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	run(dir, "init", "-q", "-b", "main")
	write(filepath.Join(dir, "config.yaml"), "port: 80\n")
	run(dir, "add", "-A")
	run(dir, "commit", "-q", "-m", "initial")

	m, err := merge.New(ctx, merge.Config{Repo: dir})
	if err != nil {
		log.Fatal(err)
	}
	wt, err := m.Create(ctx, "story-9")
	if err != nil {
		log.Fatal(err)
	}
	write(filepath.Join(wt.Path, "config.yaml"), "port: 8080\n")
	run(wt.Path, "commit", "-q", "-am", "change the port")
	write(filepath.Join(dir, "config.yaml"), "port: 443\n")
	run(dir, "commit", "-q", "-am", "meanwhile on main")

	_, err = m.Merge(ctx, "story-9", merge.Request{Title: "Move to 8080"})
	var conflict *merge.ConflictError
	if errors.As(err, &conflict) {
		fmt.Println("PAUSE", conflict.Item, "- resolve:", conflict.Files)
	}
	// Output:
	// PAUSE story-9 - resolve: [config.yaml]
}
