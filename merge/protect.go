package merge

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentforeman/foreman"
)

// Protected directories: the item worktrees' Root and Config.Protected
// (a host's own state, kept in the repository's working tree and only
// git-ignored). Git treats ignored files as disposable: checking out a
// commit that has a file where an ignored directory is deletes the
// directory with everything in it, and one that has files inside it
// overwrites them. So no commit that reaches the target may have an entry
// at or under a protected directory, or a non-directory where one of its
// parents is; an item's CommitPending must not stage one; and New refuses
// a protected directory that a symbolic link leads to (the host would
// write wherever it points) or that git tracks.

// maxProtectedPaths bounds the paths a *ProtectedPathError names.
const maxProtectedPaths = 20

// setupProtected resolves Root and Config.Protected to the directories
// inside the main worktree that merges must not touch (m.protected:
// relative, slash-separated) and checks each: no symbolic link on the way
// to it inside the working tree, not a file, not tracked by git.
func (m *Manager) setupProtected(ctx context.Context) error {
	dirs := append([]string{m.root}, m.cfg.Protected...)
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(m.mainDir, d)
		}
		d = filepath.Clean(d)
		rel, inside, err := m.checkProtectedDir(d)
		if err != nil {
			return err
		}
		if inside && !slices.Contains(m.protected, rel) {
			m.protected = append(m.protected, rel)
			m.protectedAbs = append(m.protectedAbs, d)
		}
	}
	return m.checkUntracked(ctx)
}

// checkProtectedDir says whether dir lies inside the main worktree (rel:
// its slash-separated path there) and refuses one that is not a plain
// directory reached through plain directories.
func (m *Manager) checkProtectedDir(dir string) (rel string, inside bool, err error) {
	relLex, insideLex := within(m.mainDir, dir)
	mainReal, err := filepath.EvalSymlinks(m.mainDir)
	if err != nil {
		mainReal = m.mainDir
	}
	relReal, insideReal := within(mainReal, realPath(dir))
	switch {
	case !insideLex && !insideReal:
		return "", false, nil
	case insideLex:
		rel = relLex
	default:
		// dir names the working tree by another of its names (a symbolic
		// link outside it, such as /tmp on some systems): what matters is
		// the way inside.
		rel = relReal
	}
	if rel == "." {
		return "", false, &UnsafeDirError{Dir: dir, Reason: "is the working tree itself"}
	}
	cur := m.mainDir
	for c := range strings.SplitSeq(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, c)
		fi, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			break // made later, as a plain directory
		}
		if err != nil {
			return "", false, fmt.Errorf("merge: %w", err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			to, _ := os.Readlink(cur)
			if cur == filepath.Join(m.mainDir, rel) {
				return "", false, &UnsafeDirError{Dir: dir, Reason: fmt.Sprintf("is a symbolic link (to %s)", to)}
			}
			return "", false, &UnsafeDirError{Dir: dir, Reason: fmt.Sprintf("is reached through the symbolic link %s (to %s)", cur, to)}
		}
		if !fi.IsDir() && cur == filepath.Join(m.mainDir, rel) {
			return "", false, &UnsafeDirError{Dir: dir, Reason: "is not a directory"}
		}
		if !fi.IsDir() {
			return "", false, &UnsafeDirError{Dir: dir, Reason: fmt.Sprintf("is under %s, which is not a directory", cur)}
		}
	}
	if insideLex && insideReal && relLex != relReal {
		return "", false, &UnsafeDirError{Dir: dir, Reason: "is reached through a symbolic link"}
	}
	return filepath.ToSlash(rel), true, nil
}

// checkUntracked refuses protected directories that git tracks: in the
// main worktree's index, or on the base or target branch.
func (m *Manager) checkUntracked(ctx context.Context) error {
	if len(m.protected) == 0 {
		return nil
	}
	args := []string{"ls-files", "-z", "--cached", "--"}
	for _, rel := range m.protected {
		args = append(args, ":(literal,icase)"+rel)
	}
	out, err := m.git.Run(ctx, m.mainDir, args...)
	if err != nil {
		return err
	}
	files := strings.FieldsFunc(out, func(r rune) bool { return r == 0 })
	if len(files) == 0 {
		for _, b := range slices.Compact([]string{m.cfg.BaseBranch, m.cfg.TargetBranch}) {
			if files, err = m.protectedInCommit(ctx, "refs/heads/"+b); err != nil || len(files) > 0 {
				break
			}
		}
	}
	if err != nil || len(files) == 0 {
		return err
	}
	for i, rel := range m.protected {
		for _, f := range files {
			if overlaps(f, rel) {
				return &UnsafeDirError{Dir: m.protectedAbs[i], Reason: "is tracked by git", Paths: clip(files)}
			}
		}
	}
	return &UnsafeDirError{Dir: m.protectedAbs[0], Reason: "is tracked by git", Paths: clip(files)}
}

// protectedInCommit returns the paths of rev's tree that touch a protected
// directory.
func (m *Manager) protectedInCommit(ctx context.Context, rev string) ([]string, error) {
	hash, err := m.resolveRef(ctx, rev)
	if err != nil || hash == "" {
		return nil, err
	}
	c, err := m.readCommit(ctx, hash)
	if err != nil {
		return nil, err
	}
	return m.protectedInTree(ctx, c.Tree)
}

// protectedInTree returns the entries of tree that touch a protected
// directory: an entry at or under it, or a non-directory (file, symbolic
// link, submodule) where one of its parents is; names are compared
// ignoring case, as a case-insensitive file system would. An entry that
// is a directory is named with the files under it.
func (m *Manager) protectedInTree(ctx context.Context, tree string) ([]string, error) {
	var hits []string
	trees := map[string][]treeEntry{} // read once, for every protected directory
	for _, rel := range m.protected {
		if err := m.walkProtected(ctx, trees, tree, "", strings.Split(rel, "/"), &hits); err != nil {
			return nil, err
		}
	}
	slices.Sort(hits)
	return slices.Compact(hits), nil
}

func (m *Manager) walkProtected(ctx context.Context, trees map[string][]treeEntry, tree, prefix string, comps []string, hits *[]string) error {
	entries, ok := trees[tree]
	if !ok {
		var err error
		if entries, err = m.readTree(ctx, tree); err != nil {
			return err
		}
		trees[tree] = entries
	}
	for _, e := range entries {
		if !strings.EqualFold(e.name, comps[0]) {
			continue
		}
		p := path.Join(prefix, e.name)
		switch {
		case !e.dir:
			*hits = append(*hits, p)
		case len(comps) > 1:
			if err := m.walkProtected(ctx, trees, e.hash, p, comps[1:], hits); err != nil {
				return err
			}
		default:
			files, err := m.git.Run(ctx, m.topDir, "ls-tree", "-r", "-z", "--name-only", e.hash)
			if err != nil {
				return err
			}
			n := 0
			for f := range strings.SplitSeq(files, "\x00") {
				if f != "" && n < maxProtectedPaths {
					*hits = append(*hits, p+"/"+f)
					n++
				}
			}
			if n == 0 {
				*hits = append(*hits, p+"/")
			}
		}
	}
	return nil
}

// treeEntry is one entry of a git tree object.
type treeEntry struct {
	name, hash string
	dir        bool
}

// readTree lists a tree object's entries, from its loose object when it
// is one (a squash's trees are), otherwise through git ls-tree.
func (m *Manager) readTree(ctx context.Context, hash string) ([]treeEntry, error) {
	if raw, ok := readLooseObject(m.commonDir, hash); ok {
		if body, found := bytes.CutPrefix(raw, []byte("tree ")); found {
			if i := bytes.IndexByte(body, 0); i >= 0 {
				if entries, ok := parseTree(body[i+1:]); ok {
					return entries, nil
				}
			}
		}
	}
	out, err := m.git.Run(ctx, m.topDir, "ls-tree", "-z", hash)
	if err != nil {
		return nil, err
	}
	var entries []treeEntry
	for line := range strings.SplitSeq(out, "\x00") {
		meta, name, ok := strings.Cut(line, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			continue
		}
		entries = append(entries, treeEntry{name: name, hash: f[2], dir: f[1] == "tree"})
	}
	return entries, nil
}

// parseTree reads a SHA-1 tree object's body: "<mode> <name>\0<20 bytes>"
// entries. ok is false when it is not one.
func parseTree(b []byte) ([]treeEntry, bool) {
	var entries []treeEntry
	for len(b) > 0 {
		sp := bytes.IndexByte(b, ' ')
		nul := bytes.IndexByte(b, 0)
		if sp < 0 || nul < sp || len(b) < nul+21 {
			return nil, false
		}
		mode := string(b[:sp])
		entries = append(entries, treeEntry{name: string(b[sp+1 : nul]), hash: hex.EncodeToString(b[nul+1 : nul+21]), dir: mode == "40000"})
		b = b[nul+21:]
	}
	return entries, true
}

// protectedPending returns the uncommitted paths of an item's worktree
// (as `git status` names them, an untracked directory ending in "/")
// that CommitPending must not commit: at or under a protected directory,
// or a parent of one that holds something at the protected path.
func (m *Manager) protectedPending(wt string, files []string) []string {
	var hits []string
	for _, f := range files {
		if f = strings.TrimSuffix(f, "/"); m.pendingTouches(wt, f) {
			hits = append(hits, f)
		}
	}
	return clip(hits)
}

func (m *Manager) pendingTouches(wt, f string) bool {
	for _, rel := range m.protected {
		if underOrAt(f, rel) {
			return true
		}
		if underOrAt(rel, f) {
			// f is a parent of the protected path: an untracked directory
			// holding something there, or a file (or link) in its place.
			fi, err := os.Lstat(filepath.Join(wt, filepath.FromSlash(f)))
			_, below := os.Lstat(filepath.Join(wt, filepath.FromSlash(rel)))
			if err != nil || !fi.IsDir() || below == nil {
				return true
			}
		}
	}
	return false
}

// refuseProtected returns a *ProtectedPathError when tree touches a
// protected directory.
func (m *Manager) refuseProtected(ctx context.Context, id foreman.ItemID, source, tree string) error {
	if len(m.protected) == 0 {
		return nil
	}
	hits, err := m.protectedInTree(ctx, tree)
	if err != nil || len(hits) == 0 {
		return err
	}
	m.log.Warn("merge: refusing a change to a protected directory", "item", id, "source", source, "paths", hits)
	return &ProtectedPathError{Item: id, Source: source, Paths: clip(hits), Protected: slices.Clone(m.protected)}
}

// within returns dir's path relative to parent and whether it is parent
// or inside it.
func within(parent, dir string) (string, bool) {
	rel, err := filepath.Rel(parent, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	return rel, true
}

// realPath resolves the symbolic links of the longest part of p that
// exists.
func realPath(p string) string {
	rest := ""
	for cur := p; ; cur = filepath.Dir(cur) {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		if cur == filepath.Dir(cur) {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
	}
}

// underOrAt says whether slash path p is dir or inside it, ignoring case.
func underOrAt(p, dir string) bool {
	if len(p) < len(dir) || !strings.EqualFold(p[:len(dir)], dir) {
		return false
	}
	return len(p) == len(dir) || p[len(dir)] == '/'
}

// overlaps says whether one of two slash paths is the other or inside it.
func overlaps(a, b string) bool { return underOrAt(a, b) || underOrAt(b, a) }

func clip(paths []string) []string {
	if len(paths) > maxProtectedPaths {
		return paths[:maxProtectedPaths]
	}
	return paths
}
