package merge

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/atomicfile"
	"github.com/agentforeman/foreman/internal/clock"
)

// Worktree is an item's working tree.
type Worktree struct {
	ID     foreman.ItemID
	Path   string // absolute
	Branch string // short name, <prefix>/<id>
	// Base is the commit the worktree's branch started from: the base branch's
	// tip when Create made the branch, or its merge-base with the base branch
	// when Create found the branch already there.
	Base string
}

// Create returns the worktree of id, making it if needed: <Root>/<id> on a
// new branch <prefix>/<id> from the base branch (or on that branch if it
// already exists). A healthy existing worktree is returned as is; a stale
// directory or registration (a crash in the middle of `git worktree add`, a
// directory deleted by hand) is repaired: removed and made again.
func (m *Manager) Create(ctx context.Context, id foreman.ItemID) (Worktree, error) {
	path, err := m.Path(id)
	if err != nil {
		return Worktree{}, err
	}
	var wt Worktree
	err = m.withLock(ctx, func() error {
		var err error
		wt, err = m.createLocked(ctx, id, path)
		return err
	})
	return wt, err
}

func (m *Manager) createLocked(ctx context.Context, id foreman.ItemID, path string) (Worktree, error) {
	branch := m.cfg.BranchPrefix + "/" + string(id)
	wt := Worktree{ID: id, Path: path, Branch: branch}
	admin, healthy := inspectWorktree(path)
	if healthy {
		base, err := m.baseOf(ctx, admin, branch)
		wt.Base = base
		return wt, err
	}
	if err := m.clearStale(path, admin); err != nil {
		return wt, err
	}
	if err := m.ensureExcluded(); err != nil {
		return wt, err
	}
	if err := os.MkdirAll(m.root, 0o755); err != nil {
		return wt, fmt.Errorf("merge: %w", err)
	}
	existing, _, err := readRefFile(m.commonDir, "refs/heads/"+branch)
	if err != nil {
		return wt, fmt.Errorf("merge: %w", err)
	}
	args := []string{"worktree", "add", "-q", "-b", branch, path, m.cfg.BaseBranch}
	if existing != "" {
		args = []string{"worktree", "add", "-q", path, branch}
	}
	if _, err := m.git.Run(ctx, m.topDir, args...); err != nil {
		if ctx.Err() != nil {
			return wt, err
		}
		// A registration under another name, or one git itself left half
		// made: prune, clear and try once more.
		m.log.Warn("merge: worktree add failed; pruning and retrying", "item", id, "err", err)
		if _, perr := m.git.Run(ctx, m.topDir, "worktree", "prune"); perr != nil {
			return wt, perr
		}
		admin, _ := inspectWorktree(path)
		if cerr := m.clearStale(path, admin); cerr != nil {
			return wt, cerr
		}
		// The failed add may have made the branch before it failed.
		if existing, err = m.resolveRef(ctx, "refs/heads/"+branch); err != nil {
			return wt, err
		}
		if existing != "" {
			args = []string{"worktree", "add", "-q", path, branch}
		}
		if _, err := m.git.Run(ctx, m.topDir, args...); err != nil {
			return wt, err
		}
	}
	admin, healthy = inspectWorktree(path)
	if !healthy {
		return wt, fmt.Errorf("merge: worktree %s is not usable after git worktree add", path)
	}
	if existing == "" {
		// The new branch points at exactly the base it was made from.
		base, _, err := readRefFile(m.commonDir, "refs/heads/"+branch)
		if err != nil || base == "" {
			base, err = m.resolveRef(ctx, "refs/heads/"+branch)
			if err != nil {
				return wt, err
			}
		}
		wt.Base = base
		if err := atomicfile.WriteFile(filepath.Join(admin, baseFileName), []byte(base+"\n"), 0o644); err != nil {
			return wt, err
		}
		return wt, nil
	}
	base, err := m.baseOf(ctx, admin, branch)
	wt.Base = base
	return wt, err
}

// inspectWorktree follows path/.git to the worktree's administrative
// directory and reports whether the two point at each other and git finished
// making it (no "initializing" lock, an index present).
func inspectWorktree(path string) (admin string, healthy bool) {
	data, err := os.ReadFile(filepath.Join(path, ".git"))
	if err != nil {
		return "", false
	}
	admin, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir: ")
	if !ok || !filepath.IsAbs(admin) {
		return "", false
	}
	back, err := os.ReadFile(filepath.Join(admin, "gitdir"))
	if err != nil || filepath.Clean(strings.TrimSpace(string(back))) != filepath.Join(path, ".git") {
		return admin, false
	}
	if lock, err := os.ReadFile(filepath.Join(admin, "locked")); err == nil && strings.TrimSpace(string(lock)) == "initializing" {
		return admin, false
	}
	for _, f := range []string{"HEAD", "index"} {
		if _, err := os.Stat(filepath.Join(admin, f)); err != nil {
			return admin, false
		}
	}
	return admin, true
}

// clearStale removes what is left of a broken worktree at path: its
// directory and every registration that points at it. It is what
// `git worktree prune` and `remove --force` do, restricted to one path.
func (m *Manager) clearStale(path, admin string) error {
	return m.removeWorktreeFiles(path, admin, true)
}

// removeWorktreeFiles removes a worktree's directory and its
// registrations; stale says it is a repair, which is worth a warning (a
// plain removal is not).
func (m *Manager) removeWorktreeFiles(path, admin string, stale bool) error {
	admins := m.registrationsFor(path)
	if admin != "" && strings.HasPrefix(admin, filepath.Join(m.commonDir, "worktrees")+string(filepath.Separator)) &&
		!slices.Contains(admins, admin) {
		admins = append(admins, admin)
	}
	_, statErr := os.Lstat(path)
	if len(admins) == 0 && errors.Is(statErr, fs.ErrNotExist) {
		return nil
	}
	if stale {
		m.log.Warn("merge: repairing stale worktree", "path", path, "registrations", admins)
	} else {
		m.log.Debug("merge: removing worktree", "path", path, "registrations", admins)
	}
	// A repair can race with the git that made the worktree: a host
	// SIGKILLed during `git worktree add` leaves that git (in a process
	// group of its own) running on, writing into the directories being
	// removed ("directory not empty"). It ends within moments, so a few
	// more tries finish the job.
	var err error
	for try := 0; ; try++ {
		if err = removeWorktreeDirs(path, admins); err == nil || !stale || try == staleRemoveTries {
			return err
		}
		if try == 0 {
			m.log.Warn("merge: stale worktree still being written (a git of a killed process?); trying again", "path", path, "err", err)
		}
		_ = clock.Sleep(context.Background(), m.clk, staleRemovePause)
	}
}

// A stale worktree's removal is tried again staleRemoveTries times, staleRemovePause apart.
const (
	staleRemoveTries = 40
	staleRemovePause = 50 * time.Millisecond
)

// removeWorktreeDirs removes a worktree's directory and its registrations.
func removeWorktreeDirs(path string, admins []string) error {
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("merge: remove stale worktree: %w", err)
	}
	for _, a := range admins {
		if err := os.RemoveAll(a); err != nil {
			return fmt.Errorf("merge: remove stale registration: %w", err)
		}
	}
	return nil
}

// registrationsFor returns the administrative directories whose gitdir file
// points at path. It looks at the usual name first, then at all of them.
func (m *Manager) registrationsFor(path string) []string {
	want := filepath.Join(path, ".git")
	dir := filepath.Join(m.commonDir, "worktrees")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		a := filepath.Join(dir, e.Name())
		back, err := os.ReadFile(filepath.Join(a, "gitdir"))
		if err == nil && filepath.Clean(strings.TrimSpace(string(back))) == want {
			out = append(out, a)
		}
	}
	return out
}

// baseOf reads the recorded base of a worktree, or computes it as the
// merge-base of the item's branch and the base branch.
func (m *Manager) baseOf(ctx context.Context, admin, branch string) (string, error) {
	if admin != "" {
		if data, err := os.ReadFile(filepath.Join(admin, baseFileName)); err == nil {
			if b := strings.TrimSpace(string(data)); isHash(b) {
				return b, nil
			}
		}
	}
	out, err := m.git.Run(ctx, m.topDir, "merge-base", "refs/heads/"+m.cfg.BaseBranch, "refs/heads/"+branch)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// Remove deletes the worktree of id. A missing worktree is not an error.
// The branch is deleted too when Config.DeleteBranchOnRemove is set, unless
// it is checked out in some other worktree.
func (m *Manager) Remove(ctx context.Context, id foreman.ItemID) error {
	path, err := m.Path(id)
	if err != nil {
		return err
	}
	return m.withLock(ctx, func() error { return m.removeLocked(ctx, id, path) })
}

func (m *Manager) removeLocked(ctx context.Context, id foreman.ItemID, path string) error {
	admin, _ := inspectWorktree(path)
	// Removing the directory and its registration directly is what
	// `git worktree remove --force` does, without the process.
	if err := m.removeWorktreeFiles(path, admin, false); err != nil {
		return err
	}
	if !m.cfg.DeleteBranchOnRemove {
		return nil
	}
	ref := "refs/heads/" + m.cfg.BranchPrefix + "/" + string(id)
	if h, _, err := readRefFile(m.commonDir, ref); err == nil && h == "" {
		if h, err = m.resolveRef(ctx, ref); err != nil || h == "" {
			return err // already gone
		}
	}
	cos, err := m.checkouts()
	if err != nil {
		return err
	}
	for _, co := range cos {
		if co.Branch == ref {
			m.log.Warn("merge: keeping branch checked out elsewhere", "item", id, "checkout", co.Path)
			return nil
		}
	}
	_, err = m.git.Run(ctx, m.topDir, "branch", "-q", "-D", m.cfg.BranchPrefix+"/"+string(id))
	return err
}

// List returns the item worktrees registered under Root, sorted by id. It
// reads git's worktree registry directly and runs no git command.
func (m *Manager) List(ctx context.Context) ([]Worktree, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cos, err := m.checkouts()
	if err != nil {
		return nil, err
	}
	var out []Worktree
	for _, co := range cos {
		if filepath.Dir(co.Path) != m.root {
			continue
		}
		id := foreman.ItemID(filepath.Base(co.Path))
		if id.Validate() != nil {
			continue
		}
		wt := Worktree{ID: id, Path: co.Path, Branch: strings.TrimPrefix(co.Branch, "refs/heads/")}
		if data, err := os.ReadFile(filepath.Join(co.GitDir, baseFileName)); err == nil {
			wt.Base = strings.TrimSpace(string(data))
		}
		out = append(out, wt)
	}
	slices.SortFunc(out, func(a, b Worktree) int { return strings.Compare(string(a.ID), string(b.ID)) })
	return out, nil
}

// Prune removes every worktree under Root whose item keep rejects, leftovers
// of interrupted post-merge checks, and registrations whose directory is
// gone. It returns the items whose worktrees it removed, sorted.
func (m *Manager) Prune(ctx context.Context, keep func(foreman.ItemID) bool) ([]foreman.ItemID, error) {
	var removed []foreman.ItemID
	err := m.withLock(ctx, func() error {
		if _, err := m.git.Run(ctx, m.topDir, "worktree", "prune"); err != nil {
			return err
		}
		entries, err := os.ReadDir(m.root)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			path := filepath.Join(m.root, e.Name())
			if strings.HasPrefix(e.Name(), checkPrefix) {
				admin, _ := inspectWorktree(path)
				if err := m.clearStale(path, admin); err != nil {
					return err
				}
				continue
			}
			id := foreman.ItemID(e.Name())
			if id.Validate() != nil || (keep != nil && keep(id)) {
				continue
			}
			if err := m.removeLocked(ctx, id, path); err != nil {
				return err
			}
			removed = append(removed, id)
		}
		return nil
	})
	return removed, err
}
