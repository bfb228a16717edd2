package merge

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentforeman/foreman"
)

// DiffStat is the size of an item's change, for reports.
type DiffStat struct {
	Files      int
	Insertions int
	Deletions  int // binary files count as files only
}

func (d DiffStat) String() string {
	return fmt.Sprintf("%d files changed, +%d/-%d", d.Files, d.Insertions, d.Deletions)
}

// DiffStat measures the item's branch against the point where it last met
// the target (its base, or the target's tip when Request.Sync brought it up
// to date): the commits it carries, not uncommitted changes. It works before
// and after the merge, and after the worktree is gone while the branch is kept.
func (m *Manager) DiffStat(ctx context.Context, id foreman.ItemID) (DiffStat, error) {
	branch, err := m.Branch(id)
	if err != nil {
		return DiffStat{}, err
	}
	head, err := m.resolveRef(ctx, "refs/heads/"+branch)
	if err != nil {
		return DiffStat{}, err
	}
	if head == "" {
		return DiffStat{}, fmt.Errorf("%w: %s", ErrNoBranch, branch)
	}
	lines, err := m.git.Lines(ctx, m.topDir, "diff", "--numstat", "--no-renames", m.target+"..."+head)
	if err != nil {
		return DiffStat{}, err
	}
	return parseNumstat(lines), nil
}

func parseNumstat(lines []string) DiffStat {
	var d DiffStat
	for _, l := range lines {
		f := strings.SplitN(l, "\t", 3)
		if len(f) != 3 {
			continue
		}
		d.Files++
		ins, _ := strconv.Atoi(f[0]) // "-" for binary files
		del, _ := strconv.Atoi(f[1])
		d.Insertions += ins
		d.Deletions += del
	}
	return d
}
