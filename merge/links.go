package merge

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/gitexec"
)

// ErrLinkOutside is matched by *LinkOutsideError.
var ErrLinkOutside = errors.New("merge: a change adds a symbolic link that points outside the repository")

// LinkOutsideError is a merge's refusal of a squash that adds or changes a
// symbolic link pointing outside the repository: an absolute target, or a
// relative one that climbs above the repository's root. Whatever reads the
// link (a gate, a person, another story's agent) reads what it points at:
// a story whose body comes from a stranger could point one at a host's
// secret. Nothing was merged.
type LinkOutsideError struct {
	Item foreman.ItemID
	// Links are "path -> target" (at most 20).
	Links []string
}

func (e *LinkOutsideError) Error() string {
	return fmt.Sprintf("merge: refused to merge %s: it adds symbolic links that point outside the repository (%s): whatever reads them reads "+
		"what they point at; nothing was merged", e.Item, strings.Join(e.Links, ", "))
}

// Is makes a LinkOutsideError match ErrLinkOutside.
func (e *LinkOutsideError) Is(target error) bool { return target == ErrLinkOutside }

// maxLinkTarget bounds the link target read; a longer one is refused.
const maxLinkTarget = 4096

// refuseLinksOutside returns a *LinkOutsideError when tree adds or changes,
// against base, a symbolic link that points outside the repository.
func (m *Manager) refuseLinksOutside(ctx context.Context, id foreman.ItemID, base, tree string) error {
	out, err := m.git.RunCmd(ctx, gitexec.Cmd{Dir: m.topDir, Args: []string{"diff-tree", "-r", "-z", "--no-renames", base, tree}})
	if err != nil {
		return err
	}
	var links []string
	// -z --raw: ":<old mode> <new mode> <old> <new> <status>\x00<path>\x00".
	fields := strings.Split(out, "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		meta := strings.Fields(strings.TrimPrefix(fields[i], ":"))
		if len(meta) < 5 || meta[1] != "120000" {
			continue
		}
		name := fields[i+1]
		target, err := m.git.RunCmd(ctx, gitexec.Cmd{Dir: m.topDir, Args: []string{"cat-file", "blob", meta[3]}})
		if err != nil {
			return err
		}
		if linkOutside(name, target) {
			if len(links) < 20 {
				links = append(links, fmt.Sprintf("%s -> %s", name, clipTarget(target)))
			}
		}
	}
	if len(links) == 0 {
		return nil
	}
	m.log.Warn("merge: refusing a symbolic link that points outside the repository", "item", id, "links", links)
	return &LinkOutsideError{Item: id, Links: links}
}

// linkOutside reports whether a link at repository path name with target
// points outside the repository.
func linkOutside(name, target string) bool {
	if target == "" || len(target) > maxLinkTarget || strings.ContainsRune(target, 0) || path.IsAbs(target) {
		return true
	}
	resolved := path.Clean(path.Join(path.Dir(name), target))
	return resolved == ".." || strings.HasPrefix(resolved, "../")
}

func clipTarget(t string) string {
	if len(t) > 80 {
		return t[:80] + "..."
	}
	return t
}
