package gitexec

import (
	"bytes"
	"compress/zlib"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Commit is a commit object read from git's files.
type Commit struct {
	Hash    string
	Parents []string
	// Message is the raw message: everything after the headers' blank line.
	Message string
}

// Subject is the message's first paragraph with its lines joined by one
// space and trailing whitespace trimmed: what git log --format=%s prints.
func (c Commit) Subject() string {
	msg := c.Message
	// git skips blank lines before the subject.
	for {
		line, rest, found := strings.Cut(msg, "\n")
		if strings.TrimRight(line, " \t\r") != "" || !found {
			break
		}
		msg = rest
	}
	var parts []string
	for msg != "" {
		line, rest, _ := strings.Cut(msg, "\n")
		line = strings.TrimRight(line, " \t\r")
		if line == "" {
			break
		}
		parts = append(parts, line)
		msg = rest
	}
	return strings.Join(parts, " ")
}

// maxLinearHistory bounds the walk of LinearHistory; a longer history is
// left to git.
const maxLinearHistory = 1000

// LinearHistory returns the commits of base..head (reachable from head, not
// from base), oldest first, by following parents from head through loose
// commit objects, as git log --reverse base..head lists them. ok is false
// when the history is not the simple case it reads exactly: a commit that
// is packed, a merge or root commit before base is reached, a commit with
// an encoding header (git log re-encodes), replace refs, grafts or a
// shallow repository (they change parents), a log output encoding
// configured, or more than a thousand commits. The caller then asks git.
// l must come from ReadLayout, which has ruled out relocated repositories.
func LinearHistory(l Layout, env []string, base, head string) ([]Commit, bool) {
	if !isHash(base) || !isHash(head) || !plainHistory(l, env) {
		return nil, false
	}
	var chain []Commit
	for h := head; h != base; {
		if len(chain) == maxLinearHistory {
			return nil, false
		}
		c, ok := ReadLooseCommit(l, h)
		if !ok || len(c.Parents) != 1 {
			return nil, false
		}
		chain = append(chain, c)
		h = c.Parents[0]
	}
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	return chain, true
}

// ReadLooseCommit reads and parses the commit hash from its loose object
// file. ok is false when it is not a loose commit object, or carries an
// encoding header.
func ReadLooseCommit(l Layout, hash string) (Commit, bool) {
	if !isHash(hash) || len(hash) != 40 {
		return Commit{}, false
	}
	f, err := os.Open(filepath.Join(l.CommonDir, "objects", hash[:2], hash[2:]))
	if err != nil {
		return Commit{}, false
	}
	defer f.Close()
	zr, err := zlib.NewReader(f)
	if err != nil {
		return Commit{}, false
	}
	defer zr.Close()
	raw, err := io.ReadAll(io.LimitReader(zr, 16<<20))
	if err != nil {
		return Commit{}, false
	}
	header, body, found := bytes.Cut(raw, []byte{0})
	size, ok := bytes.CutPrefix(header, []byte("commit "))
	if !found || !ok || strconv.Itoa(len(body)) != string(size) {
		return Commit{}, false
	}
	headers, msg, found := bytes.Cut(body, []byte("\n\n"))
	if !found {
		headers, msg = bytes.TrimSuffix(body, []byte("\n")), nil
	}
	c := Commit{Hash: hash, Message: string(msg)}
	for line := range strings.SplitSeq(string(headers), "\n") {
		switch {
		case strings.HasPrefix(line, "parent "):
			p := line[len("parent "):]
			if !isHash(p) {
				return Commit{}, false
			}
			c.Parents = append(c.Parents, p)
		case strings.HasPrefix(line, "encoding "):
			return Commit{}, false
		}
	}
	return c, true
}

// plainHistory reports whether nothing makes git show other parents or
// other text than the commit objects hold: replace refs, grafts, a shallow
// clone, a log output encoding set in any configuration file or the
// environment.
func plainHistory(l Layout, env []string) bool {
	for _, name := range []string{"shallow", filepath.Join("info", "grafts")} {
		if _, err := os.Stat(filepath.Join(l.CommonDir, name)); !errors.Is(err, fs.ErrNotExist) {
			return false
		}
	}
	if entries, err := os.ReadDir(filepath.Join(l.CommonDir, "refs", "replace")); err == nil && len(entries) > 0 {
		return false
	}
	if packed, err := os.ReadFile(filepath.Join(l.CommonDir, "packed-refs")); err == nil && bytes.Contains(packed, []byte(" refs/replace/")) {
		return false
	}
	for _, list := range [][]string{os.Environ(), env} {
		for _, kv := range list {
			if strings.HasPrefix(kv, "GIT_CONFIG_PARAMETERS=") || strings.HasPrefix(kv, "GIT_CONFIG_COUNT=") ||
				strings.HasPrefix(kv, "GIT_REPLACE_REF_BASE=") || strings.HasPrefix(kv, "GIT_GRAFT_FILE=") {
				return false
			}
		}
	}
	for _, path := range configFiles(l, env) {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		lower := bytes.ToLower(data)
		if bytes.Contains(lower, []byte("logoutputencoding")) || bytes.Contains(lower, []byte("[include")) {
			return false
		}
	}
	return true
}

// configFiles lists the configuration files git may read for l: system,
// global (GIT_CONFIG_GLOBAL, else ~/.gitconfig and the XDG one), and the
// repository's.
func configFiles(l Layout, env []string) []string {
	get := func(key string) (string, bool) {
		v, ok := "", false
		for _, list := range [][]string{os.Environ(), env} {
			for _, kv := range list {
				if rest, found := strings.CutPrefix(kv, key+"="); found {
					v, ok = rest, true // the last setting wins, as in exec
				}
			}
		}
		return v, ok
	}
	// The system file is read even when GIT_CONFIG_NOSYSTEM may skip it:
	// reading one more file only makes the answer more cautious.
	files := []string{"/etc/gitconfig"}
	if sys, ok := get("GIT_CONFIG_SYSTEM"); ok {
		files = append(files, sys)
	}
	if global, ok := get("GIT_CONFIG_GLOBAL"); ok {
		files = append(files, global)
	} else {
		home, _ := get("HOME")
		xdg, ok := get("XDG_CONFIG_HOME")
		if !ok || xdg == "" {
			xdg = filepath.Join(home, ".config")
		}
		files = append(files, filepath.Join(xdg, "git", "config"), filepath.Join(home, ".gitconfig"))
	}
	return append(files, filepath.Join(l.CommonDir, "config"))
}
