package agentcmd

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// A decoy is an empty host directory of one execution, bound writable over
// a directory the sandbox hides (the host's home, the lease directory,
// Sandbox.Hide), instead of an empty read-only tmpfs: a write there
// succeeds, changes nothing real, and is seen. Once the agent is gone the
// driver lists what it made in each decoy (decoyNotes) and removes them
// all.
type decoy struct {
	// dir is the hidden directory, as the agent sees it; name is what the
	// notes call it; src is the host directory bound over it.
	dir, name, src string
	// skeleton are the paths (relative to dir) bwrap made in src as mount
	// points of the binds below dir, and their parents: not the agent's.
	// parents are the directories among them, which the driver makes
	// itself, before bwrap, to watch them (accesswatch.go).
	skeleton, parents map[string]bool
	// canaries are the empty files (false) and directories (true) the
	// driver planted where secrets are usually kept, and, with mirror, one
	// for each entry of the real directory (canary.go).
	canaries map[string]bool
	mirror   bool
	// ancestor: the hidden directory holds the workspace (the main
	// checkout, the worktree root), where an agent CLI looks for files of
	// its own (ancestorLookups).
	ancestor bool
}

// decoyDirName is the directory under Config.LeaseDir that holds each
// execution's decoys while its agent runs. LeaseDir is hidden from every
// agent of the driver, so no agent sees another's decoys.
const decoyDirName = "decoys"

// maxDecoyEntries bounds the entries of one execution's decoys the driver
// looks at; maxDecoyPaths the paths one note names.
const (
	maxDecoyEntries = 1000
	maxDecoyPaths   = 3
)

// decoyRoot makes the directory of one execution's decoys, under
// <LeaseDir>/decoys; "" (and no decoys: the hidden directories are
// read-only tmpfs) without a LeaseDir.
func (d *Driver) decoyRoot() (string, error) {
	if d.cfg.LeaseDir == "" || d.noDecoys {
		return "", nil
	}
	root, err := filepath.Abs(filepath.Join(d.cfg.LeaseDir, decoyDirName))
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", err
	}
	return os.MkdirTemp(root, ownerPattern(decoyRunPrefix))
}

// hideName is what the notes call hidden directory dir.
func (d *Driver) hideName(dir string) string {
	for p, name := range d.cfg.Sandbox.HideNames {
		if c, ok := cleanDir(p); ok && c == dir && name != "" {
			return name
		}
	}
	if h, err := os.UserHomeDir(); err == nil {
		if c, ok := cleanDir(h); ok && c == dir {
			return "host's home"
		}
	}
	if d.cfg.LeaseDir != "" {
		if c, ok := cleanDir(d.cfg.LeaseDir); ok && c == dir {
			return "lease directory"
		}
	}
	switch dir {
	case "/root":
		return "root's home"
	case "/run":
		return "runtime directory"
	}
	return "directory"
}

// markSkeleton records, for each decoy, the mount points bwrap makes in
// it: the targets of ms below its directory, and their parents.
func (s *sandboxRun) markSkeleton() {
	for i := range s.decoys {
		dc := &s.decoys[i]
		dc.skeleton, dc.parents = map[string]bool{}, map[string]bool{}
		for _, m := range s.mounts {
			if m.dst == dc.dir || !within(m.dst, dc.dir) {
				continue
			}
			rel, err := filepath.Rel(dc.dir, m.dst)
			if err != nil {
				continue
			}
			dc.skeleton[rel] = true
			for rel = filepath.Dir(rel); rel != "." && rel != "/" && !dc.parents[rel]; rel = filepath.Dir(rel) {
				dc.skeleton[rel], dc.parents[rel] = true, true
			}
		}
	}
}

// startWatch makes the directories of the decoys' skeletons that are not
// mount points themselves and watches them, with each decoy and the
// private copy of the git directory, while the agent runs.
func (s *sandboxRun) startWatch(opens bool) error {
	s.watch = newAccessWatch(opens)
	for i := range s.decoys {
		dc := &s.decoys[i]
		// What the driver makes first, then the watches: its own writes
		// are not the agent's.
		for rel := range dc.parents {
			if err := os.MkdirAll(filepath.Join(dc.src, rel), 0o700); err != nil {
				return err
			}
		}
		if err := dc.plantCanaries(); err != nil {
			return err
		}
		s.watch.add(i, dc.src, ".")
		for _, rel := range slices.Sorted(maps.Keys(dc.parents)) {
			s.watch.add(i, dc.src, rel)
		}
		for rel, dir := range dc.canaries {
			if dir {
				s.watch.add(i, dc.src, rel)
			}
		}
	}
	if s.git != nil && s.git.shadow != nil {
		s.git.shadow.watch(s.watch)
	}
	return nil
}

// notAgents reports whether path rel of place was made by bwrap or git on
// their own, not by the agent.
func (s *sandboxRun) notAgents(place int, rel string) bool {
	if place == shadowPlace {
		return s.git == nil || s.git.shadow == nil || s.git.shadow.ignored(rel)
	}
	return place < 0 || place >= len(s.decoys) || s.decoys[place].skeleton[rel]
}

// decoyNotes lists what the agent made in each decoy (not following
// symbolic links, at most maxDecoyEntries entries in all): one note per
// hidden directory written, naming the first paths.
func (s *sandboxRun) decoyNotes(acc *accessWatches) []string {
	var notes []string
	budget := maxDecoyEntries
	for i, dc := range s.decoys {
		seen := acc.place(i)
		var paths []string
		more, stopped := 0, false
		_ = filepath.WalkDir(dc.src, func(p string, e fs.DirEntry, err error) error {
			if err != nil || p == dc.src {
				return nil
			}
			if budget--; budget < 0 {
				stopped = true
				return filepath.SkipAll
			}
			rel, err := filepath.Rel(dc.src, p)
			if err != nil {
				return nil
			}
			_, canary := dc.canaries[rel]
			if (dc.skeleton[rel] || canary) && (e.IsDir() || e.Type().IsRegular()) && !nonEmptyFile(e) {
				return nil // a mount point bwrap made or a canary (a directory's entries are still looked at)
			}
			if len(paths) < maxDecoyPaths {
				shown := rel
				if e.IsDir() {
					shown += "/"
				}
				paths = append(paths, strconv.Quote(truncate(shown, 80)))
			} else {
				more++
			}
			if e.IsDir() {
				return filepath.SkipDir // what it made: named once, not listed below
			}
			return nil
		})
		// What the watch saw made that is gone: removed before the agent
		// exited.
		var gone []string
		for _, rel := range slices.Sorted(maps.Keys(seen.touched)) {
			if _, err := os.Lstat(filepath.Join(dc.src, rel)); err != nil &&
				!slices.ContainsFunc(gone, func(g string) bool { return within(rel, g) }) {
				gone = append(gone, rel)
				if len(paths) < maxDecoyPaths {
					paths = append(paths, strconv.Quote(truncate(rel, 80))+" (removed)")
				} else {
					more++
				}
			}
		}
		// A listing is said only where nothing was written: a write says
		// more.
		if read := dc.readNote(seen); read != "" && (len(paths) == 0 || !strings.HasPrefix(read, "listed")) {
			notes = append(notes, read)
		}
		if removed := dc.removedNote(); removed != "" {
			notes = append(notes, removed)
		}
		if len(paths) == 0 {
			continue
		}
		what := strings.Join(paths, ", ")
		switch {
		case stopped:
			what += " and more"
		case more > 0:
			what += fmt.Sprintf(" and %d more", more)
		}
		notes = append(notes, fmt.Sprintf("wrote %s into the hidden %s (%s): a decoy, nothing real changed", what, dc.name, dc.dir))
	}
	return notes
}

// nonEmptyFile reports whether e is a regular file with data: a mount
// point bwrap makes for a file is empty.
func nonEmptyFile(e fs.DirEntry) bool {
	if !e.Type().IsRegular() {
		return false
	}
	info, err := e.Info()
	return err == nil && info.Size() > 0
}

// removeDecoys removes the directory of the execution's decoys. The agent
// is gone (its sandbox's processes die with it), so nothing changes them
// meanwhile; directories it made unwritable are made writable first, and
// symbolic links are removed, never followed.
func removeDecoys(root string) {
	if root == "" {
		return
	}
	if err := os.RemoveAll(root); err == nil {
		return
	}
	_ = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			_ = os.Chmod(p, 0o700) // a directory, by lstat: no link followed
		}
		return nil
	})
	_ = os.RemoveAll(root)
}
