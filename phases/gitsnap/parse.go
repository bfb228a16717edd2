package gitsnap

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/agentforeman/foreman/phases"
)

// parseStatus reads `git status --porcelain=v2 -z --branch`.
func parseStatus(out string) (workspaceStatus, error) {
	st := workspaceStatus{untracked: map[string]bool{}}
	tokens := strings.Split(out, "\x00")
	for i := 0; i < len(tokens); i++ {
		tok := tokens[i]
		if tok == "" {
			continue
		}
		switch tok[0] {
		case '#':
			if oid, ok := strings.CutPrefix(tok, "# branch.oid "); ok && oid != "(initial)" {
				st.head = oid
			}
		case '1': // 1 XY sub mH mI mW hH hI path
			f := strings.SplitN(tok, " ", 9)
			if len(f) != 9 {
				return st, fmt.Errorf("gitsnap: unexpected git status entry %q", tok)
			}
			st.dirty = append(st.dirty, f[8])
		case '2': // 2 XY sub mH mI mW hH hI Xscore path, then origPath
			f := strings.SplitN(tok, " ", 10)
			if len(f) != 10 || i+1 >= len(tokens) {
				return st, fmt.Errorf("gitsnap: unexpected git status entry %q", tok)
			}
			i++
			st.dirty = append(st.dirty, f[9], tokens[i])
		case 'u': // u XY sub m1 m2 m3 mW h1 h2 h3 path
			f := strings.SplitN(tok, " ", 11)
			if len(f) != 11 {
				return st, fmt.Errorf("gitsnap: unexpected git status entry %q", tok)
			}
			st.dirty = append(st.dirty, f[10])
		case '?':
			path := strings.TrimPrefix(tok, "? ")
			st.dirty = append(st.dirty, path)
			st.untracked[path] = true
		}
	}
	slices.Sort(st.dirty)
	st.dirty = slices.Compact(st.dirty)
	return st, nil
}

// diffResult is a parsed diff: the changed files, the hash of the change,
// and every path it touches (both sides of a rename).
type diffResult struct {
	files   []phases.FileDiff
	hash    string
	touched map[string]bool
}

// parseDiff reads `git diff -z --raw --numstat --no-abbrev`: every raw entry,
// then one numstat entry per raw entry in the same order. The hash covers
// the raw entries (modes, blob ids, status, paths), which identify the
// change's content exactly.
func parseDiff(out string, untracked map[string]bool) (diffResult, error) {
	tokens := strings.Split(out, "\x00")
	h := sha256.New()
	var files []phases.FileDiff
	touched := map[string]bool{}
	n := 0 // numstat entries seen
	for i := 0; i < len(tokens); i++ {
		tok := tokens[i]
		if tok == "" {
			continue
		}
		if tok[0] == ':' { // :srcMode dstMode srcID dstID STATUS[score]
			f := strings.Fields(tok[1:])
			if len(f) != 5 || i+1 >= len(tokens) {
				return diffResult{}, fmt.Errorf("gitsnap: unexpected git diff entry %q", tok)
			}
			status := f[4][:1]
			src := tokens[i+1]
			dst := src
			i++
			if status == "R" || status == "C" {
				if i+1 >= len(tokens) {
					return diffResult{}, fmt.Errorf("gitsnap: unexpected git diff entry %q", tok)
				}
				dst = tokens[i+1]
				i++
			}
			fmt.Fprintf(h, "%s %s %s %s %s\x00%s\x00%s\x00", f[0], f[1], f[2], f[3], status, src, dst)
			touched[src], touched[dst] = true, true
			files = append(files, phases.FileDiff{Path: dst, Status: fileStatus(status, dst, untracked)})
			continue
		}
		// numstat: "ins\tdel\tpath", or "ins\tdel\t" then src and dst for a rename.
		f := strings.SplitN(tok, "\t", 3)
		if len(f) != 3 || n >= len(files) {
			return diffResult{}, fmt.Errorf("gitsnap: unexpected git diff numstat %q", tok)
		}
		if f[2] == "" {
			i += 2
		}
		ins, textIns := atoiStat(f[0])
		del, textDel := atoiStat(f[1])
		files[n].Insertions, files[n].Deletions = ins, del
		files[n].Binary = !textIns && !textDel
		n++
	}
	if n != len(files) {
		return diffResult{}, fmt.Errorf("gitsnap: git diff gave %d raw entries but %d numstat entries", len(files), n)
	}
	return diffResult{files: files, hash: hex.EncodeToString(h.Sum(nil)), touched: touched}, nil
}

func fileStatus(raw, path string, untracked map[string]bool) string {
	switch raw {
	case "A":
		if untracked[path] {
			return "?"
		}
		return "A"
	case "D", "R":
		return raw
	case "C":
		return "A"
	default: // M, T (type change), U
		return "M"
	}
}
