package health_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentforeman/foreman/health"
)

// Checkpoints live outside the worktree, are written atomically, and render
// the resume block for a fresh worker.
func ExampleCheckpointStore() {
	ctx := context.Background()
	root, _ := os.MkdirTemp("", "checkpoints")
	defer os.RemoveAll(root)
	worktrees := filepath.Join(root, "worktrees") // for example merge.Manager.Root()

	_, err := health.NewCheckpointStore(health.CheckpointStoreConfig{
		Dir: filepath.Join(worktrees, "PROJ-42", ".pipeline"), WorktreeRoots: []string{worktrees}})
	fmt.Println("inside the worktrees:", errors.Is(err, health.ErrCheckpointInWorktree))

	store, _ := health.NewCheckpointStore(health.CheckpointStoreConfig{
		Dir: filepath.Join(root, "state"), WorktreeRoots: []string{worktrees}})
	_ = store.Save(ctx, health.Checkpoint{
		Item: "PROJ-42", Stage: 2, Assignment: "PROJ-42-s2-1",
		TasksCompleted: []string{"PROJ-101"}, TasksRemaining: []string{"PROJ-102", "PROJ-103"},
		LastAction: "Implemented PROJ-101",
	}, health.SaveOptions{})
	cp, _ := store.Load(ctx, "PROJ-42")
	fmt.Print(health.RenderResume(cp))

	_ = os.WriteFile(store.Path("PROJ-42"), []byte("{not json"), 0o644)
	_, err = store.Load(ctx, "PROJ-42")
	fmt.Println("corrupt:", errors.Is(err, health.ErrCorruptCheckpoint))
	err = store.Save(ctx, cp, health.SaveOptions{})
	fmt.Println("overwrite refused:", errors.Is(err, health.ErrCorruptCheckpoint))
	// Output:
	// inside the worktrees: true
	// CHECKPOINT RESUME — DO NOT re-execute completed work.
	// Item: PROJ-42, stage 2
	// Tasks already completed: PROJ-101
	// Tasks remaining: PROJ-102, PROJ-103
	// Last action: Implemented PROJ-101
	// Continue from remaining tasks only.
	// corrupt: true
	// overwrite refused: true
}
