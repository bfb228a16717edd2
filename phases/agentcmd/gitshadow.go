package agentcmd

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentforeman/foreman/internal/atomicfile"
)

// A gitShadow is the private copy of the repository's git directory (git's
// common directory) that the agent's git writes instead of the real one, in
// a linked worktree (the team's) and in the main worktree alike. Git writes
// a file by making "<name>.lock" beside it and renaming, so a read-only
// bind refuses every write with EROFS, which leaves no trace; in the shadow a write succeeds, changes nothing real,
// and is seen: once the agent is gone the driver compares the shadow with
// what it copied (notes) and reports each difference, and carries back
// the agent's own branch alone.
//
// The shadow holds copies of the small things (config, HEAD, hooks, info,
// the loose refs and packed-refs, ...); the object directory is the
// execution's own, borrowing the real one (gitobjects.go); the worktrees' admin
// directories and any other directory are the real ones, read-only; logs
// is an empty directory of the execution. A linked worktree's own files
// (its HEAD, index) are in its admin directory, the real one, writable; in
// the main worktree they are in this git directory (worktreeOwn) and the
// agent's: copied, not compared; the index alone is carried back.
type gitShadow struct {
	// dir is the shadow on the host, bound at real.
	dir, real string
	// files are the copied files, links and directories, by path in dir
	// (refs/ and packed-refs are compared as refs instead).
	files map[string]shadowEntry
	// refs are the refs before the agent: loose over packed, by full name;
	// packed the packed ones.
	refs, packed map[string]string
	// linked are the loose refs the shadow holds as links to the real
	// ones (every one but the agent's own branch), by full name, with
	// their targets; packedLinked: packed-refs is such a link.
	linked       map[string]string
	packedLinked bool
	// bound are the top-level names bound from the real directory: mount
	// points, not the agent's.
	bound map[string]bool
	// mainWorktree: the workspace is the main worktree, whose own files
	// are in this git directory.
	mainWorktree bool
	// sha256: the repository names its objects with SHA-256, not SHA-1.
	sha256 bool
}

// worktreeOwn reports whether top-level name of a git directory is a
// worktree's own (a linked worktree keeps it in its admin directory, the
// main worktree in the repository's git directory): its HEAD, index, and
// what a commit, merge, rebase, cherry-pick, revert or bisect in progress
// writes. Only the index is carried back from the main worktree's shadow:
// the rest can hold commands a host's git would run (a rebase's todo list).
func worktreeOwn(name string) bool {
	switch name {
	case "HEAD", "index", "COMMIT_EDITMSG", "ORIG_HEAD", "MERGE_HEAD", "MERGE_MSG", "MERGE_MODE", "MERGE_RR", "AUTO_MERGE",
		"CHERRY_PICK_HEAD", "REVERT_HEAD", "REBASE_HEAD", "rebase-merge", "rebase-apply", "sequencer":
		return true
	}
	return strings.HasPrefix(name, "BISECT_")
}

// shadowEntry is what a path of the shadow held: its type and permission
// bits, a file's size and digest, a link's target.
type shadowEntry struct {
	mode fs.FileMode
	size int64
	sum  [sha256.Size]byte
	link string
}

const (
	// maxShadowFile is the largest top-level file the shadow copies; a
	// larger one (a huge packed-refs) is bound read-only.
	maxShadowFile = 16 << 20
	// maxShadowEntries bounds the entries the comparison looks at.
	maxShadowEntries = 20000
)

// shadowCopied are the directories of the git directory the shadow copies;
// shadowEmpty are the execution's own empty directories; the object
// directory is the execution's own too, borrowing the real one
// (gitobjects.go). Any other directory is bound read-only.
var (
	shadowCopied = map[string]bool{"hooks": true, "info": true, "branches": true}
	shadowEmpty  = map[string]bool{"logs": true}
)

// hostView is where the shadow shows the real git directory, read-only:
// its links to the real refs point there.
const hostView = ".foreman-host"

// newGitShadow copies the git directory real into a new shadow and returns
// it with the binds that complete it. The refs are links to the real ones
// (through hostView), so that the agent sees the host's refs move (main,
// as stories land) while it runs; own, the agent's branch, is a copy. Git
// writes a ref by renaming a new file over it, so a ref the agent writes
// becomes a file of the shadow, and the link of one it deletes goes.
// mainWorktree says the workspace is the repository's main worktree.
func newGitShadow(real, own string, mainWorktree bool) (*gitShadow, []mount, error) {
	dir, err := os.MkdirTemp("", ownerPattern("foreman-sandbox-git-"))
	if err != nil {
		return nil, nil, err
	}
	g := &gitShadow{dir: dir, real: real, files: map[string]shadowEntry{}, bound: map[string]bool{hostView: true},
		linked: map[string]string{}, mainWorktree: mainWorktree}
	ms := []mount{{kind: mountRW, src: dir, dst: real}, {kind: mountRO, src: real, dst: filepath.Join(real, hostView)}}
	// The real config, through the view, is the copy's (redacted).
	ms = append(ms, mount{kind: mountROTry, src: filepath.Join(dir, "config"), dst: filepath.Join(real, hostView, "config")})
	// The refs before the agent are what the shadow holds: the packed ones
	// read now, each loose one as it was linked or copied (the host may
	// make, move or delete refs meanwhile: a separate read would differ).
	g.packed = readPacked(real)
	g.sha256 = objectFormatSHA256(real)
	g.refs = maps.Clone(g.packed)
	fail := func(err error) (*gitShadow, []mount, error) {
		g.remove()
		return nil, nil, fmt.Errorf("copying the repository's git directory %s: %w", real, err)
	}
	entries, err := os.ReadDir(real)
	if err != nil {
		return fail(err)
	}
	for _, e := range entries {
		name := e.Name()
		src, dst := filepath.Join(real, name), filepath.Join(dir, name)
		info, err := e.Info()
		if err != nil {
			if os.IsNotExist(err) {
				continue // gone meanwhile (a host git's lock)
			}
			return fail(err)
		}
		switch {
		case strings.HasSuffix(name, ".lock"):
			// A host git's write in progress: not the repository's state.
		case shadowEmpty[name], name == hostView:
		case mainWorktree && worktreeOwn(name) && (info.IsDir() || info.Mode().IsRegular()):
			// The agent's own (the index whatever its size): copied, not
			// compared (g.ignored).
			if err := g.copyTree(src, dst, name); err != nil {
				return fail(err)
			}
		case name == "refs" && info.IsDir():
			if err := g.linkRefs(own); err != nil {
				return fail(err)
			}
		case name == "packed-refs" && info.Mode().IsRegular():
			if err := os.Symlink(filepath.Join(real, hostView, name), dst); err != nil {
				return fail(err)
			}
			g.packedLinked = true
		case info.Mode()&fs.ModeSymlink != 0, info.Mode().IsRegular() && info.Size() <= maxShadowFile && name != "index",
			info.IsDir() && shadowCopied[name]:
			if err := g.copyTree(src, dst, name); err != nil {
				return fail(err)
			}
		case name == objectsDir && info.IsDir():
			// The execution's own, borrowing this one (makeObjects).
		case info.IsDir() || info.Mode().IsRegular():
			g.bound[name] = true
			ms = append(ms, mount{kind: mountRO, src: src, dst: src})
		}
	}
	for name := range shadowEmpty {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			return fail(err)
		}
	}
	if err := g.makeObjects(); err != nil {
		return fail(err)
	}
	return g, ms, nil
}

// linkRefs makes the shadow's refs: a link to each real loose ref, a copy
// of own.
func (g *gitShadow) linkRefs(own string) error {
	src := filepath.Join(g.real, "refs")
	return filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && p != src {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(g.real, p)
		if err != nil {
			return err
		}
		target, name := filepath.Join(g.dir, rel), filepath.ToSlash(rel)
		switch {
		case e.IsDir():
			return os.MkdirAll(target, 0o755)
		case !e.Type().IsRegular() || strings.HasSuffix(p, ".lock"):
			return nil
		}
		data, err := readSmall(p, 4096)
		if err != nil {
			return nil // gone meanwhile: not in the shadow, not before
		}
		g.refs[name] = strings.TrimSpace(string(data))
		if name == own {
			return os.WriteFile(target, data, 0o644)
		}
		link := filepath.Join(g.real, hostView, rel)
		g.linked[name] = link
		return os.Symlink(link, target)
	})
}

// refsAfter are the refs as the agent left them: a ref whose link is as
// the shadow made it has its value from before (the host may have moved
// the real one meanwhile: not the agent's doing), one the agent wrote its
// new value; packed-refs likewise.
func (g *gitShadow) refsAfter() map[string]string {
	after := map[string]string{}
	packed := filepath.Join(g.dir, "packed-refs")
	if link, err := os.Readlink(packed); g.packedLinked && err == nil && link == filepath.Join(g.real, hostView, "packed-refs") {
		maps.Copy(after, g.packed)
	} else {
		maps.Copy(after, readPacked(g.dir))
	}
	root := filepath.Join(g.dir, "refs")
	_ = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || strings.HasSuffix(p, ".lock") {
			return nil
		}
		rel, err := filepath.Rel(g.dir, p)
		if err != nil {
			return nil
		}
		name := filepath.ToSlash(rel)
		if e.Type()&fs.ModeSymlink != 0 {
			if link, err := os.Readlink(p); err == nil && link == g.linked[name] {
				after[name] = g.refs[name]
			} else {
				after[name] = "link: " + link
			}
			return nil
		}
		if data, err := readSmall(p, 4096); err == nil {
			after[name] = strings.TrimSpace(string(data))
		}
		return nil
	})
	return after
}

// copyTree copies src (a file, a link or a directory: regular files, links
// and directories, no lock files) to dst and records each path copied.
func (g *gitShadow) copyTree(src, dst, rel string) error {
	return filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && p != src {
				return nil
			}
			return err
		}
		sub, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target, name := filepath.Join(dst, sub), filepath.Join(rel, sub)
		if strings.HasSuffix(p, ".lock") {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return nil // gone meanwhile
		}
		var st shadowEntry
		switch {
		case e.IsDir():
			if err := os.Mkdir(target, info.Mode().Perm()|0o700); err != nil {
				return err
			}
			st = shadowEntry{mode: fs.ModeDir | info.Mode().Perm()}
		case e.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
			st = shadowEntry{mode: fs.ModeSymlink, link: link}
		case e.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if name == "config" {
				data = append(redactConfig(data), sandboxGitConfig...)
			}
			if err := os.WriteFile(target, data, info.Mode().Perm()); err != nil {
				return err
			}
			if err := os.Chmod(target, info.Mode().Perm()); err != nil {
				return err
			}
			st = shadowEntry{mode: info.Mode().Perm(), size: int64(len(data)), sum: sha256.Sum256(data)}
		default:
			return nil // a socket or a pipe: not copied
		}
		if !g.ignored(name) {
			g.files[name] = st
		}
		return nil
	})
}

// watch watches the copy's directories that are not compared as refs.
func (g *gitShadow) watch(w *accessWatch) {
	w.add(shadowPlace, g.dir, ".")
	for rel, e := range g.files {
		if e.mode.IsDir() {
			w.add(shadowPlace, g.dir, rel)
		}
	}
}

// carryIndex puts the main worktree's index as the agent left it in the
// shadow back in the real git directory (what it staged and did not
// commit): written whole and renamed into place; removed if the agent
// removed it.
func (g *gitShadow) carryIndex() error {
	src, dst := filepath.Join(g.dir, "index"), filepath.Join(g.real, "index")
	data, err := os.ReadFile(src)
	if os.IsNotExist(err) {
		if err := os.Remove(dst); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	}
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, data) {
		return nil
	}
	return atomicfile.WriteFile(dst, data, 0o644)
}

// remove removes the shadow.
func (g *gitShadow) remove() {
	if g != nil {
		removeDecoys(g.dir)
	}
}

// readRefs reads the refs of git directory dir: its loose refs over its
// packed ones, by full name (a symbolic ref's value is "ref: <target>").
func readRefs(dir string) map[string]string {
	refs := readPacked(dir)
	addLooseRefs(refs, filepath.Join(dir, "refs"), "refs/")
	return refs
}

// readPacked reads the packed refs of git directory dir.
func readPacked(dir string) map[string]string {
	refs := map[string]string{}
	if f, err := os.Open(filepath.Join(dir, "packed-refs")); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if line == "" || line[0] == '#' || line[0] == '^' {
				continue
			}
			if oid, name, ok := strings.Cut(line, " "); ok {
				refs[name] = oid
			}
		}
		_ = f.Close()
	}
	return refs
}

// readSmall reads at most n bytes of regular file p.
func readSmall(p string, n int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return io.ReadAll(io.LimitReader(f, n))
}
