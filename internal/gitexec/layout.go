package gitexec

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Reading the few files git keeps for a working tree (.git, a linked
// worktree's gitdir and commondir, HEAD, loose refs, packed-refs) instead of
// asking git saves a process start per question: about 8 ms of CPU on a
// small machine, paid on every heartbeat and every worktree a team opens.
// Each reader answers only in the simple, common layout and reports ok=false
// for anything it does not know to read exactly as git would; the caller then
// runs git, so a reader never changes an answer, only its cost.

// Layout is where git keeps the files of one working tree.
type Layout struct {
	// TopLevel is the root of the working tree (git rev-parse
	// --show-toplevel), symbolic links resolved.
	TopLevel string
	// GitDir is the working tree's own git directory (git rev-parse
	// --git-dir): <TopLevel>/.git for a main worktree,
	// <CommonDir>/worktrees/<name> for a linked one.
	GitDir string
	// CommonDir is the git directory every worktree of the repository
	// shares (git rev-parse --git-common-dir).
	CommonDir string
}

// ReadLayout reads dir's layout from the files git keeps, running no
// process, as git rev-parse --path-format=absolute --git-common-dir
// --git-dir --show-toplevel would print it when run in dir. ok is false when
// the answer might differ from git's: dir is not the root of a working tree
// (a subdirectory, a bare repository), env or the process environment
// relocates the repository (GIT_DIR, GIT_WORK_TREE, ...), git would refuse
// the repository (owned by another user) or its configuration moves the
// working tree (core.worktree, core.bare, includes, extensions). Callers
// then ask git. env is the extra environment the caller's git commands get.
func ReadLayout(dir string, env []string) (Layout, bool) {
	if environRelocates(env) {
		return Layout{}, false
	}
	top, err := filepath.Abs(dir)
	if err != nil {
		return Layout{}, false
	}
	if top, err = filepath.EvalSymlinks(top); err != nil {
		return Layout{}, false
	}
	dotgit := filepath.Join(top, ".git")
	fi, err := os.Lstat(dotgit)
	if err != nil || !ownedByMe(top) {
		return Layout{}, false
	}
	var l Layout
	switch {
	case fi.IsDir():
		l = Layout{TopLevel: top, GitDir: dotgit, CommonDir: dotgit}
	case fi.Mode().IsRegular():
		gitDir, ok := readGitFile(dotgit, top)
		if !ok {
			return Layout{}, false
		}
		common, ok := readCommonDir(gitDir)
		if !ok {
			return Layout{}, false
		}
		l = Layout{TopLevel: top, GitDir: gitDir, CommonDir: common}
	default:
		return Layout{}, false // a symbolic link: let git follow it
	}
	if !ownedByMe(dotgit) || !ownedByMe(l.GitDir) || !isGitDir(l) || !plainConfig(l.CommonDir) {
		return Layout{}, false
	}
	return l, true
}

// environRelocates reports whether a variable makes git look for the
// repository, its refs or its working tree somewhere else than dir/.git says.
func environRelocates(env []string) bool {
	relocating := []string{"GIT_DIR=", "GIT_WORK_TREE=", "GIT_COMMON_DIR=", "GIT_NAMESPACE=", "GIT_OBJECT_DIRECTORY="}
	for _, list := range [][]string{os.Environ(), env} {
		for _, kv := range list {
			for _, p := range relocating {
				if strings.HasPrefix(kv, p) {
					return true
				}
			}
		}
	}
	return false
}

// readGitFile reads a "gitdir: <path>" file; a relative path is taken
// against the directory holding the file, as git does.
func readGitFile(path, dir string) (string, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	gitDir, ok := strings.CutPrefix(strings.TrimRight(string(data), "\r\n"), "gitdir: ")
	if !ok || gitDir == "" || strings.ContainsAny(gitDir, "\n\x00") {
		return "", false
	}
	if !filepath.IsAbs(gitDir) {
		gitDir = filepath.Join(dir, gitDir)
	}
	return realDir(gitDir)
}

// readCommonDir follows a linked worktree's commondir file; a git
// directory without one is its own common directory.
func readCommonDir(gitDir string) (string, bool) {
	data, err := os.ReadFile(filepath.Join(gitDir, "commondir"))
	if errors.Is(err, fs.ErrNotExist) {
		return gitDir, true
	}
	if err != nil {
		return "", false
	}
	common := strings.TrimRight(string(data), "\r\n")
	if common == "" || strings.ContainsAny(common, "\n\x00") {
		return "", false
	}
	if !filepath.IsAbs(common) {
		common = filepath.Join(gitDir, common)
	}
	return realDir(common)
}

func realDir(p string) (string, bool) {
	p, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", false
	}
	fi, err := os.Stat(p)
	return p, err == nil && fi.IsDir()
}

// ownedByMe mirrors git's safe.directory check, which refuses repositories
// owned by another user unless configured otherwise: such a repository is
// left to git to accept or refuse.
func ownedByMe(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

// isGitDir is git's own test of a git directory: a HEAD that is a symbolic
// ref or a hash, and the objects and refs directories.
func isGitDir(l Layout) bool {
	head, err := os.ReadFile(filepath.Join(l.GitDir, "HEAD"))
	if err != nil {
		return false
	}
	h := strings.TrimRight(string(head), "\n")
	if !strings.HasPrefix(h, "ref: refs/") && !isHash(h) {
		return false
	}
	for _, d := range []string{"objects", "refs"} {
		if fi, err := os.Stat(filepath.Join(l.CommonDir, d)); err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// plainConfig reports whether the repository's configuration has nothing
// that changes where its working tree or refs are: no core.worktree, no
// core.bare other than false, no includes and no extensions (a reftable ref
// store, per-worktree configuration). It reads conservatively: any such key
// in any section counts.
func plainConfig(commonDir string) bool {
	data, err := os.ReadFile(filepath.Join(commonDir, "config"))
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		l := strings.ToLower(strings.Join(strings.Fields(line), ""))
		if l == "" || l[0] == '#' || l[0] == ';' {
			continue
		}
		if strings.HasPrefix(l, "[include") || strings.HasPrefix(l, "[extensions") {
			return false
		}
		key, val, _ := strings.Cut(l, "=")
		switch key {
		case "worktree", "worktreeconfig", "refstorage":
			return false
		case "bare":
			if val != "false" && val != "no" && val != "off" && val != "0" {
				return false
			}
		}
	}
	return true
}

// isHash reports whether s is a full object name, SHA-1 or SHA-256.
func isHash(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
