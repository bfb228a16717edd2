package merge

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ConflictFile is one file a rebase stopped on, as git left it in the item's
// worktree before the rebase was aborted: the regions git marked, with both
// sides.
type ConflictFile struct {
	// Path is the file's path in the repository, slash-separated.
	Path string
	// Hunks are the conflicts git marked in the file, in file order. There
	// are none when git wrote no markers: the conflict is of the file's
	// name, mode or type, or its content is binary (see also Missing).
	Hunks []Hunk
	// Missing: there is no file at Path in the worktree (deleted on one
	// side, changed on the other).
	Missing bool
	// Clipped: hunks, lines or the end of a line were left out to keep
	// within RebaseOptions' bounds.
	Clipped bool
}

// Hunk is one conflict git marked in a file during a rebase. In a rebase
// the target's side is git's "ours" (the branch is replayed onto it) and
// the item's side, its commit being replayed, "theirs".
type Hunk struct {
	// Line is the 1-based line, in the file as git wrote it (markers
	// included), of the hunk's first line: Before's first, or the opening
	// marker's when Before is empty.
	Line int
	// Before and After are up to RebaseOptions.Context unmarked lines
	// around the conflict. No line is in two hunks: a hunk's Before starts
	// after the previous hunk's After.
	Before, After []string
	// Target is the target's side, Item the item's.
	Target, Item []string
	// Base is the common ancestor's side, which git writes only when the
	// repository's merge.conflictStyle is diff3 or zdiff3 (nil otherwise).
	Base []string
	// Label is what git wrote after the closing marker: the replayed
	// commit, "<abbreviated hash> (<subject>)".
	Label string
}

// End is the line after the hunk's last, in the file as git wrote it: a
// next hunk whose Line is End follows it directly.
func (h Hunk) End() int {
	n := len(h.Before) + 1 + len(h.Target) + 1 + len(h.Item) + 1 + len(h.After)
	if h.Base != nil {
		n += 1 + len(h.Base)
	}
	return h.Line + n
}

// Conflict markers, as git writes them (at least seven characters, then a
// space and a label, or nothing).
const (
	markOpen  = "<<<<<<<"
	markBase  = "|||||||"
	markSep   = "======="
	markClose = ">>>>>>>"
)

// maxConflictRead bounds what is read of one conflicting file.
const maxConflictRead = 4 << 20

// conflictBounds are RebaseOptions' bounds with the defaults filled in.
type conflictBounds struct{ context, files, fileBytes, bytes int }

// readConflicts reads the conflicting files of a stopped rebase in the
// worktree at dir, within the bounds: at most b.files files, b.fileBytes
// bytes of lines per file and b.bytes in all. Files past either limit are
// not read (the result has fewer entries than files).
func readConflicts(dir string, files []string, b conflictBounds) []ConflictFile {
	var out []ConflictFile
	left := b.bytes
	for _, f := range files {
		if len(out) == b.files || left <= 0 {
			break
		}
		cf := ConflictFile{Path: f}
		content, err := readRegular(filepath.Join(dir, filepath.FromSlash(f)))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			cf.Missing = true
		case err == nil:
			budget := min(b.fileBytes, left)
			cf.Hunks, cf.Clipped = parseHunks(string(content), b.context, budget)
			cf.Clipped = cf.Clipped || len(content) > maxConflictRead
			left -= hunksSize(cf.Hunks)
		}
		out = append(out, cf)
	}
	return out
}

// readRegular reads at most maxConflictRead+1 bytes of the regular file at
// path, refusing to follow a symbolic link (a commit may make one point
// anywhere on the host) or to read anything but a plain file.
func readRegular(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, errors.New("a symbolic link")
		}
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	return io.ReadAll(io.LimitReader(f, maxConflictRead+1))
}

// parseHunks finds the conflicts git marked in content, with up to ctx
// lines around each, keeping at most budget bytes of lines (a line counts
// its length and its newline; markers count too). A hunk larger than what
// is left keeps both sides, each cut to its share, without its context;
// the hunks after it are left out. clipped says something was left out.
func parseHunks(content string, ctx, budget int) (hunks []Hunk, clipped bool) {
	lines := strings.Split(content, "\n")
	prevEnd := 0 // index of the first line the next hunk's Before may use
	for i := 0; i < len(lines); i++ {
		if !isMarker(lines[i], markOpen) {
			continue
		}
		h, end, ok := parseHunk(lines, i)
		if !ok {
			break // an opening marker git did not close: not a conflict
		}
		from := max(i-ctx, prevEnd)
		h.Line = from + 1
		h.Before = lines[from:i]
		to := min(end+1+ctx, len(lines))
		if next := nextMarker(lines, end+1, to); next >= 0 {
			to = next
		}
		h.After = lines[end+1 : to]
		if to == len(lines) && len(h.After) > 0 && h.After[len(h.After)-1] == "" {
			h.After = h.After[:len(h.After)-1] // the file's last newline
		}
		prevEnd, i = to, end
		size := hunkSize(h)
		if size > budget {
			if h, ok := cutHunk(h, budget); ok {
				hunks = append(hunks, h)
			}
			return clean(hunks), true
		}
		budget -= size
		hunks = append(hunks, h)
	}
	return clean(hunks), clipped
}

// parseHunk reads the conflict whose opening marker is lines[open] and
// returns it with the index of its closing marker; ok is false when the
// markers are not git's.
func parseHunk(lines []string, open int) (h Hunk, end int, ok bool) {
	side := &h.Target
	for j := open + 1; j < len(lines); j++ {
		l := lines[j]
		switch {
		case isMarker(l, markBase) && side == &h.Target:
			h.Base, side = []string{}, &h.Base
		case l == markSep && side != &h.Item:
			side = &h.Item
		case isMarker(l, markClose) && side == &h.Item:
			h.Label = strings.TrimSpace(strings.TrimPrefix(l, markClose))
			return h, j, true
		case isMarker(l, markOpen):
			return h, 0, false
		default:
			*side = append(*side, l)
		}
	}
	return h, 0, false
}

func isMarker(l, mark string) bool {
	return l == mark || strings.HasPrefix(l, mark+" ")
}

// nextMarker returns the index of the first opening marker in lines[from:to],
// or -1.
func nextMarker(lines []string, from, to int) int {
	for i := from; i < to; i++ {
		if isMarker(lines[i], markOpen) {
			return i
		}
	}
	return -1
}

// cutHunk keeps what budget allows of a hunk too large for it: no context,
// and each side cut to an equal share. ok is false when not even the
// markers fit.
func cutHunk(h Hunk, budget int) (Hunk, bool) {
	h.Line += len(h.Before)
	h.Before, h.After = nil, nil
	sides := []*[]string{&h.Target, &h.Item}
	if h.Base != nil {
		sides = append(sides, &h.Base)
	}
	left := budget - hunkSize(Hunk{Label: h.Label})
	if h.Base != nil {
		left -= len(markBase) + 1
	}
	if left <= 0 {
		return h, false
	}
	share := left / len(sides)
	for _, s := range sides {
		*s = cutLines(*s, share)
	}
	return h, true
}

// cutLines keeps the lines that fit in n bytes, the last one cut short.
func cutLines(lines []string, n int) []string {
	out := []string{}
	for _, l := range lines {
		if len(l)+1 > n {
			if n > 1 {
				out = append(out, strings.ToValidUTF8(l[:n-1], ""))
			}
			break
		}
		out = append(out, l)
		n -= len(l) + 1
	}
	return out
}

// hunkSize is the bytes a hunk's lines and markers take.
func hunkSize(h Hunk) int {
	n := 3*(len(markOpen)+1) + len(h.Label) + 1
	for _, part := range [][]string{h.Before, h.Target, h.Item, h.After} {
		for _, l := range part {
			n += len(l) + 1
		}
	}
	if h.Base != nil {
		n += len(markBase) + 1
		for _, l := range h.Base {
			n += len(l) + 1
		}
	}
	return n
}

func hunksSize(hs []Hunk) int {
	n := 0
	for _, h := range hs {
		n += hunkSize(h)
	}
	return n
}

// clean copies the hunks' lines out of the file they were read from (so
// that a kept hunk does not hold the whole file), each made valid UTF-8 (a
// prompt is text; a file need not be). An empty side is an empty slice,
// empty context nil.
func clean(hs []Hunk) []Hunk {
	valid := func(lines []string, empty []string) []string {
		if len(lines) == 0 {
			return empty
		}
		out := make([]string, len(lines))
		for i, l := range lines {
			out[i] = strings.Clone(strings.ToValidUTF8(l, "\uFFFD"))
		}
		return out
	}
	for i := range hs {
		h := &hs[i]
		h.Before, h.After = valid(h.Before, nil), valid(h.After, nil)
		h.Target, h.Item = valid(h.Target, []string{}), valid(h.Item, []string{})
		if h.Base != nil {
			h.Base = valid(h.Base, []string{})
		}
		h.Label = strings.Clone(strings.ToValidUTF8(h.Label, "\uFFFD"))
	}
	return hs
}
