package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/pipeline/store"
)

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
