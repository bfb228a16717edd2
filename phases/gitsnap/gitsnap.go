package gitsnap

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/phases"
)

// Config configures a Snapshotter. The zero value is ready to use.
type Config struct {
	// Git is the git binary. Default: "git" from PATH.
	Git string
	// Env is added to the environment of every git command, after
	// Foreman's own variables (C locale, no prompts). Default: none.
	Env []string
	// Clock stamps BeforeState.CapturedAt and Snapshot.CapturedAt.
	// Default: the wall clock.
	Clock foreman.Clock
}

// Snapshotter is the git phases.Snapshotter. It holds no per-workspace
// state, so one Snapshotter may serve many workspaces concurrently.
type Snapshotter struct {
	git   *gitexec.Runner
	clock clock.Clock
}

var _ phases.Snapshotter = (*Snapshotter)(nil)

// New returns a Snapshotter configured by cfg.
func New(cfg Config) *Snapshotter {
	return &Snapshotter{
		git:   &gitexec.Runner{Git: cfg.Git, Env: append([]string(nil), cfg.Env...)},
		clock: clock.OrReal(cfg.Clock),
	}
}

// ErrNotRepository is matched (errors.Is) by a *NotRepositoryError.
var ErrNotRepository = errors.New("gitsnap: not a git repository")

// ErrInvalidBefore is returned by Capture when the BeforeState has no base.
var ErrInvalidBefore = errors.New("gitsnap: before state has no base commit")

// NotRepositoryError reports a workspace that is not (inside) a git
// repository, or does not exist.
type NotRepositoryError struct {
	Path string
	Err  error // the git or file-system error that showed it
}

func (e *NotRepositoryError) Error() string {
	return fmt.Sprintf("gitsnap: %s: %v", e.Path, ErrNotRepository)
}

// Unwrap returns the underlying git or file-system error.
func (e *NotRepositoryError) Unwrap() error { return e.Err }

// Is makes a *NotRepositoryError match ErrNotRepository.
func (e *NotRepositoryError) Is(target error) bool { return target == ErrNotRepository }

// The empty tree of each object format: the base of a repository that had
// no commit when Before ran.
const (
	emptyTreeSHA1   = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
	emptyTreeSHA256 = "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321"
)

func isEmptyTree(rev string) bool { return rev == emptyTreeSHA1 || rev == emptyTreeSHA256 }

// Before records HEAD and the files already dirty. In a repository with no
// commit yet the base is the empty tree, so everything later counts as new.
// When the working tree is dirty it also writes that tree into the object
// store (BeforeState.BaseTree), so that Capture counts only what changed
// after it. It runs one git command when the workspace is clean, three when
// it is dirty, and one more when HEAD is unborn.
func (s *Snapshotter) Before(ctx context.Context, workspacePath string) (phases.BeforeState, error) {
	st, err := s.status(ctx, workspacePath)
	if err != nil {
		return phases.BeforeState{}, err
	}
	base := st.head
	if base == "" {
		// hash-object knows the object format (SHA-1 or SHA-256) of the repo.
		out, err := s.git.RunCmd(ctx, gitexec.Cmd{Dir: workspacePath, Args: []string{"hash-object", "-t", "tree", "--stdin"}, Stdin: strings.NewReader("")})
		if err != nil {
			return phases.BeforeState{}, s.wrap(workspacePath, err)
		}
		base = strings.TrimSpace(out)
	}
	var baseTree string
	if len(st.dirty) > 0 {
		baseTree, err = s.writeWorkingTree(ctx, workspacePath)
		if err != nil {
			return phases.BeforeState{}, err
		}
	}
	return phases.BeforeState{BaseCommit: base, BaseTree: baseTree, DirtyFiles: st.dirty, CapturedAt: s.clock.Now()}, nil
}

// Capture records every change since before: commits since
// before.BaseCommit, and the content diff since before.BaseTree when it is
// set (a dirty start), else since before.BaseCommit. It runs status, then
// nothing more when nothing changed; a diff of two trees when the working
// tree is clean (the agent committed everything); else add into a temporary
// index and a diff of it; plus log when HEAD has moved.
func (s *Snapshotter) Capture(ctx context.Context, workspacePath string, before phases.BeforeState, meta phases.SnapshotMeta) (phases.Snapshot, error) {
	base := before.BaseCommit
	if base == "" {
		return phases.Snapshot{}, ErrInvalidBefore
	}
	from := base
	if before.BaseTree != "" {
		from = before.BaseTree
	}
	st, err := s.status(ctx, workspacePath)
	if err != nil {
		return phases.Snapshot{}, err
	}
	var diff diffResult
	switch {
	case len(st.dirty) == 0 && st.head != "" && st.head == from:
		// Nothing changed since the base: the diff is empty.
		diff, err = parseDiff("", nil)
	case len(st.dirty) == 0 && st.head != "":
		// A clean tree is HEAD's: diff the two trees, no index to stage.
		diff, err = s.diffTrees(ctx, workspacePath, from, st.head)
	default:
		diff, err = s.diffSince(ctx, workspacePath, from, st.untracked)
	}
	if err != nil {
		return phases.Snapshot{}, err
	}
	var commits []phases.Commit
	if st.head != "" && st.head != base {
		commits, err = s.commitsSince(ctx, workspacePath, base, st.head)
		if err != nil {
			return phases.Snapshot{}, err
		}
	}
	uncommitted := st.dirty
	if before.BaseTree != "" {
		// A path dirty since before the run is the agent's only if its
		// content has changed since.
		uncommitted = nil
		for _, p := range st.dirty {
			if diff.touched[p] {
				uncommitted = append(uncommitted, p)
			}
		}
	}
	snap := phases.Snapshot{
		RunID:         meta.RunID,
		Iteration:     meta.Iteration,
		WorkspacePath: workspacePath,
		BaseCommit:    base,
		HeadCommit:    st.head,
		Commits:       commits,
		Files:         diff.files,
		Uncommitted:   uncommitted,
		DiffHash:      diff.hash,
		CapturedAt:    s.clock.Now(),
	}
	for _, f := range diff.files {
		snap.Insertions += f.Insertions
		snap.Deletions += f.Deletions
	}
	snap.ID = snapshotID(snap)
	return snap, nil
}

// snapshotID derives a file-name-safe ID from what identifies the snapshot.
func snapshotID(s phases.Snapshot) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%s\x00%s\x00%s\x00%d", s.RunID, s.Iteration, s.BaseCommit, s.HeadCommit, s.DiffHash, s.CapturedAt.UnixNano())
	return "snap-" + hex.EncodeToString(h.Sum(nil))[:16]
}

type workspaceStatus struct {
	head      string   // "" when HEAD is unborn
	dirty     []string // modified, staged or untracked paths, sorted
	untracked map[string]bool
}

func (s *Snapshotter) status(ctx context.Context, ws string) (workspaceStatus, error) {
	// --no-optional-locks: status must not rewrite the user's index to
	// refresh its stat cache.
	out, err := s.git.Run(ctx, ws, "--no-optional-locks", "status", "--porcelain=v2", "-z", "--branch", "--untracked-files=all")
	if err != nil {
		return workspaceStatus{}, s.wrap(ws, err)
	}
	return parseStatus(out)
}

// stageWorkingTree stages the whole working tree into a temporary copy of
// the user's index, so that untracked files count and the user's index is
// left alone. It returns the environment that selects the copy and a
// function that removes it.
func (s *Snapshotter) stageWorkingTree(ctx context.Context, ws string) ([]string, func(), error) {
	indexPath, err := s.indexPath(ctx, ws)
	if err != nil {
		return nil, nil, err
	}
	tmp, err := copyIndex(indexPath)
	if err != nil {
		return nil, nil, fmt.Errorf("gitsnap: temporary index: %w", err)
	}
	remove := func() { os.Remove(tmp) }
	env := []string{"GIT_INDEX_FILE=" + tmp}
	if _, err := s.git.RunCmd(ctx, gitexec.Cmd{Dir: ws, Args: []string{"add", "-A"}, Env: env}); err != nil {
		remove()
		return nil, nil, s.wrap(ws, err)
	}
	return env, remove, nil
}

// writeWorkingTree stores the working tree as a tree object and returns its
// id. Nothing references the tree: git gc keeps unreachable objects for two
// weeks by default (gc.pruneExpire), ample for a run.
func (s *Snapshotter) writeWorkingTree(ctx context.Context, ws string) (string, error) {
	env, remove, err := s.stageWorkingTree(ctx, ws)
	if err != nil {
		return "", err
	}
	defer remove()
	out, err := s.git.RunCmd(ctx, gitexec.Cmd{Dir: ws, Env: env, Args: []string{"write-tree"}})
	if err != nil {
		return "", s.wrap(ws, err)
	}
	return strings.TrimSpace(out), nil
}

// diffSince stages the whole working tree into a temporary index and diffs
// it against from, a commit or a tree.
func (s *Snapshotter) diffSince(ctx context.Context, ws, from string, untracked map[string]bool) (diffResult, error) {
	env, remove, err := s.stageWorkingTree(ctx, ws)
	if err != nil {
		return diffResult{}, err
	}
	defer remove()
	out, err := s.git.RunCmd(ctx, gitexec.Cmd{Dir: ws, Env: env, Args: append(diffArgs(), "--cached", from, "--")})
	if err != nil {
		return diffResult{}, s.wrap(ws, err)
	}
	return parseDiff(out, untracked)
}

// diffTrees diffs the tree of to against from, a commit or a tree: what
// diffSince finds when the working tree is clean at to, without staging it.
func (s *Snapshotter) diffTrees(ctx context.Context, ws, from, to string) (diffResult, error) {
	out, err := s.git.Run(ctx, ws, append(diffArgs(), from, to, "--")...)
	if err != nil {
		return diffResult{}, s.wrap(ws, err)
	}
	return parseDiff(out, nil)
}

// diffArgs are the options of every diff a snapshot takes.
func diffArgs() []string {
	return []string{"diff", "-z", "--raw", "--numstat", "-M", "--no-abbrev", "--no-ext-diff", "--no-textconv"}
}

// indexPath finds the user's index file without running git when the
// workspace is a plain repository or linked worktree root.
func (s *Snapshotter) indexPath(ctx context.Context, ws string) (string, error) {
	if !s.envOverridesGitDir() {
		dotgit := filepath.Join(ws, ".git")
		if fi, err := os.Stat(dotgit); err == nil {
			if fi.IsDir() {
				return filepath.Join(dotgit, "index"), nil
			}
			if b, err := os.ReadFile(dotgit); err == nil {
				if dir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: "); ok {
					if !filepath.IsAbs(dir) {
						dir = filepath.Join(ws, dir)
					}
					return filepath.Join(dir, "index"), nil
				}
			}
		}
	}
	out, err := s.git.Run(ctx, ws, "rev-parse", "--git-path", "index")
	if err != nil {
		return "", s.wrap(ws, err)
	}
	p := strings.TrimSpace(out)
	if !filepath.IsAbs(p) {
		p = filepath.Join(ws, p)
	}
	return p, nil
}

func (s *Snapshotter) envOverridesGitDir() bool {
	for _, kv := range append(os.Environ(), s.git.Env...) {
		if strings.HasPrefix(kv, "GIT_DIR=") || strings.HasPrefix(kv, "GIT_INDEX_FILE=") || strings.HasPrefix(kv, "GIT_WORK_TREE=") {
			return true
		}
	}
	return false
}

// copyIndex copies the index at path to a new file beside it (a split
// index's shared part is looked up in the same directory) and returns the
// copy's name. Without an index, the name of a missing file is returned and
// git starts from an empty index, which has no cached stat data to trust.
//
// The copy keeps the index's modification time. git trusts an entry's
// cached size and times only for files older than the index file; a file
// changed in the same second as the index was written (the resolution git
// compares unless built with USE_NSEC) is "racily clean", and its content
// is re-read. A copy stamped
// later would make such an entry look safely clean, and a same-size edit
// made in that second would be missed.
func copyIndex(path string) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "foreman-gitsnap-*.index")
	if err != nil {
		f, err = os.CreateTemp("", "foreman-gitsnap-*.index")
		if err != nil {
			return "", err
		}
	}
	name := f.Name()
	src, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		f.Close()
		return name, os.Remove(name)
	}
	var mtime time.Time
	if err == nil {
		var fi fs.FileInfo
		// The time of the file opened, even if git renames a new index
		// into place meanwhile.
		if fi, err = src.Stat(); err == nil {
			mtime = fi.ModTime()
			_, err = io.Copy(f, src)
		}
		src.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chtimes(name, time.Time{}, mtime)
	}
	if err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}

func (s *Snapshotter) commitsSince(ctx context.Context, ws, base, head string) ([]phases.Commit, error) {
	// An agent's commits are usually a short chain of loose objects: read
	// them from git's files rather than start git log.
	if l, ok := gitexec.ReadLayout(ws, s.git.Env); ok {
		if chain, ok := gitexec.LinearHistory(l, s.git.Env, base, head); ok {
			commits := make([]phases.Commit, 0, len(chain))
			for _, c := range chain {
				commits = append(commits, phases.Commit{Hash: c.Hash, Subject: c.Subject()})
			}
			return commits, nil
		}
	}
	args := []string{"log", "-z", "--reverse", "--format=%H%x00%s"}
	if isEmptyTree(base) {
		args = append(args, head)
	} else {
		args = append(args, base+".."+head)
	}
	out, err := s.git.Run(ctx, ws, append(args, "--")...)
	if err != nil {
		return nil, s.wrap(ws, err)
	}
	fields := strings.Split(strings.TrimRight(out, "\x00"), "\x00")
	if len(fields)%2 != 0 {
		return nil, fmt.Errorf("gitsnap: unexpected git log output (%d fields)", len(fields))
	}
	commits := make([]phases.Commit, 0, len(fields)/2)
	for i := 0; i < len(fields); i += 2 {
		commits = append(commits, phases.Commit{Hash: strings.TrimLeft(fields[i], "\n"), Subject: fields[i+1]})
	}
	return commits, nil
}

// wrap classifies a git failure: a context that ended, a workspace that is
// not a repository, or any other git error, returned as is.
func (s *Snapshotter) wrap(ws string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("gitsnap: %w", err)
	}
	var gerr *gitexec.Error
	if errors.As(err, &gerr) && strings.Contains(strings.ToLower(gerr.Stderr), "not a git repository") {
		return &NotRepositoryError{Path: ws, Err: err}
	}
	if gerr != nil && gerr.ExitCode == -1 {
		// git did not run: the directory itself may be missing.
		if fi, serr := os.Stat(ws); serr != nil || !fi.IsDir() {
			return &NotRepositoryError{Path: ws, Err: err}
		}
	}
	return err
}

// atoiStat parses a numstat count; "-" (binary) is zero.
func atoiStat(s string) (int, bool) {
	if s == "-" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}
