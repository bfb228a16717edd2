package health

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/atomicfile"
)

// CheckpointVersion is the schema version this package writes and the
// newest it reads.
const CheckpointVersion = 1

// Checkpoint is what a worker records as it goes, so that a crashed
// assignment can be resumed without redoing finished work. A worker writes
// it after each task it completes, replacing the previous one.
type Checkpoint struct {
	Version    int                  `json:"version"`
	Item       foreman.ItemID       `json:"item"`
	Stage      int                  `json:"stage"`
	Assignment foreman.AssignmentID `json:"assignment"`
	Worker     foreman.WorkerID     `json:"worker,omitempty"`
	// AgentSession is the agent's own session id; when present a crashed
	// assignment is resumed in that session, keeping its full context.
	AgentSession   string   `json:"agentSession,omitempty"`
	TasksCompleted []string `json:"tasksCompleted"`
	TasksRemaining []string `json:"tasksRemaining"`
	LastAction     string   `json:"lastAction,omitempty"`
	LastCommit     string   `json:"lastCommit,omitempty"`
	// Verdict, Score and Reason carry a stage's result (GO/NO-GO, PASS/FAIL,
	// a plan or quality score) so that a lost completion can be synthesized.
	Verdict   string    `json:"verdict,omitempty"`
	Score     *float64  `json:"score,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	StartedAt time.Time `json:"startedAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Validate reports what is wrong with c as a reason string; empty means valid.
func (c Checkpoint) validate() string {
	switch {
	case c.Version < 1:
		return fmt.Sprintf("version %d is not a schema version", c.Version)
	case c.Item.Validate() != nil:
		return c.Item.Validate().Error()
	case c.Stage < 0:
		return fmt.Sprintf("negative stage %d", c.Stage)
	case c.Assignment != "" && c.Assignment.Validate() != nil:
		return c.Assignment.Validate().Error()
	case c.Worker != "" && c.Worker.Validate() != nil:
		return c.Worker.Validate().Error()
	}
	return ""
}

// Errors of checkpoints, matched with errors.Is. The typed errors below
// match them and carry the details (errors.As).
var (
	ErrNoCheckpoint          = errors.New("health: no checkpoint")
	ErrCorruptCheckpoint     = errors.New("health: corrupt checkpoint")
	ErrFutureCheckpoint      = errors.New("health: checkpoint from a newer schema version")
	ErrCheckpointInWorktree  = errors.New("health: checkpoint path inside the worktree")
	ErrRelativeCheckpointDir = errors.New("health: checkpoint directory is not absolute")
	ErrRelativeWorktreeRoot  = errors.New("health: worktree root is not absolute")
	ErrNoWorktreeRoots       = errors.New("health: checkpoint store needs at least one worktree root")
)

// CheckpointError is a checkpoint file that cannot be used: it is corrupt
// (Err matches ErrCorruptCheckpoint) or written by a newer schema
// (ErrFutureCheckpoint). The file is left where it is, untouched.
type CheckpointError struct {
	Path    string
	Version int    // the file's version, when it could be read
	Reason  string // what is wrong, for a person
	kind    error
}

func (e *CheckpointError) Error() string {
	return fmt.Sprintf("%v: %s: %s (file kept)", e.kind, e.Path, e.Reason)
}

// Is matches ErrCorruptCheckpoint or ErrFutureCheckpoint.
func (e *CheckpointError) Is(target error) bool { return target == e.kind }

// WorktreePathError refuses a checkpoint path inside a worktree: an agent
// could commit, edit or delete it there, and a known bug did exactly that.
// Worktree is the worktree, or the worktree root, that contains Path.
type WorktreePathError struct {
	Path, Worktree string
}

func (e *WorktreePathError) Error() string {
	return fmt.Sprintf("health: checkpoint path %s is inside worktree %s", e.Path, e.Worktree)
}

// Is matches ErrCheckpointInWorktree.
func (e *WorktreePathError) Is(target error) bool { return target == ErrCheckpointInWorktree }

// CheckpointStoreConfig configures a CheckpointStore. Both fields are
// required: a store that does not know where the worktrees are cannot keep
// its checkpoints out of them.
type CheckpointStoreConfig struct {
	// Dir is where the checkpoint files are written. It must be absolute
	// (ErrRelativeCheckpointDir) and outside every worktree root; it is
	// created on the first Save. Required.
	Dir string
	// WorktreeRoots are the absolute directories under which worktrees are
	// created, for example merge.Manager.Root(). NewCheckpointStore refuses
	// a Dir inside any of them, and every Save checks again, with symlinks
	// resolved as they are then, since a directory may be replaced by a link
	// after construction. At least one is required (ErrNoWorktreeRoots).
	// Required.
	WorktreeRoots []string
}

// CheckpointStore keeps one checkpoint file per item, checkpoint-<item>.json,
// in a directory that is absolute and outside every worktree.
type CheckpointStore struct {
	dir   string
	roots []string
}

// NewCheckpointStore returns a store in cfg.Dir. A Dir inside one of
// cfg.WorktreeRoots is a *WorktreePathError.
func NewCheckpointStore(cfg CheckpointStoreConfig) (*CheckpointStore, error) {
	if !filepath.IsAbs(cfg.Dir) {
		return nil, fmt.Errorf("%w: %q", ErrRelativeCheckpointDir, cfg.Dir)
	}
	if len(cfg.WorktreeRoots) == 0 {
		return nil, ErrNoWorktreeRoots
	}
	s := &CheckpointStore{dir: filepath.Clean(cfg.Dir)}
	for _, r := range cfg.WorktreeRoots {
		if !filepath.IsAbs(r) {
			return nil, fmt.Errorf("%w: %q", ErrRelativeWorktreeRoot, r)
		}
		s.roots = append(s.roots, filepath.Clean(r))
	}
	if err := s.checkOutside(s.dir, ""); err != nil {
		return nil, err
	}
	return s, nil
}

// checkOutside returns a *WorktreePathError when path lies in one of the
// store's worktree roots or in worktree (when not empty).
func (s *CheckpointStore) checkOutside(path, worktree string) error {
	dirs := s.roots
	if worktree != "" {
		dirs = append(slices.Clip(dirs), worktree)
	}
	for _, d := range dirs {
		inside, err := pathInside(path, d)
		if err != nil {
			return err
		}
		if inside {
			return &WorktreePathError{Path: path, Worktree: d}
		}
	}
	return nil
}

// WorktreeRoots returns the worktree roots the store keeps out of.
func (s *CheckpointStore) WorktreeRoots() []string { return slices.Clone(s.roots) }

// Dir returns the store's directory.
func (s *CheckpointStore) Dir() string { return s.dir }

// Path returns where item's checkpoint lives. item must be valid.
func (s *CheckpointStore) Path(item foreman.ItemID) string {
	return filepath.Join(s.dir, "checkpoint-"+string(item)+".json")
}

// SaveOptions qualify a Save.
type SaveOptions struct {
	// Worktree is the item's worktree, checked in addition to the store's
	// WorktreeRoots: Save refuses (WorktreePathError) when the checkpoint
	// path lies inside it. Useful for a worktree outside every root.
	// Default: none (only the store's WorktreeRoots are checked).
	Worktree string
	// ReplaceInvalid allows Save to replace a file that is corrupt or from a
	// newer schema. Without it such a file is kept and Save returns its
	// CheckpointError: overwriting would destroy what a person may need.
	// Default: false (an invalid file is kept).
	ReplaceInvalid bool
}

// Save writes cp atomically (write, fsync, rename). It sets Version to
// CheckpointVersion; a zero UpdatedAt is left for the caller to fill, since
// time comes from the caller's clock.
func (s *CheckpointStore) Save(ctx context.Context, cp Checkpoint, opts SaveOptions) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cp.Version = CheckpointVersion
	if reason := cp.validate(); reason != "" {
		return fmt.Errorf("health: invalid checkpoint: %s", reason)
	}
	path := s.Path(cp.Item)
	if err := s.checkOutside(path, opts.Worktree); err != nil {
		return err
	}
	if !opts.ReplaceInvalid {
		_, err := s.read(path, cp.Item)
		var cpErr *CheckpointError
		if errors.As(err, &cpErr) {
			return err
		}
		if err != nil && !errors.Is(err, ErrNoCheckpoint) {
			return err
		}
	}
	if cp.TasksCompleted == nil {
		cp.TasksCompleted = []string{}
	}
	if cp.TasksRemaining == nil {
		cp.TasksRemaining = []string{}
	}
	return atomicfile.WriteJSON(path, cp, 0o644)
}

// Load reads and validates item's checkpoint. A missing file is
// ErrNoCheckpoint; an unusable one is a *CheckpointError, and the file is
// left as it is.
func (s *CheckpointStore) Load(ctx context.Context, item foreman.ItemID) (Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return Checkpoint{}, err
	}
	if err := item.Validate(); err != nil {
		return Checkpoint{}, err
	}
	return s.read(s.Path(item), item)
}

// LoadCheckpoint implements CheckpointLoader.
func (s *CheckpointStore) LoadCheckpoint(ctx context.Context, item foreman.ItemID) (Checkpoint, error) {
	return s.Load(ctx, item)
}

func (s *CheckpointStore) read(path string, item foreman.ItemID) (Checkpoint, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Checkpoint{}, fmt.Errorf("%w for %s", ErrNoCheckpoint, item)
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("health: read checkpoint: %w", err)
	}
	return decodeCheckpoint(path, data, item)
}

func decodeCheckpoint(path string, data []byte, item foreman.ItemID) (Checkpoint, error) {
	corrupt := func(format string, args ...any) (Checkpoint, error) {
		return Checkpoint{}, &CheckpointError{Path: path, Reason: fmt.Sprintf(format, args...), kind: ErrCorruptCheckpoint}
	}
	// Read the version alone first: a newer schema may not decode into ours.
	var head struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return corrupt("not JSON: %v", err)
	}
	if head.Version == nil {
		return corrupt("no version field")
	}
	if *head.Version > CheckpointVersion {
		return Checkpoint{}, &CheckpointError{Path: path, Version: *head.Version, kind: ErrFutureCheckpoint,
			Reason: fmt.Sprintf("version %d, this build reads up to %d", *head.Version, CheckpointVersion)}
	}
	var cp Checkpoint
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cp); err != nil {
		return corrupt("does not match schema %d: %v", CheckpointVersion, err)
	}
	if reason := cp.validate(); reason != "" {
		return corrupt("%s", reason)
	}
	if cp.Item != item {
		return corrupt("records item %q, expected %q", cp.Item, item)
	}
	return cp, nil
}

// pathInside reports whether path lies in dir (or is dir), comparing
// cleaned absolute paths with symlinks resolved as far as they exist.
func pathInside(path, dir string) (bool, error) {
	p, err := resolve(path)
	if err != nil {
		return false, err
	}
	d, err := resolve(dir)
	if err != nil {
		return false, err
	}
	rel, err := filepath.Rel(d, p)
	if err != nil {
		return false, nil
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))), nil
}

// resolve makes p absolute and resolves symlinks in its longest existing
// prefix, so that a worktree reached through a symlink is still recognised.
func resolve(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("health: %w", err)
	}
	rest := ""
	for cur := abs; ; {
		if real, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(real, rest), nil
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// RenderResume renders the CHECKPOINT RESUME block appended to a fresh
// worker's prompt when a crashed assignment cannot resume its own session.
func RenderResume(cp Checkpoint) string {
	list := func(xs []string) string {
		if len(xs) == 0 {
			return "none"
		}
		return strings.Join(xs, ", ")
	}
	var b strings.Builder
	b.WriteString("CHECKPOINT RESUME — DO NOT re-execute completed work.\n")
	fmt.Fprintf(&b, "Item: %s, stage %d\n", cp.Item, cp.Stage)
	fmt.Fprintf(&b, "Tasks already completed: %s\n", list(cp.TasksCompleted))
	fmt.Fprintf(&b, "Tasks remaining: %s\n", list(cp.TasksRemaining))
	if cp.LastAction != "" {
		fmt.Fprintf(&b, "Last action: %s\n", oneLine(cp.LastAction))
	}
	if cp.LastCommit != "" {
		fmt.Fprintf(&b, "Last commit: %s\n", oneLine(cp.LastCommit))
	}
	b.WriteString("Continue from remaining tasks only.\n")
	return b.String()
}

// oneLine keeps a worker-written field from injecting extra lines into the
// block.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
