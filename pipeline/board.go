package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/atomicfile"
)

// BoardStory is what the board shows about one item.
type BoardStory struct {
	// Found is false when the item is not on the board.
	Found  bool
	Status string
	Tasks  int
}

// Board is the kanban board the coordinator re-reads to check a worker's
// claims and updates when an item is done. FileBoard is one; RuntimeConfig.Board is required.
type Board interface {
	Story(ctx context.Context, item foreman.ItemID) (BoardStory, error)
	SetStatus(ctx context.Context, item foreman.ItemID, status string) error
}

// BoardEntry is one item on a FileBoard.
type BoardEntry struct {
	Title  string   `json:"title,omitempty"`
	Status string   `json:"status"`
	Tasks  []string `json:"tasks,omitempty"`
}

// boardVersion is the FileBoard format; a newer file is refused, not
// overwritten.
const boardVersion = 1

type boardFile struct {
	Version int                   `json:"version"`
	Items   map[string]BoardEntry `json:"items"`
}

// ErrCorruptBoard is matched when a board file cannot be read; the file is
// left as it is.
var ErrCorruptBoard = errors.New("pipeline: corrupt board file")

// FileBoard is a kanban board kept in one JSON file, rewritten atomically
// (internal/atomicfile) on every change, so a reader never sees half a
// board. Writers in this process are serialized; writers in other processes
// (agents editing the board) must not write at the same moment, since the
// last rename wins.
type FileBoard struct {
	path string
	mu   sync.Mutex
}

// NewFileBoard returns the board kept in path; a missing file is an empty
// board.
func NewFileBoard(path string) *FileBoard { return &FileBoard{path: path} }

// Path returns the board's file.
func (b *FileBoard) Path() string { return b.path }

func (b *FileBoard) load() (boardFile, error) {
	f := boardFile{Version: boardVersion, Items: map[string]BoardEntry{}}
	data, err := os.ReadFile(b.path)
	if errors.Is(err, os.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return f, fmt.Errorf("%w: %s: %v", ErrCorruptBoard, b.path, err)
	}
	if f.Version > boardVersion {
		return f, fmt.Errorf("%w: %s: version %d is newer than %d", ErrCorruptBoard, b.path, f.Version, boardVersion)
	}
	if f.Items == nil {
		f.Items = map[string]BoardEntry{}
	}
	return f, nil
}

func (b *FileBoard) update(ctx context.Context, item foreman.ItemID, change func(*BoardEntry)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := item.Validate(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	f, err := b.load()
	if err != nil {
		return err
	}
	e := f.Items[string(item)]
	change(&e)
	f.Items[string(item)] = e
	f.Version = boardVersion
	if err := os.MkdirAll(filepath.Dir(b.path), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteJSON(b.path, f, 0o644)
}

// Story implements Board.
func (b *FileBoard) Story(ctx context.Context, item foreman.ItemID) (BoardStory, error) {
	e, ok, err := b.Entry(ctx, item)
	if err != nil || !ok {
		return BoardStory{}, err
	}
	return BoardStory{Found: true, Status: e.Status, Tasks: len(e.Tasks)}, nil
}

// Entry returns one item's entry.
func (b *FileBoard) Entry(ctx context.Context, item foreman.ItemID) (BoardEntry, bool, error) {
	if err := ctx.Err(); err != nil {
		return BoardEntry{}, false, err
	}
	b.mu.Lock()
	f, err := b.load()
	b.mu.Unlock()
	if err != nil {
		return BoardEntry{}, false, err
	}
	e, ok := f.Items[string(item)]
	return e, ok, nil
}

// SetStatus implements Board; an item not on the board is added.
func (b *FileBoard) SetStatus(ctx context.Context, item foreman.ItemID, status string) error {
	return b.update(ctx, item, func(e *BoardEntry) { e.Status = status })
}

// Put replaces one item's entry.
func (b *FileBoard) Put(ctx context.Context, item foreman.ItemID, e BoardEntry) error {
	return b.update(ctx, item, func(old *BoardEntry) { *old = e })
}

// AddTasks adds tasks under an item (what a Stage 0 planner does).
func (b *FileBoard) AddTasks(ctx context.Context, item foreman.ItemID, tasks ...string) error {
	return b.update(ctx, item, func(e *BoardEntry) { e.Tasks = append(e.Tasks, tasks...) })
}
