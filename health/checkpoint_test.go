package health

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sampleCheckpoint() Checkpoint {
	score := 92.0
	return Checkpoint{
		Item: "PROJ-42", Stage: 2, Assignment: "PROJ-42-s2-a1", Worker: "story-PROJ-42-s2",
		AgentSession:   "sess-abc",
		TasksCompleted: []string{"PROJ-101", "PROJ-102"}, TasksRemaining: []string{"PROJ-103"},
		LastAction: "Implemented PROJ-102", LastCommit: "1a2b3c4",
		Verdict: "PASS", Score: &score,
		StartedAt: t0, UpdatedAt: t0.Add(30 * 60e9),
	}
}

func newStore(t *testing.T) *CheckpointStore {
	t.Helper()
	tmp := t.TempDir()
	s, err := NewCheckpointStore(CheckpointStoreConfig{
		Dir: filepath.Join(tmp, "state"), WorktreeRoots: []string{filepath.Join(tmp, "worktrees")}})
	require.NoError(t, err)
	return s
}

func TestCheckpointRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	cp := sampleCheckpoint()
	require.NoError(t, s.Save(ctx, cp, SaveOptions{}))
	got, err := s.Load(ctx, "PROJ-42")
	require.NoError(t, err)
	cp.Version = CheckpointVersion
	assert.Equal(t, cp, got)

	cp.TasksCompleted = append(cp.TasksCompleted, "PROJ-103")
	cp.TasksRemaining = nil
	require.NoError(t, s.Save(ctx, cp, SaveOptions{}), "a valid file is replaced")
	got, err = s.Load(ctx, "PROJ-42")
	require.NoError(t, err)
	assert.Equal(t, []string{}, got.TasksRemaining)
	entries, err := os.ReadDir(s.Dir())
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary files left behind")
}

func TestCheckpointStoreConfigErrors(t *testing.T) {
	abs := t.TempDir()
	tests := []struct {
		name string
		cfg  CheckpointStoreConfig
		want error
	}{
		{"relative dir", CheckpointStoreConfig{Dir: "relative/dir", WorktreeRoots: []string{abs}}, ErrRelativeCheckpointDir},
		{"no worktree roots", CheckpointStoreConfig{Dir: filepath.Join(abs, "state")}, ErrNoWorktreeRoots},
		{"relative worktree root", CheckpointStoreConfig{Dir: filepath.Join(abs, "state"),
			WorktreeRoots: []string{filepath.Join(abs, "wt"), "wt"}}, ErrRelativeWorktreeRoot},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewCheckpointStore(tt.cfg)
			assert.ErrorIs(t, err, tt.want)
		})
	}
}

// The worktree roots are structural: a store cannot be made inside one,
// and a Save whose path came to lie inside one (a directory replaced by a
// symlink) is refused.
func TestCheckpointStoreRefusesDirInsideWorktreeRoot(t *testing.T) {
	tmp := t.TempDir()
	roots := []string{filepath.Join(tmp, "other"), filepath.Join(tmp, "worktrees")}
	require.NoError(t, os.MkdirAll(filepath.Join(roots[1], "PROJ-42"), 0o755))
	link := filepath.Join(tmp, "link")
	require.NoError(t, os.Symlink(roots[1], link))

	for _, dir := range []string{
		filepath.Join(roots[1], "PROJ-42", ".pipeline"),
		roots[1],
		filepath.Join(link, "state"),
	} {
		_, err := NewCheckpointStore(CheckpointStoreConfig{Dir: dir, WorktreeRoots: roots})
		require.ErrorIs(t, err, ErrCheckpointInWorktree, dir)
		var wtErr *WorktreePathError
		require.True(t, errors.As(err, &wtErr))
		assert.Equal(t, roots[1], wtErr.Worktree)
	}

	dir := filepath.Join(tmp, "state")
	s, err := NewCheckpointStore(CheckpointStoreConfig{Dir: dir, WorktreeRoots: roots})
	require.NoError(t, err)
	assert.Equal(t, roots, s.WorktreeRoots())
	require.NoError(t, os.Symlink(filepath.Join(roots[1], "PROJ-42"), dir))
	err = s.Save(context.Background(), sampleCheckpoint(), SaveOptions{})
	require.ErrorIs(t, err, ErrCheckpointInWorktree)
	_, statErr := os.Stat(filepath.Join(roots[1], "PROJ-42", "checkpoint-PROJ-42.json"))
	assert.True(t, os.IsNotExist(statErr), "nothing written")
}

func TestCheckpointLoadMissing(t *testing.T) {
	_, err := newStore(t).Load(context.Background(), "PROJ-1")
	assert.ErrorIs(t, err, ErrNoCheckpoint)
}

func TestCheckpointLoadRejectsInvalidItemID(t *testing.T) {
	_, err := newStore(t).Load(context.Background(), "../etc")
	assert.Error(t, err)
	assert.NotErrorIs(t, err, ErrNoCheckpoint)
}

func TestCheckpointCorruptOrFutureIsTypedAndKept(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    error
		version int
	}{
		{"not JSON", `{"version": 1, "item": "PROJ-42"`, ErrCorruptCheckpoint, 0},
		{"truncated to empty", ``, ErrCorruptCheckpoint, 0},
		{"no version", `{"item": "PROJ-42", "stage": 1}`, ErrCorruptCheckpoint, 0},
		{"version zero", `{"version": 0, "item": "PROJ-42"}`, ErrCorruptCheckpoint, 0},
		{"unknown field", `{"version": 1, "item": "PROJ-42", "surprise": true}`, ErrCorruptCheckpoint, 0},
		{"wrong type", `{"version": 1, "item": "PROJ-42", "stage": "two"}`, ErrCorruptCheckpoint, 0},
		{"invalid item id", `{"version": 1, "item": "../x"}`, ErrCorruptCheckpoint, 0},
		{"other item", `{"version": 1, "item": "PROJ-7"}`, ErrCorruptCheckpoint, 0},
		{"negative stage", `{"version": 1, "item": "PROJ-42", "stage": -1}`, ErrCorruptCheckpoint, 0},
		{"future version", `{"version": 7, "item": "PROJ-42", "newField": {"x": 1}}`, ErrFutureCheckpoint, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s := newStore(t)
			path := s.Path("PROJ-42")
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
			require.NoError(t, os.WriteFile(path, []byte(tt.content), 0o644))

			_, err := s.Load(ctx, "PROJ-42")
			require.ErrorIs(t, err, tt.want)
			var cpErr *CheckpointError
			require.True(t, errors.As(err, &cpErr))
			assert.Equal(t, path, cpErr.Path)
			assert.Equal(t, tt.version, cpErr.Version)
			assert.NotEmpty(t, cpErr.Reason)

			err = s.Save(ctx, sampleCheckpoint(), SaveOptions{})
			assert.ErrorIs(t, err, tt.want, "Save refuses to overwrite")
			data, rerr := os.ReadFile(path)
			require.NoError(t, rerr)
			assert.Equal(t, tt.content, string(data), "file kept as it was")

			require.NoError(t, s.Save(ctx, sampleCheckpoint(), SaveOptions{ReplaceInvalid: true}))
			_, err = s.Load(ctx, "PROJ-42")
			assert.NoError(t, err)
		})
	}
}

func TestCheckpointRefusesPathInsideWorktree(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	worktree := filepath.Join(root, "worktrees", "PROJ-42")
	require.NoError(t, os.MkdirAll(worktree, 0o755))
	link := filepath.Join(root, "link-to-worktree")
	require.NoError(t, os.Symlink(worktree, link))

	tests := []struct {
		name     string
		dir      string
		worktree string
		inside   bool
	}{
		{"store in worktree", filepath.Join(worktree, ".pipeline"), worktree, true},
		{"store is worktree", worktree, worktree, true},
		{"through a symlink", filepath.Join(link, ".pipeline"), worktree, true},
		{"worktree given through a symlink", filepath.Join(worktree, "x"), link, true},
		{"sibling with common prefix", filepath.Join(root, "worktrees", "PROJ-42-state"), worktree, false},
		{"outside", filepath.Join(root, "state"), worktree, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The worktree lies outside the store's roots: only
			// SaveOptions.Worktree can catch it.
			s, err := NewCheckpointStore(CheckpointStoreConfig{Dir: tt.dir, WorktreeRoots: []string{filepath.Join(root, "elsewhere")}})
			require.NoError(t, err)
			err = s.Save(ctx, sampleCheckpoint(), SaveOptions{Worktree: tt.worktree})
			if !tt.inside {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrCheckpointInWorktree)
			var wtErr *WorktreePathError
			require.True(t, errors.As(err, &wtErr))
			assert.Equal(t, s.Path("PROJ-42"), wtErr.Path)
			_, statErr := os.Stat(s.Path("PROJ-42"))
			assert.True(t, os.IsNotExist(statErr), "nothing written")
		})
	}
}

func TestCheckpointSaveValidates(t *testing.T) {
	s := newStore(t)
	bad := sampleCheckpoint()
	bad.Item = "no/slashes"
	assert.Error(t, s.Save(context.Background(), bad, SaveOptions{}))
	bad = sampleCheckpoint()
	bad.Stage = -2
	assert.Error(t, s.Save(context.Background(), bad, SaveOptions{}))
}

func TestCheckpointHonoursCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := newStore(t)
	assert.ErrorIs(t, s.Save(ctx, sampleCheckpoint(), SaveOptions{}), context.Canceled)
	_, err := s.Load(ctx, "PROJ-42")
	assert.ErrorIs(t, err, context.Canceled)
}

func TestRenderResume(t *testing.T) {
	tests := []struct {
		name string
		cp   Checkpoint
		want string
	}{
		{"full", sampleCheckpoint(), "CHECKPOINT RESUME — DO NOT re-execute completed work.\n" +
			"Item: PROJ-42, stage 2\n" +
			"Tasks already completed: PROJ-101, PROJ-102\n" +
			"Tasks remaining: PROJ-103\n" +
			"Last action: Implemented PROJ-102\n" +
			"Last commit: 1a2b3c4\n" +
			"Continue from remaining tasks only.\n"},
		{"empty lists, multi-line action", Checkpoint{Item: "T-1", LastAction: "wrote\nfiles\n\nIgnore all"},
			"CHECKPOINT RESUME — DO NOT re-execute completed work.\n" +
				"Item: T-1, stage 0\n" +
				"Tasks already completed: none\n" +
				"Tasks remaining: none\n" +
				"Last action: wrote files Ignore all\n" +
				"Continue from remaining tasks only.\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, RenderResume(tt.cp))
		})
	}
}
