package gitexec

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ReadHead returns the commit checked out in the working tree of l, as git
// rev-parse --verify HEAD prints it, from the HEAD file and the ref it names
// (a loose ref, else packed-refs). ok is false when the files do not say
// plainly: an unborn branch, a ref that is itself symbolic, a file being
// rewritten. The caller then asks git, which also tells those apart.
func ReadHead(l Layout) (string, bool) {
	data, err := os.ReadFile(filepath.Join(l.GitDir, "HEAD"))
	if err != nil {
		return "", false
	}
	head := strings.TrimRight(string(data), "\n")
	if isHash(head) {
		return head, true // detached
	}
	ref, ok := strings.CutPrefix(head, "ref: ")
	if !ok {
		return "", false
	}
	return ReadRef(l, ref)
}

// ReadRef returns the object a fully qualified ref ("refs/heads/main")
// points at, from its loose file or packed-refs, as git rev-parse --verify
// would. ok is false when neither holds it plainly (no such ref, a symbolic
// ref, a malformed name): the caller asks git.
func ReadRef(l Layout, ref string) (string, bool) {
	if !strings.HasPrefix(ref, "refs/") || !validRefName(ref) {
		return "", false
	}
	dir := l.CommonDir
	for _, p := range []string{"refs/bisect/", "refs/worktree/", "refs/rewritten/"} {
		if strings.HasPrefix(ref, p) {
			dir = l.GitDir // refs git keeps per worktree
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(ref)))
	switch {
	case err == nil:
		h := strings.TrimRight(string(data), "\n")
		return h, isHash(h)
	case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.EISDIR) && !errors.Is(err, syscall.ENOTDIR):
		return "", false
	}
	if dir != l.CommonDir {
		return "", false
	}
	return readPackedRef(l.CommonDir, ref)
}

// HasLooseObject reports whether the object hash is stored as a loose
// object of l's repository. false does not mean it is missing: it may be in a
// pack, which only git reads.
func HasLooseObject(l Layout, hash string) bool {
	if !isHash(hash) {
		return false
	}
	fi, err := os.Stat(filepath.Join(l.CommonDir, "objects", hash[:2], hash[2:]))
	return err == nil && fi.Mode().IsRegular()
}

// readPackedRef looks ref up in packed-refs: "<hash> <ref>" lines, with
// "^<hash>" lines (a tag's peeled value) and a "# pack-refs" header between.
func readPackedRef(commonDir, ref string) (string, bool) {
	f, err := os.Open(filepath.Join(commonDir, "packed-refs"))
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		hash, name, ok := strings.Cut(sc.Text(), " ")
		if ok && name == ref && isHash(hash) {
			return hash, true
		}
	}
	return "", false
}

// ValidBranchName reports whether git check-ref-format --branch accepts
// name, by git's rules for ref names (git help check-ref-format) applied to
// refs/heads/<name>. true is sure. false is sure for names without '@'; a
// name with '@' is always false here, as git may expand it first ("@{-1}",
// "@{upstream}"). A caller that gets false and needs git's verdict or its
// message asks git.
func ValidBranchName(name string) bool {
	if name == "" || name[0] == '-' || name == "HEAD" || strings.ContainsRune(name, '@') {
		return false
	}
	return validRefName("refs/heads/" + name)
}

// validRefName applies git's ref name rules to a name of at least two
// components, without normalizing it.
func validRefName(ref string) bool {
	if ref == "@" || strings.HasSuffix(ref, ".") {
		return false
	}
	components := strings.Split(ref, "/")
	if len(components) < 2 {
		return false
	}
	for _, c := range components {
		if c == "" || c[0] == '.' || strings.HasSuffix(c, ".lock") ||
			strings.Contains(c, "..") || strings.Contains(c, "@{") {
			return false
		}
		for i := 0; i < len(c); i++ {
			if b := c[i]; b < 0x20 || b == 0x7f || strings.IndexByte(" *:?[\\^~", b) >= 0 {
				return false
			}
		}
	}
	return true
}
