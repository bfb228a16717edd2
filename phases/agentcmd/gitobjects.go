package agentcmd

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The agent's git writes new objects into the shadow's own object
// directory, which borrows the real one read-only (info/alternates, through
// hostView): the real object store is shared by every story and the host,
// and an agent that could write it could delete it (a trial's `find
// .git/objects -delete` lost main and every branch). Once the agent is gone
// the driver moves what it wrote into the real store, after checking each
// object is what its name says: a loose object by its hash, here; a pack
// through the host's own git index-pack --strict, which checks every
// object in it. A forged object stays out: a later commit of the same
// content by anyone would otherwise find it "already there" and use it.

// objectsDir is the shadow's own object directory.
const objectsDir = "objects"

// maxObjectNotes bounds the notes about refused objects.
const maxObjectNotes = 3

// looseObjectName is a loose object's path under objects/: two hex digits
// and the rest of a SHA-1 (38) or SHA-256 (62) name.
var looseObjectName = regexp.MustCompile(`^[0-9a-f]{2}/([0-9a-f]{38}|[0-9a-f]{62})$`)

// makeObjects makes the shadow's object directory, borrowing the real one
// as the agent sees it (read-only, under hostView).
func (g *gitShadow) makeObjects() error {
	info := filepath.Join(g.dir, objectsDir, "info")
	if err := os.MkdirAll(info, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(info, "alternates"), []byte(g.borrowed()), 0o644)
}

// borrowed is the shadow's objects/info/alternates as makeObjects writes
// it: the real object directory as the agent sees it.
func (g *gitShadow) borrowed() string {
	return filepath.Join(g.real, hostView, objectsDir) + "\n"
}

// migrateObjects moves the objects the agent wrote into the real object
// store: the loose ones whose content is the object their name says, each
// pack the host's git accepts. It returns a note per object or pack it
// refused (at most maxObjectNotes, then a count), after what
// objectInfoNotes says of the rest of its object directory.
func (g *gitShadow) migrateObjects(ctx context.Context) []string {
	root := filepath.Join(g.dir, objectsDir)
	newHash := sha1.New
	if g.sha256 {
		newHash = sha256.New
	}
	var refused []string
	refuse := func(format string, args ...any) {
		refused = append(refused, fmt.Sprintf(format, args...))
	}
	notes := g.objectInfoNotes(ctx)
	fans, _ := os.ReadDir(root)
	for _, fan := range fans {
		if !fan.IsDir() || len(fan.Name()) != 2 {
			continue
		}
		entries, _ := os.ReadDir(filepath.Join(root, fan.Name()))
		for _, e := range entries {
			rel := fan.Name() + "/" + e.Name()
			if !e.Type().IsRegular() || !looseObjectName.MatchString(rel) || strings.HasPrefix(e.Name(), "tmp_") {
				continue // git's temporary files, or no object
			}
			name := fan.Name() + e.Name()
			if (len(name) == 64) != g.sha256 {
				refuse("refused the agent's object %s: not this repository's object format", name)
				continue
			}
			if _, err := os.Lstat(filepath.Join(g.real, objectsDir, rel)); err == nil {
				continue // the host has it: the real one stays
			}
			data, err := readSmall(filepath.Join(root, rel), maxLooseObject+1)
			if err != nil || len(data) > maxLooseObject {
				refuse("refused the agent's object %s: not read (%v)", name, errOrTooLarge(err))
				continue
			}
			if err := checkLoose(data, name, newHash); err != nil {
				refuse("refused the agent's object %s: %v", name, err)
				continue
			}
			if err := placeObject(filepath.Join(g.real, objectsDir), rel, data); err != nil {
				refuse("could not carry the agent's object %s back: %v", name, err)
			}
		}
	}
	// (git maintenance's loose-objects task names its packs loose-<id>.)
	packs, _ := filepath.Glob(filepath.Join(root, "pack", "*.pack"))
	var pending []string
	for _, p := range packs {
		if !packDirName.MatchString(filepath.Base(p)) {
			continue // named in objectInfoNotes'
		}
		if info, err := os.Lstat(p); err != nil || !info.Mode().IsRegular() {
			// (A link to a pipe would hold the driver's open.)
			refuse("refused the agent's pack %s: not a file", filepath.Base(p))
			continue
		}
		pending = append(pending, p)
	}
	// A pack may need objects of another (git index-pack --strict checks
	// that every object it names is there): those refused are tried again
	// while others got in.
	failed := map[string]error{}
	for round := 0; len(pending) > 0 && round < maxPackRounds; round++ {
		var again []string
		for _, p := range pending {
			if err := g.indexPack(ctx, p); err != nil {
				failed[p] = err
				again = append(again, p)
			} else {
				delete(failed, p)
			}
		}
		if len(again) == len(pending) {
			break
		}
		pending = again
	}
	for _, p := range slices.Sorted(maps.Keys(failed)) {
		refuse("refused the agent's pack %s: %v", filepath.Base(p), failed[p])
	}
	if len(refused) > maxObjectNotes {
		refused = append(refused[:maxObjectNotes], fmt.Sprintf("and %d more of the agent's objects refused", len(refused)-maxObjectNotes))
	}
	return append(notes, refused...)
}

// maxPackRounds bounds the rounds of migrateObjects' tries of the
// agent's packs.
const maxPackRounds = 8

// maxLooseObject is the largest loose object the driver carries back
// (compressed): git packs what is larger, and a pack is checked by git.
const maxLooseObject = 256 << 20

func errOrTooLarge(err error) error {
	if err != nil {
		return err
	}
	return errors.New("larger than 256 MiB")
}

// checkLoose reports whether data, a loose object file, holds the object
// name: a zlib stream of "<type> <size>\x00<content>" whose hash is name.
func checkLoose(data []byte, name string, newHash func() hash.Hash) error {
	zr, err := zlib.NewReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not a compressed object: %w", err)
	}
	defer func() { _ = zr.Close() }()
	br := bufio.NewReader(zr)
	header, err := br.ReadString(0)
	if err != nil || len(header) > 32 {
		return errors.New("no object header")
	}
	kind, size, ok := strings.Cut(strings.TrimSuffix(header, "\x00"), " ")
	n, err := strconv.ParseInt(size, 10, 64)
	switch {
	case !ok || err != nil || n < 0 || strconv.FormatInt(n, 10) != size:
		return errors.New("no object header")
	case kind != "blob" && kind != "tree" && kind != "commit" && kind != "tag":
		return fmt.Errorf("unknown object type %q", kind)
	}
	h := newHash()
	h.Write([]byte(header))
	got, err := io.Copy(h, br)
	if err != nil {
		return fmt.Errorf("its content does not decompress: %w", err)
	}
	if got != n {
		return fmt.Errorf("its header says %d bytes, its content has %d", n, got)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != name {
		return fmt.Errorf("its content is object %s, not the one its name says", sum)
	}
	return nil
}

// placeObject writes loose object rel (checked) into the object directory
// objects without replacing one that is there: written beside it, then
// linked into place.
func placeObject(objects, rel string, data []byte) error {
	dir := filepath.Join(objects, filepath.Dir(rel))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "tmp_obj_foreman_")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o444); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), filepath.Join(objects, rel)); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}

// indexPack adds pack p to the real object store through the host's git,
// which checks every object in it and names the pack by its content.
func (g *gitShadow) indexPack(ctx context.Context, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	cmd := exec.CommandContext(ctx, "git", "--git-dir="+g.real, "index-pack", "--stdin", "--strict")
	cmd.Env = hostGitEnv()
	cmd.Stdin = f
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git index-pack: %w: %s", err, truncate(strings.TrimSpace(stderr.String()), 200))
	}
	return nil
}

// objectFormatPattern finds extensions.objectFormat = sha256 in a git
// config file.
var objectFormatPattern = regexp.MustCompile(`(?im)^\s*objectformat\s*=\s*"?sha256"?\s*$`)

// objectFormatSHA256 reports whether git directory dir's repository names
// its objects with SHA-256 (its config's extensions.objectFormat).
func objectFormatSHA256(dir string) bool {
	data, err := readSmall(filepath.Join(dir, "config"), 1<<20)
	return err == nil && objectFormatPattern.Match(data)
}
