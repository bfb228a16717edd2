package testrepo

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/agentforeman/foreman/internal/gitexec"
)

// GitEnv is the environment IsolateGit sets: no global or system git
// configuration, so that a developer's core.hooksPath or commit.gpgsign
// does not reach test repositories. (Auto maintenance is turned off in the
// repositories' own configuration instead, see Init: a GIT_CONFIG_COUNT in
// the environment would also turn off the library's reading of history
// from git's files, gitexec.LinearHistory, which must not see config it
// cannot read.)
func GitEnv() []string {
	return []string{"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1"}
}

// IsolateGit sets GitEnv in this process's environment, for a TestMain:
// every process the tests start inherits it.
func IsolateGit() error {
	for _, kv := range GitEnv() {
		k, v, _ := strings.Cut(kv, "=")
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}
	return nil
}

// Commit is the first commit of a repository New makes.
type Commit struct {
	// Files maps slash-separated paths to their contents (mode 0644); none
	// makes an empty commit (git commit --allow-empty).
	Files map[string]string
	// Message defaults to "initial".
	Message string
	// Author is also the committer; default gitexec.DefaultIdentity().
	Author gitexec.Identity
	// When defaults to now.
	When time.Time
}

// Init makes dir (created if missing) an empty repository with branch as
// its unborn current branch, as git init -b branch does, except that its
// configuration turns git's auto maintenance off (maintenance.auto false):
// git commit, merge and rebase would otherwise start git maintenance run
// --auto after each call, one test process in eight. Its worktrees share
// the setting.
func Init(dir, branch string) error {
	if branch == "" {
		return fmt.Errorf("testrepo: no branch")
	}
	gitDir := filepath.Join(dir, ".git")
	if _, err := os.Stat(gitDir); err == nil {
		return fmt.Errorf("testrepo: %s is a repository already", dir)
	}
	for _, d := range []string{"objects/info", "objects/pack", "refs/heads", "refs/tags", "info"} {
		if err := os.MkdirAll(filepath.Join(gitDir, d), 0o755); err != nil {
			return err
		}
	}
	return writeFiles(gitDir, map[string]string{
		"HEAD": "ref: refs/heads/" + branch + "\n",
		"config": "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n" +
			"[maintenance]\n\tauto = false\n",
	})
}

// New makes dir (created if missing) a repository on branch whose only
// commit is c, with c's files in the work tree and the index, and returns
// the commit's id.
func New(dir, branch string, c Commit) (string, error) {
	if err := Init(dir, branch); err != nil {
		return "", err
	}
	gitDir := filepath.Join(dir, ".git")
	paths := make([]string, 0, len(c.Files))
	for p := range c.Files {
		if err := checkPath(p); err != nil {
			return "", err
		}
		paths = append(paths, p)
	}
	sort.Strings(paths) // the index's order: plain byte order of the whole path
	root := &treeNode{}
	for _, p := range paths {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(full, []byte(c.Files[p]), 0o644); err != nil {
			return "", err
		}
		id, err := writeObject(gitDir, "blob", []byte(c.Files[p]))
		if err != nil {
			return "", err
		}
		root.add(strings.Split(p, "/"), id)
	}
	tree, err := root.write(gitDir)
	if err != nil {
		return "", err
	}
	who := c.Author
	if who.Name == "" {
		who = gitexec.DefaultIdentity()
	}
	when := c.When
	if when.IsZero() {
		when = time.Now()
	}
	msg := c.Message
	if msg == "" {
		msg = "initial"
	}
	msg = strings.TrimRight(msg, "\n") + "\n"
	sig := fmt.Sprintf("%s <%s> %d %s", who.Name, who.Email, when.Unix(), when.Format("-0700"))
	body := fmt.Sprintf("tree %s\nauthor %s\ncommitter %s\n\n%s", hex.EncodeToString(tree), sig, sig, msg)
	commit, err := writeObject(gitDir, "commit", []byte(body))
	if err != nil {
		return "", err
	}
	id := hex.EncodeToString(commit)
	subject, _, _ := strings.Cut(msg, "\n")
	reflog := fmt.Sprintf("%s %s %s\tcommit (initial): %s\n", strings.Repeat("0", 40), id, sig, subject)
	for _, d := range []string{"logs/refs/heads"} {
		if err := os.MkdirAll(filepath.Join(gitDir, d), 0o755); err != nil {
			return "", err
		}
	}
	if err := writeFiles(gitDir, map[string]string{
		"refs/heads/" + branch:      id + "\n",
		"logs/HEAD":                 reflog,
		"logs/refs/heads/" + branch: reflog,
	}); err != nil {
		return "", err
	}
	return id, writeIndex(dir, paths, root)
}

func checkPath(p string) error {
	if p == "" || path.Clean(p) != p || path.IsAbs(p) || strings.HasPrefix(p, "../") || p == ".." {
		return fmt.Errorf("testrepo: bad path %q", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".git" || part == "." {
			return fmt.Errorf("testrepo: bad path %q", p)
		}
	}
	return nil
}

func writeFiles(gitDir string, files map[string]string) error {
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(gitDir, filepath.FromSlash(name)), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeObject stores a loose object and returns its id.
func writeObject(gitDir, kind string, content []byte) ([]byte, error) {
	raw := append([]byte(fmt.Sprintf("%s %d\x00", kind, len(content))), content...)
	sum := sha1.Sum(raw)
	name := hex.EncodeToString(sum[:])
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	if _, err := w.Write(raw); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	dir := filepath.Join(gitDir, "objects", name[:2])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	file := filepath.Join(dir, name[2:])
	if _, err := os.Stat(file); err == nil {
		return sum[:], nil // the same content twice
	}
	return sum[:], os.WriteFile(file, z.Bytes(), 0o444)
}

// treeNode is a directory of the commit: its files' blob ids and its
// subdirectories.
type treeNode struct {
	blobs map[string][]byte
	dirs  map[string]*treeNode
}

func (n *treeNode) add(parts []string, id []byte) {
	if len(parts) == 1 {
		if n.blobs == nil {
			n.blobs = map[string][]byte{}
		}
		n.blobs[parts[0]] = id
		return
	}
	if n.dirs == nil {
		n.dirs = map[string]*treeNode{}
	}
	d := n.dirs[parts[0]]
	if d == nil {
		d = &treeNode{}
		n.dirs[parts[0]] = d
	}
	d.add(parts[1:], id)
}

// write stores the tree and its subtrees, returning its id. Git sorts a
// tree's entries by name, a directory's name as if it ended in "/".
func (n *treeNode) write(gitDir string) ([]byte, error) {
	type entry struct {
		key, mode, name string
		id              []byte
	}
	var entries []entry
	for name, id := range n.blobs {
		entries = append(entries, entry{name, "100644", name, id})
	}
	for name, d := range n.dirs {
		id, err := d.write(gitDir)
		if err != nil {
			return nil, err
		}
		entries = append(entries, entry{name + "/", "40000", name, id})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].key < entries[j].key })
	var b bytes.Buffer
	for _, e := range entries {
		fmt.Fprintf(&b, "%s %s\x00", e.mode, e.name)
		b.Write(e.id)
	}
	return writeObject(gitDir, "tree", b.Bytes())
}

func (n *treeNode) blob(p string) []byte {
	parts := strings.Split(p, "/")
	for _, d := range parts[:len(parts)-1] {
		n = n.dirs[d]
	}
	return n.blobs[parts[len(parts)-1]]
}

// writeIndex writes the index (version 2) of the files at paths, with their
// stat data as git add records it, so that git sees them unchanged without
// reading them again.
func writeIndex(dir string, paths []string, root *treeNode) error {
	var b bytes.Buffer
	b.WriteString("DIRC")
	_ = binary.Write(&b, binary.BigEndian, [2]uint32{2, uint32(len(paths))})
	for _, p := range paths {
		fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			return err
		}
		st := statOf(fi)
		_ = binary.Write(&b, binary.BigEndian, [10]uint32{
			st.ctimeSec, st.ctimeNsec, st.mtimeSec, st.mtimeNsec, st.dev, st.ino,
			0o100644, st.uid, st.gid, uint32(fi.Size()),
		})
		b.Write(root.blob(p))
		_ = binary.Write(&b, binary.BigEndian, uint16(min(len(p), 0xfff)))
		b.WriteString(p)
		// NUL-padded to a multiple of 8 bytes, at least one NUL.
		b.Write(make([]byte, 8-(62+len(p))%8))
	}
	sum := sha1.Sum(b.Bytes())
	b.Write(sum[:])
	return os.WriteFile(filepath.Join(dir, ".git", "index"), b.Bytes(), 0o644)
}

// stat is what the index records of a file besides its mode and size.
type stat struct {
	ctimeSec, ctimeNsec, mtimeSec, mtimeNsec, dev, ino, uid, gid uint32
}

func statFromInfo(fi os.FileInfo) stat {
	t := fi.ModTime()
	return stat{ctimeSec: uint32(t.Unix()), ctimeNsec: uint32(t.Nanosecond()), mtimeSec: uint32(t.Unix()), mtimeNsec: uint32(t.Nanosecond())}
}
