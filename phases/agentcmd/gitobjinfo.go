package agentcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Besides objects, git itself writes into an object directory: in info/,
// a commit-graph or a chain of them in commit-graphs/ (git gc, git
// maintenance, git commit-graph write) and packs (git repack's
// update-server-info); in pack/, packs with their index, reverse index,
// bitmap, keep, promisor and mtimes files (git maintenance's loose-objects
// task names its packs loose-<id>), and a multi-pack-index (its
// incremental-repack); a git stopped midway leaves
// temporary files and locks. It never writes info/alternates (the shadow's
// is makeObjects'). What else the agent writes there changes nothing real
// (its object directory is thrown away; only checked objects and packs
// are carried back), but it is the agent's doing, not git's: an agent
// pointing its alternates elsewhere, or leaving a commit-graph git would
// not write, is reported like a write into the rest of its copy.

var (
	// packDirName is a name git writes in objects/pack.
	packDirName = regexp.MustCompile(`^((pack|loose)-([0-9a-f]{40}|[0-9a-f]{64})\.(pack|idx|rev|bitmap|keep|promisor|mtimes)|` +
		`multi-pack-index(-([0-9a-f]{40}|[0-9a-f]{64})\.(bitmap|rev))?)$`)
	// graphChainName is a name git writes in objects/info/commit-graphs.
	graphChainName = regexp.MustCompile(`^(graph-([0-9a-f]{40}|[0-9a-f]{64})\.graph|commit-graph-chain)$`)
	// packsLine is a line of objects/info/packs as git writes it.
	packsLine = regexp.MustCompile(`^(P pack-([0-9a-f]{40}|[0-9a-f]{64})\.pack)?$`)
	// fanOutName is a loose objects' directory.
	fanOutName = regexp.MustCompile(`^[0-9a-f]{2}$`)
)

// objectCheckTimeout bounds the host's git verifying what the agent left
// (a commit-graph, a multi-pack-index).
const objectCheckTimeout = time.Minute

// gitTemporary reports whether name in an object directory is a temporary
// file or lock of git's (left by a git stopped midway).
func gitTemporary(name string) bool {
	return strings.HasSuffix(name, ".lock") || strings.HasPrefix(name, "tmp_") || strings.HasPrefix(name, ".tmp-") ||
		strings.HasPrefix(name, "incoming-")
}

// objectInfoNotes says what the agent wrote into its object directory
// beyond objects and what git writes there: its alternates changed, a
// commit-graph or multi-pack-index the host's git does not verify, an
// info/packs not in git's format, any other name.
func (g *gitShadow) objectInfoNotes(ctx context.Context) []string {
	root := filepath.Join(g.dir, objectsDir)
	var notes, odd []string
	altered := false
	if data, err := readRegular(filepath.Join(root, "info", "alternates"), 4096); err != nil || string(data) != g.borrowed() {
		altered = true
		did := "removed its object directory's alternates"
		switch {
		case err == nil:
			did = "rewrote its object directory's alternates (now " + strconv.Quote(truncate(strings.TrimSpace(string(data)), 120)) + ")"
		case !errors.Is(err, fs.ErrNotExist):
			did = "made its object directory's alternates " + err.Error()
		}
		notes = append(notes, "the agent "+did+", which git never does: its own copy's, nothing real changed")
	}
	var graph, midx bool
	top, _ := os.ReadDir(root)
	for _, e := range top {
		name := e.Name()
		switch {
		case e.IsDir() && fanOutName.MatchString(name), gitTemporary(name):
			// Loose objects (migrateObjects), git's temporary files.
		case name == "info" && e.IsDir():
			infos, _ := os.ReadDir(filepath.Join(root, name))
			for _, f := range infos {
				n := f.Name()
				switch {
				case n == "alternates", gitTemporary(n):
				case n == "packs" && f.Type().IsRegular():
					if bad := badPacksFile(filepath.Join(root, name, n)); bad != "" {
						odd = append(odd, "info/packs ("+bad+")")
					}
				case n == "commit-graph" && f.Type().IsRegular():
					graph = true
				case n == "commit-graphs" && f.IsDir():
					graph = true
					odd = append(odd, oddNames(filepath.Join(root, name, n), "info/commit-graphs/", graphChainName)...)
				default:
					odd = append(odd, "info/"+n)
				}
			}
		case name == "pack" && e.IsDir():
			odd = append(odd, oddNames(filepath.Join(root, name), "pack/", packDirName)...)
			_, err := os.Lstat(filepath.Join(root, name, "multi-pack-index"))
			midx = err == nil
		default:
			odd = append(odd, name)
		}
	}
	// (Verified only where the alternates are the shadow's: the host's git
	// reads them.)
	for _, v := range []struct {
		there bool
		what  string
	}{{graph, "commit-graph"}, {midx, "multi-pack-index"}} {
		if !v.there || altered || len(odd) > 0 && hasOddIn(odd, v.what) {
			continue
		}
		if err := g.verifyObjects(ctx, v.what); err != nil {
			notes = append(notes, fmt.Sprintf("the agent left a %s in its object directory that git does not verify (%v): "+
				"its own copy's, nothing real changed", v.what, err))
		}
	}
	if len(odd) > 0 {
		var quoted []string
		for i, o := range odd {
			if i == maxDecoyPaths {
				quoted = append(quoted, fmt.Sprintf("and %d more", len(odd)-i))
				break
			}
			quoted = append(quoted, strconv.Quote(truncate(o, 80)))
		}
		notes = append(notes, fmt.Sprintf("wrote %s into its object directory (%s), which git does not write there: its own copy's, nothing real changed",
			strings.Join(quoted, ", "), filepath.Join(g.real, objectsDir)))
	}
	return notes
}

// hasOddIn reports whether one of odd is in what's place (a commit-graph
// chain's directory, the pack directory): not given to the host's git.
func hasOddIn(odd []string, what string) bool {
	prefix := "pack/"
	if what == "commit-graph" {
		prefix = "info/commit-graphs/"
	}
	for _, o := range odd {
		if strings.HasPrefix(o, prefix) {
			return true
		}
	}
	return false
}

// oddNames are the names in dir (shown under prefix) that are neither
// regular files named as want says nor git's temporary files.
func oddNames(dir, prefix string, want *regexp.Regexp) []string {
	var odd []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if n := e.Name(); !gitTemporary(n) && !(e.Type().IsRegular() && want.MatchString(n)) {
			odd = append(odd, prefix+n)
		}
	}
	return odd
}

// badPacksFile says what in objects/info/packs file p is not as git
// writes it; empty when all is.
func badPacksFile(p string) string {
	data, err := readRegular(p, 1<<20)
	if err != nil {
		return err.Error()
	}
	for line := range strings.Lines(string(data)) {
		if line = strings.TrimSuffix(line, "\n"); !packsLine.MatchString(line) {
			return "the line " + strconv.Quote(truncate(line, 80))
		}
	}
	return ""
}

// verifyObjects runs the host's git's verify of what (commit-graph or
// multi-pack-index) on the shadow's object directory, which borrows the
// real one.
func (g *gitShadow) verifyObjects(ctx context.Context, what string) error {
	ctx, cancel := context.WithTimeout(ctx, objectCheckTimeout)
	defer cancel()
	root := filepath.Join(g.dir, objectsDir)
	cmd := exec.CommandContext(ctx, "git", "--git-dir="+g.real, what, "verify", "--object-dir="+root)
	// The shadow's alternates name the real store as the agent sees it,
	// which is not there on the host: the real store is given here.
	cmd.Env = append(hostGitEnv(), "GIT_OBJECT_DIRECTORY="+root, "GIT_ALTERNATE_OBJECT_DIRECTORIES="+filepath.Join(g.real, objectsDir))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		var said []string
		for line := range strings.Lines(stderr.String()) {
			if line = strings.TrimSpace(line); line != "" && !strings.Contains(line, "alternate object path") {
				said = append(said, line)
			}
		}
		return fmt.Errorf("git %s verify: %w: %s", what, err, truncate(strings.Join(said, "; "), 200))
	}
	return nil
}

// readRegular reads at most n bytes of p, a regular file (not followed if
// a link: one to a pipe would hold the driver).
func readRegular(p string, n int64) ([]byte, error) {
	info, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("no file but %s", info.Mode().Type())
	}
	return readSmall(p, n)
}
