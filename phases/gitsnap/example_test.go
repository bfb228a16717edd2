package gitsnap_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/gitsnap"
)

// git runs git in dir with an explicit identity, as CI machines have none.
func git(dir string, args ...string) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_AUTHOR_NAME=Example", "GIT_AUTHOR_EMAIL=example@example.com",
		"GIT_COMMITTER_NAME=Example", "GIT_COMMITTER_EMAIL=example@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		panic(fmt.Sprint(err, string(out)))
	}
}

func Example() {
	dir, _ := os.MkdirTemp("", "gitsnap-example")
	defer os.RemoveAll(dir)
	git(dir, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n"), 0o644)
	git(dir, "add", "-A")
	git(dir, "commit", "-q", "-m", "initial")

	ctx := context.Background()
	snapshotter := gitsnap.New(gitsnap.Config{})
	before, err := snapshotter.Before(ctx, dir)
	if err != nil {
		panic(err)
	}

	// The agent commits one change and leaves a new file untracked.
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	git(dir, "commit", "-q", "-am", "add main")
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("todo\n"), 0o644)

	snap, err := snapshotter.Capture(ctx, dir, before, phases.SnapshotMeta{RunID: "run-1", Iteration: 1})
	if err != nil {
		panic(err)
	}
	for _, c := range snap.Commits {
		fmt.Println("commit:", c.Subject)
	}
	for _, f := range snap.Files {
		fmt.Printf("%s %s +%d -%d\n", f.Status, f.Path, f.Insertions, f.Deletions)
	}
	fmt.Println("uncommitted:", snap.Uncommitted)
	fmt.Println("empty:", snap.Empty())
	// Output:
	// commit: add main
	// M main.go +2 -0
	// ? notes.txt +1 -0
	// uncommitted: [notes.txt]
	// empty: false
}
