package agentcmd

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The comparison of a gitShadow's files after the agent, apart from the
// making of the shadow (gitshadow.go): which paths are no write of the
// agent's to report (mount points, locks, git's own housekeeping, refs,
// which are compared as refs), and the note naming what it wrote, made or
// removed in the copy.

// shadowIgnored are files git itself writes in passing (a fetch's
// FETCH_HEAD, an automatic gc's pid and log, a git fsck --lost-found's
// directory): not the agent's attempts.
var shadowIgnored = map[string]bool{"FETCH_HEAD": true, "gc.pid": true, "gc.log": true, "lost-found": true}

// ignored reports whether path rel of the copy is no write of the agent's
// to report: a mount point, a lock, git's own housekeeping, a ref.
func (g *gitShadow) ignored(rel string) bool {
	top := strings.SplitN(rel, string(filepath.Separator), 2)[0]
	// (git repack writes info/refs for dumb transports through a
	// temporary info/refs_XXXXXX.)
	return g.bound[top] || shadowEmpty[top] || top == objectsDir || shadowIgnored[top] ||
		rel == filepath.Join("info", "refs") || strings.HasPrefix(rel, filepath.Join("info", "refs_")) || comparedAsRefs(rel) || strings.HasSuffix(rel, ".lock") ||
		g.mainWorktree && worktreeOwn(top)
}

// comparedAsRefs reports whether path rel of the git directory is compared
// as refs (their values), not as files.
func comparedAsRefs(rel string) bool {
	// git writes packed-refs through packed-refs.new (and its lock).
	return rel == "refs" || strings.HasPrefix(rel, "refs/") || rel == "packed-refs" || strings.HasPrefix(rel, "packed-refs.")
}

// fileNotes says what the agent wrote, made or removed in the shadow
// outside the refs: one note naming the first maxDecoyPaths paths.
func (g *gitShadow) fileNotes(watched *placeAccess) []string {
	var changed []string
	seen := map[string]bool{}
	budget := maxShadowEntries
	_ = filepath.WalkDir(g.dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || p == g.dir {
			return nil
		}
		if budget--; budget < 0 {
			changed = append(changed, "...")
			return filepath.SkipAll
		}
		rel, err := filepath.Rel(g.dir, p)
		if err != nil {
			return nil
		}
		if g.ignored(rel) {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		seen[rel] = true
		before, had := g.files[rel]
		if !had {
			if e.IsDir() {
				changed = append(changed, rel+"/")
				return filepath.SkipDir // what it made: named once
			}
			changed = append(changed, rel)
			return nil
		}
		if !sameEntry(p, e, before) {
			changed = append(changed, rel)
		}
		return nil
	})
	var gone []string
	for _, rel := range slices.Sorted(maps.Keys(g.files)) {
		if seen[rel] || slices.ContainsFunc(gone, func(dir string) bool { return within(rel, dir) }) {
			continue // still there, or gone with a directory already named
		}
		if _, err := os.Lstat(filepath.Join(g.dir, rel)); os.IsNotExist(err) {
			changed = append(changed, rel+" (removed)")
			gone = append(gone, rel)
		}
	}
	// What the watch saw written that looks untouched now: made and
	// removed, or put back as it was, before the agent exited.
	for _, rel := range slices.Sorted(maps.Keys(watched.touched)) {
		if slices.ContainsFunc(changed, func(c string) bool { return within(rel, strings.TrimSuffix(c, "/")) }) {
			continue
		}
		if _, err := os.Lstat(filepath.Join(g.dir, rel)); err != nil {
			changed = append(changed, rel+" (removed)")
		} else {
			changed = append(changed, rel+" (put back)")
		}
	}
	if len(changed) == 0 {
		return nil
	}
	var quoted []string
	for i, c := range changed {
		if i == maxDecoyPaths {
			quoted = append(quoted, fmt.Sprintf("and %d more", len(changed)-i))
			break
		}
		quoted = append(quoted, strconv.Quote(truncate(filepath.ToSlash(c), 80)))
	}
	return []string{fmt.Sprintf("wrote %s into the repository's git directory (%s): a private copy, nothing real changed",
		strings.Join(quoted, ", "), g.real)}
}

// sameEntry reports whether p (entry e) still is what was copied.
func sameEntry(p string, e fs.DirEntry, before shadowEntry) bool {
	info, err := e.Info()
	if err != nil {
		return false
	}
	switch {
	case before.mode.IsDir():
		return info.IsDir() && info.Mode().Perm() == before.mode.Perm()
	case before.mode&fs.ModeSymlink != 0:
		link, err := os.Readlink(p)
		return err == nil && info.Mode()&fs.ModeSymlink != 0 && link == before.link
	}
	if !info.Mode().IsRegular() || info.Mode().Perm() != before.mode.Perm() || info.Size() != before.size {
		return false
	}
	data, err := readSmall(p, before.size+1)
	return err == nil && sha256.Sum256(data) == before.sum
}
