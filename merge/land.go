package merge

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/gitexec"
)

// Landing is the last part of a merge: the squash commit exists and passed
// its check; the target is moved onto it, read back, and the repository kept
// tidy.

// land moves the target from tip to commit and returns the checkout it
// updated, if any.
func (m *Manager) land(ctx context.Context, id foreman.ItemID, tip, commit string) (string, error) {
	cos, err := m.checkouts()
	if err != nil {
		return "", err
	}
	if err := m.clearLockFile(filepath.Join(m.commonDir, filepath.FromSlash(m.target)+".lock")); err != nil {
		return "", err
	}
	for _, co := range cos {
		if co.Branch != m.target {
			continue
		}
		// The target is checked out: moving only the ref would leave that
		// checkout showing the merge reversed as local changes. A
		// fast-forward in the checkout moves both, and refuses to overwrite
		// local changes.
		if err := m.checkTargetCheckout(co); err != nil {
			return "", err
		}
		if m.cfg.RequireCleanTarget {
			out, err := m.git.Run(ctx, co.Path, "--no-optional-locks", "status", "--porcelain=v2", "-z")
			if err != nil {
				return "", err
			}
			if _, _, files := parseStatus(out, ""); len(files) > 0 {
				return "", &DirtyError{Path: co.Path, Target: true, Files: files}
			}
		}
		// Auto maintenance is run by maintain, not after every merge.
		// --no-overwrite-ignore: git would otherwise delete or overwrite
		// ignored files in the way (a host's state among them); it refuses
		// instead, and the merge returns *DirtyError.
		_, err := m.git.Run(ctx, co.Path, "-c", "maintenance.auto=false",
			"merge", "-q", "--ff-only", "--no-overwrite-ignore", "--no-verify", commit)
		if err != nil {
			if files := overwrittenFiles(err); len(files) > 0 {
				return "", &DirtyError{Path: co.Path, Target: true, Files: files}
			}
			return "", err
		}
		return co.Path, nil
	}
	_, err = m.git.Run(ctx, m.topDir, "update-ref", "-m", "foreman: merge "+string(id), m.target, commit, tip)
	return "", err
}

// overwrittenFiles extracts the files git refused to overwrite.
func overwrittenFiles(err error) []string {
	var gerr *gitexec.Error
	if !errors.As(err, &gerr) || !refusedOverwrite(gerr.Stderr) {
		return nil
	}
	var files []string
	listing := false
	for _, line := range strings.Split(gerr.Stderr, "\n") {
		switch {
		case refusedOverwrite(line):
			listing = true
		case listing && strings.HasPrefix(line, "\t"):
			files = append(files, strings.TrimSpace(line))
		default:
			listing = false
		}
	}
	if len(files) == 0 {
		files = []string{"(unknown)"}
	}
	return files
}

// refusedOverwrite says whether git's message is its refusal to overwrite
// or remove files in the way of a checkout: local changes, untracked or
// ignored files ("would be overwritten", "would be removed"), or a
// directory holding them ("would lose untracked files").
func refusedOverwrite(msg string) bool {
	return strings.Contains(msg, "would be overwritten") || strings.Contains(msg, "would be removed") ||
		strings.Contains(msg, "would lose untracked files")
}

// verify reads the target back: it must be the squash commit, on top of the
// old tip, carrying the item's trailer.
func (m *Manager) verify(ctx context.Context, id foreman.ItemID, tip, commit string) error {
	got, err := m.resolveRef(ctx, m.target)
	if err != nil {
		return err
	}
	if got != commit {
		return &VerifyError{Target: m.cfg.TargetBranch, Want: commit, Got: got, Reason: "target did not advance to the squash commit"}
	}
	c, err := m.readCommit(ctx, got)
	if err != nil {
		return err
	}
	if len(c.Parents) != 1 || c.Parents[0] != tip {
		return &VerifyError{Target: m.cfg.TargetBranch, Want: tip, Got: strings.Join(c.Parents, ","), Reason: "squash commit is not on the previous tip"}
	}
	if !slices.Contains(trailerValues(c.Message, trailerKey), string(id)) {
		return &VerifyError{Target: m.cfg.TargetBranch, Want: string(id), Got: got, Reason: "tip lacks the item's trailer"}
	}
	return nil
}

// maintainEvery is how many landed merges pass between two runs of git's
// auto maintenance. git merge and git commit run it after every call (a
// process each time); a merge writes only a handful of loose objects, so
// checking once in a while keeps the repository as tidy for less.
const maintainEvery = 32

func (m *Manager) maintain(ctx context.Context) {
	m.merges++
	if m.merges%maintainEvery != 0 {
		return
	}
	if _, err := m.git.Run(ctx, m.topDir, "maintenance", "run", "--auto", "--quiet"); err != nil {
		m.log.Warn("merge: git maintenance failed", "err", err)
	}
}
