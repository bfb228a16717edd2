package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/pipeline/store"
)

// openRepository opens the team's merge.Manager of cfg.Repo with mc (the
// team's cfg.Merge, Repo set), the state directory protected along with the
// worktree root, so that no story's commit can delete or overwrite the
// team's state (see merge.Config.Protected). It runs before the state
// directory is made: a state directory or worktree root that is a symbolic
// link, is reached through one, or is tracked by git is a *ConfigError
// (matching merge.ErrUnsafeDir) naming the field, and nothing is written
// through it.
func openRepository(ctx context.Context, cfg Config, mc merge.Config) (*merge.Manager, merge.Config, error) {
	mc.Repo = cfg.Repo
	stateDir, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, mc, &ConfigError{Field: "StateDir", Reason: err.Error(), Err: err}
	}
	mc.Protected = append(slices.Clone(cfg.Merge.Protected), stateDir)
	mgr, err := merge.New(ctx, mc)
	var unsafe *merge.UnsafeDirError
	switch {
	case errors.Is(err, merge.ErrUnknownBranch):
		return nil, mc, &ConfigError{Field: "Merge.TargetBranch", Err: err, Reason: err.Error() +
			"; a repository with no commit yet needs one first, and one whose branch is not main names it in Config.Merge.TargetBranch (and BaseBranch)"}
	case errors.As(err, &unsafe):
		field, what := "Merge.Root", "the story worktrees' root"
		if unsafe.Dir == stateDir {
			field, what = "StateDir", "the team's state directory"
		} else if !isRoot(cfg, unsafe.Dir) {
			field, what = "Merge.Protected", "a protected directory"
		}
		return nil, mc, &ConfigError{Field: field, Err: err, Reason: fmt.Sprintf(
			"%s %s %s: it must be a plain directory that git does not track (or lie outside the repository), so that no commit can delete or redirect what the team writes there",
			what, unsafe.Dir, strings.TrimPrefix(unsafe.Error(), "merge: protected directory "+unsafe.Dir+" "))}
	case err != nil:
		return nil, mc, err
	}
	return mgr, mc, nil
}

// isRoot says whether dir is the story worktrees' root cfg names.
func isRoot(cfg Config, dir string) bool {
	root := cfg.Merge.Root
	if root == "" {
		root = ".worktrees"
	}
	if !filepath.IsAbs(root) {
		root = filepath.Join(cfg.Repo, root)
	}
	return filepath.Clean(root) == dir
}

// kindRepository is the record that binds a store to the repository its
// plan is for (one record, id repositoryID).
const (
	kindRepository = "team.repository"
	repositoryID   = "target"
)

// repositoryRecord identifies a repository by the first commit of its
// target branch: it stays the same however far the branch moves, in every
// clone, and differs between repositories.
type repositoryRecord struct {
	Root   string `json:"root"`
	Target string `json:"target"`
}

// ErrOtherRepository is matched by *OtherRepositoryError.
var ErrOtherRepository = errors.New("team: the store belongs to another repository")

// OtherRepositoryError is New's error for a store whose plan is another
// repository's: its stories' merges are not in this one, and going on
// would report them merged. Give each repository a store of its own
// (another SQLite file, another PostgreSQL schema).
type OtherRepositoryError struct {
	// Repo and Target are this team's repository and target branch; Root
	// is the first commit of that branch, Recorded the one the store has.
	Repo, Target   string
	Root, Recorded string
}

func (e *OtherRepositoryError) Error() string {
	return fmt.Sprintf("team: the store's plan is for another repository: its %s starts at commit %s, %s's starts at %s; give each repository a store of its own (another SQLite file, another PostgreSQL schema)",
		e.Target, e.Recorded, e.Repo, e.Root)
}

// Is matches ErrOtherRepository.
func (e *OtherRepositoryError) Is(target error) bool { return target == ErrOtherRepository }

// bindRepository records the repository in a new store and, in one that
// has a plan already, checks that it is the same repository.
func (t *Team) bindRepository(ctx context.Context) error {
	g := gitexec.Runner{Git: t.cfg.Merge.Git, Env: t.cfg.Merge.GitEnv}
	target := t.mgr.Target()
	out, err := g.Run(ctx, t.cfg.Repo, "rev-list", "--first-parent", "--max-parents=0", target, "--")
	if err != nil {
		return err
	}
	root := strings.TrimSpace(out)
	want := repositoryRecord{Root: root, Target: target}
	for range 2 {
		var have repositoryRecord
		_, found, err := getJSON(ctx, t.db, kindRepository, repositoryID, &have)
		if err != nil {
			return err
		}
		if found {
			if have.Root != root {
				return &OtherRepositoryError{Repo: t.cfg.Repo, Target: target, Root: root, Recorded: have.Root}
			}
			return nil
		}
		data, err := json.Marshal(want)
		if err != nil {
			return err
		}
		_, err = t.db.Apply(ctx, store.Op{Kind: kindRepository, ID: repositoryID, Data: data}) // ExpectVersion 0: create
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
		// Another host recorded it meanwhile: compare with theirs.
	}
	return fmt.Errorf("team: recording the repository: too many conflicts")
}
