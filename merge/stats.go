package merge

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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

// DiffStat measures the item's branch against its base: the commits it
// carries, not uncommitted changes. It works before and after the merge, and
// after the worktree is gone as long as the branch is kept.
func (m *Manager) DiffStat(ctx context.Context, id foreman.ItemID) (DiffStat, error) {
	path, err := m.Path(id)
	if err != nil {
		return DiffStat{}, err
	}
	branch := m.cfg.BranchPrefix + "/" + string(id)
	head, err := m.resolveRef(ctx, "refs/heads/"+branch)
	if err != nil {
		return DiffStat{}, err
	}
	if head == "" {
		return DiffStat{}, fmt.Errorf("%w: %s", ErrNoBranch, branch)
	}
	admin := ""
	if data, err := os.ReadFile(filepath.Join(path, ".git")); err == nil {
		admin = strings.TrimPrefix(strings.TrimSpace(string(data)), "gitdir: ")
	}
	base, err := m.baseOf(ctx, admin, branch)
	if err != nil {
		return DiffStat{}, err
	}
	lines, err := m.git.Lines(ctx, m.topDir, "diff", "--numstat", "--no-renames", base, head)
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
