package merge

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Exclude keeps dir out of `git status` in every worktree of the
// repository, through the pattern "/<dir relative to the main worktree>/"
// in the repository's info/exclude (added once, with a comment saying
// Foreman added it). A dir outside the main worktree, or the worktree
// itself, is left alone. A host keeping its own state in the working tree
// (a team's database, say) calls it so that nobody commits that state by
// `git add -A`; Config.Root is excluded without asking.
func (m *Manager) Exclude(dir string) error {
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(m.mainDir, dir)
	}
	return m.exclude(filepath.Clean(dir), "Foreman")
}

// ensureExcluded keeps Root out of `git status` of the main worktree: a
// linked worktree inside it would otherwise show as an untracked directory.
func (m *Manager) ensureExcluded() error {
	return m.exclude(m.root, "Foreman item worktrees")
}

// exclude adds dir's pattern to info/exclude, under the comment "# why",
// unless the file has it already.
func (m *Manager) exclude(dir, why string) error {
	rel, inside := within(m.mainDir, dir)
	if main, err := filepath.EvalSymlinks(m.mainDir); !inside && err == nil {
		rel, inside = within(main, realPath(dir)) // dir names the worktree by another of its names
	}
	if !inside || rel == "." {
		return nil
	}
	pattern := "/" + filepath.ToSlash(rel) + "/"
	path := filepath.Join(m.commonDir, "info", "exclude")
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("merge: %w", err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.TrimSpace(line) == pattern {
			return nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	prefix := ""
	if len(data) > 0 && !strings.HasSuffix(string(data), "\n") {
		prefix = "\n"
	}
	_, err = fmt.Fprintf(f, "%s# %s\n%s\n", prefix, why, pattern)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	return nil
}
