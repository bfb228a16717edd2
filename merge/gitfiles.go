package merge

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Reading a few well-known files under the git directory directly, instead of
// spawning git, keeps the hot path of a merge cycle close to the cost of the
// raw git commands (each git process costs milliseconds). Every reader here
// falls back to git when the file layout is not the simple one it knows
// (packed objects, unusual HEADs), so the shortcut is never a correctness risk.

// readRefFile resolves a fully qualified ref ("refs/heads/main") from the
// loose ref file or packed-refs. ok is false when neither has it.
func readRefFile(commonDir, ref string) (hash string, ok bool, err error) {
	data, err := os.ReadFile(filepath.Join(commonDir, filepath.FromSlash(ref)))
	switch {
	case err == nil:
		line := strings.TrimSpace(string(data))
		if isHash(line) {
			return line, true, nil
		}
		return "", false, nil // symbolic or unexpected: let git answer
	case !errors.Is(err, fs.ErrNotExist) && !isDirErr(err):
		return "", false, err
	}
	f, err := os.Open(filepath.Join(commonDir, "packed-refs"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if len(line) > 41 && line[40] == ' ' && line[41:] == ref && isHash(line[:40]) {
			return line[:40], true, nil
		}
	}
	return "", false, sc.Err()
}

func isDirErr(err error) bool {
	return errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTDIR)
}

func isHash(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// resolveRef returns the commit a fully qualified ref points at, or "" when
// the ref does not exist.
func (m *Manager) resolveRef(ctx context.Context, ref string) (string, error) {
	if h, ok, err := readRefFile(m.commonDir, ref); err == nil && ok {
		return h, nil
	}
	out, err := m.git.Run(ctx, m.topDir, "rev-parse", "-q", "--verify", ref+"^{commit}")
	if err != nil {
		if exitCode(err) == 1 {
			return "", nil
		}
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// commitInfo is the part of a commit object a merge verifies.
type commitInfo struct {
	Tree    string
	Parents []string
	Message string
}

// readCommit parses a commit object, from its loose file when it is one
// (every commit Merge writes is), otherwise through git cat-file.
func (m *Manager) readCommit(ctx context.Context, hash string) (commitInfo, error) {
	if raw, ok := readLooseObject(m.commonDir, hash); ok {
		if body, found := bytes.CutPrefix(raw, []byte("commit ")); found {
			if i := bytes.IndexByte(body, 0); i >= 0 {
				return parseCommit(body[i+1:]), nil
			}
		}
	}
	out, err := m.git.Run(ctx, m.topDir, "cat-file", "commit", hash)
	if err != nil {
		return commitInfo{}, err
	}
	return parseCommit([]byte(out)), nil
}

func readLooseObject(commonDir, hash string) ([]byte, bool) {
	if !isHash(hash) {
		return nil, false
	}
	f, err := os.Open(filepath.Join(commonDir, "objects", hash[:2], hash[2:]))
	if err != nil {
		return nil, false
	}
	defer f.Close()
	zr, err := zlib.NewReader(f)
	if err != nil {
		return nil, false
	}
	defer zr.Close()
	data, err := io.ReadAll(io.LimitReader(zr, 16<<20))
	if err != nil {
		return nil, false
	}
	return data, true
}

func parseCommit(data []byte) commitInfo {
	var ci commitInfo
	header, msg, _ := bytes.Cut(data, []byte("\n\n"))
	for line := range strings.SplitSeq(string(header), "\n") {
		switch {
		case strings.HasPrefix(line, "tree "):
			ci.Tree = line[5:]
		case strings.HasPrefix(line, "parent "):
			ci.Parents = append(ci.Parents, line[7:])
		}
	}
	ci.Message = string(msg)
	return ci
}

// trailerValues returns the values of every "key: value" line in the last
// paragraph of a commit message: git's trailer block.
func trailerValues(msg, key string) []string {
	paras := strings.Split(strings.TrimRight(msg, "\n"), "\n\n")
	var vals []string
	for line := range strings.SplitSeq(paras[len(paras)-1], "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			vals = append(vals, strings.TrimSpace(v))
		}
	}
	return vals
}

// checkout is a worktree of the repository and the branch it has checked out.
type checkout struct {
	Path   string // absolute path of the working tree
	GitDir string // its private git directory (the common dir for the main worktree)
	Branch string // fully qualified, "" when detached
}

// checkouts lists every working tree's checked-out branch by reading the
// HEAD files git keeps per worktree.
func (m *Manager) checkouts() ([]checkout, error) {
	var out []checkout
	if m.mainDir != "" {
		b, err := readSymbolicHEAD(m.commonDir)
		if err != nil {
			return nil, err
		}
		out = append(out, checkout{Path: m.mainDir, GitDir: m.commonDir, Branch: b})
	}
	entries, err := os.ReadDir(filepath.Join(m.commonDir, "worktrees"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, e := range entries {
		admin := filepath.Join(m.commonDir, "worktrees", e.Name())
		gitdir, err := os.ReadFile(filepath.Join(admin, "gitdir"))
		if err != nil {
			continue // half-made or being removed: it has no usable checkout
		}
		b, err := readSymbolicHEAD(admin)
		if err != nil {
			continue
		}
		out = append(out, checkout{
			Path:   filepath.Dir(strings.TrimSpace(string(gitdir))),
			GitDir: admin,
			Branch: b,
		})
	}
	return out, nil
}

func readSymbolicHEAD(gitDir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		return "", fmt.Errorf("merge: read HEAD: %w", err)
	}
	ref, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "ref: ")
	if ok {
		return ref, nil
	}
	// A branch being rebased is checked out even though HEAD is detached:
	// moving it underneath the rebase would lose the move when it finishes.
	for _, dir := range []string{"rebase-merge", "rebase-apply"} {
		if name, err := os.ReadFile(filepath.Join(gitDir, dir, "head-name")); err == nil {
			if ref := strings.TrimSpace(string(name)); strings.HasPrefix(ref, "refs/") {
				return ref, nil
			}
		}
	}
	return "", nil
}
