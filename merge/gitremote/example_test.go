package gitremote_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/merge/gitremote"
)

// A worker host builds an item in its clone and pushes it; the leader's
// merger, in a clone of its own, lands it on the shared repository.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "gitremote-example")
	defer os.RemoveAll(dir)
	shared := filepath.Join(dir, "shared.git")
	seed := filepath.Join(dir, "seed")
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", seed},
		{"-C", seed, "commit", "-q", "--allow-empty", "-m", "initial"},
		{"clone", "-q", "--bare", seed, shared},
	} {
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Ann", "GIT_AUTHOR_EMAIL=ann@example.com",
			"GIT_COMMITTER_NAME=Ann", "GIT_COMMITTER_EMAIL=ann@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Println(err, string(out))
			return
		}
	}

	worker, err := gitremote.Open(ctx, gitremote.Config{Remote: shared, Dir: filepath.Join(dir, "worker")})
	if err != nil {
		fmt.Println(err)
		return
	}
	wt, _ := worker.Checkout(ctx, "login")
	_ = os.WriteFile(filepath.Join(wt.Path, "login.go"), []byte("package app\n"), 0o644)
	if _, err := worker.Push(ctx, "login", "login: first cut"); err != nil {
		fmt.Println(err)
		return
	}

	leader, err := gitremote.Open(ctx, gitremote.Config{Remote: shared, Dir: filepath.Join(dir, "leader")})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := leader.Merge(ctx, "login", merge.Request{Title: "users can log in"})
	fmt.Println(res.Status, res.Pushed, err)
	res, err = leader.Merge(ctx, "login", merge.Request{})
	fmt.Println(res.Status, err)
	// Output:
	// merged true <nil>
	// already-merged <nil>
}
