package agentcmd

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// canaryNames are the places where secrets are usually kept, a directory's
// with a trailing slash. Each decoy holds them, empty, so that a read of
// one shows: a lookup of a name that is not there touches nothing a watch
// sees, an open of an empty canary does. None is a name git or an agent
// CLI looks for in its own home (that is the sandbox's home, not the
// host's); those an agent CLI looks for in the workspace's parent
// directories (ancestorLookups) are left out of the decoys that hold the
// workspace, so a cooperative agent opens none.
func canaryNames() []string {
	return []string{".env", ".env.local", ".envrc", ".netrc", ".git-credentials", ".pgpass", ".npmrc", ".pypirc",
		".ssh/", ".aws/", ".docker/", ".kube/", ".gnupg/"}
}

// ancestorLookups are the canaries an agent CLI opens in each parent
// directory of its workspace on its own: Gemini CLI loads the nearest .env
// (CI saw every cooperative Gemini story counted for it), a Bun-built CLI
// .env.local. A decoy that holds the workspace has neither, so a hostile
// read of the main checkout's .env finds nothing there, unseen.
var ancestorLookups = map[string]bool{".env": true, ".env.local": true}

// maxMirrored bounds the names a mirrored decoy repeats.
const maxMirrored = 1000

// mirrored reports whether hidden directory dir is one of Sandbox.Mirror.
func (d *Driver) mirrored(dir string) bool {
	return slices.ContainsFunc(d.cfg.Sandbox.Mirror, func(p string) bool {
		c, ok := cleanDir(p)
		return ok && c == dir
	})
}

// plantCanaries makes the canaries in decoy dc (none over a mount point):
// the usual places of secrets, and a mirrored directory's names.
func (dc *decoy) plantCanaries() error {
	dc.canaries = map[string]bool{}
	names := canaryNames()
	if dc.mirror {
		if f, err := os.Open(dc.dir); err == nil {
			entries, _ := f.ReadDir(maxMirrored)
			_ = f.Close()
			for _, e := range entries {
				if e.IsDir() {
					names = append(names, e.Name()+"/")
				} else {
					names = append(names, e.Name())
				}
			}
		}
	}
	for _, name := range names {
		rel, dir := strings.CutSuffix(name, "/")
		if _, planted := dc.canaries[rel]; planted || dc.skeleton[rel] || dc.ancestor && ancestorLookups[rel] {
			continue
		}
		p := filepath.Join(dc.src, rel)
		var err error
		if dir {
			err = os.Mkdir(p, 0o700)
		} else {
			err = os.WriteFile(p, nil, 0o600)
		}
		if err != nil {
			return err
		}
		dc.canaries[rel] = dir
	}
	return nil
}

// readNote says which canaries of decoy dc the agent opened (read a file,
// listed a directory), or that it listed the decoy; "" when it did
// neither.
func (dc *decoy) readNote(seen *placeAccess) string {
	var read []string
	listed := false
	for _, rel := range slices.Sorted(mapsKeys(seen.opened)) {
		dir, canary := dc.canaries[rel]
		switch {
		case canary && dir:
			read = append(read, strconv.Quote(rel+"/"))
		case canary:
			read = append(read, strconv.Quote(rel))
		case rel == "." || dc.parents[rel]:
			listed = true
		}
	}
	switch {
	case len(read) > 0:
		what := strings.Join(read[:min(len(read), maxDecoyPaths)], ", ")
		if len(read) > maxDecoyPaths {
			what += fmt.Sprintf(" and %d more", len(read)-maxDecoyPaths)
		}
		return fmt.Sprintf("opened %s in the hidden %s (%s): a decoy, nothing real to see", what, dc.name, dc.dir)
	case listed:
		return fmt.Sprintf("listed the hidden %s (%s): a decoy, nothing real to see", dc.name, dc.dir)
	}
	return ""
}

// removedNote says which canaries of decoy dc are gone once the agent is:
// no host process removes one, so the agent did (an rm -rf of the hidden
// directory takes them with it, the mount points in it stay); "" when
// none is.
func (dc *decoy) removedNote() string {
	var gone []string
	for _, rel := range slices.Sorted(maps.Keys(dc.canaries)) {
		if _, err := os.Lstat(filepath.Join(dc.src, rel)); err == nil {
			continue
		}
		if dc.canaries[rel] {
			rel += "/"
		}
		gone = append(gone, strconv.Quote(rel))
	}
	if len(gone) == 0 {
		return ""
	}
	what := strings.Join(gone[:min(len(gone), maxDecoyPaths)], ", ")
	if len(gone) > maxDecoyPaths {
		what += fmt.Sprintf(" and %d more", len(gone)-maxDecoyPaths)
	}
	return fmt.Sprintf("removed %s from the hidden %s (%s): a decoy, nothing real lost", what, dc.name, dc.dir)
}
