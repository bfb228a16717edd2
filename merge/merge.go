package merge

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/gitexec"
)

// Request describes one merge.
type Request struct {
	// Title is the subject after "{id}: ". Default: the id.
	Title string
	// Body is the squash commit's body, before the trailer. Optional.
	Body string
	// CommitPending commits uncommitted changes in the worktree (git add -A)
	// before merging, with CommitMessage (default "{id}: uncommitted work").
	// Without it, uncommitted changes fail the merge with *DirtyError.
	CommitPending bool
	CommitMessage string
	// Sync brings the item's branch up to date with the target first: rebase,
	// falling back to a merge when the rebase conflicts. A conflict in both
	// is a *ConflictError with Stage "sync" and the worktree is restored.
	Sync bool
	// Check is a command (argv, no shell) run in a temporary checkout of the
	// squash commit before the target moves. A non-zero exit fails the merge
	// with *CheckError and the target stays where it was.
	Check []string
	// Push pushes the target to Config.Remote after landing and verifies
	// that the remote ref now has the squash commit.
	Push bool
}

// Status is what a successful Merge did.
type Status int

const (
	// Merged: a new squash commit landed on the target.
	Merged Status = iota + 1
	// AlreadyMerged: the target already had a commit with the item's
	// trailer; nothing was landed again.
	AlreadyMerged
)

func (s Status) String() string {
	switch s {
	case Merged:
		return "merged"
	case AlreadyMerged:
		return "already-merged"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// Result is a successful merge.
type Result struct {
	Item   foreman.ItemID
	Status Status
	Target string // short branch name
	// Commit is the squash commit carrying the item's trailer.
	Commit string
	// Previous is the target's tip before this merge ("" for AlreadyMerged).
	Previous string
	// Synced is set when Request.Sync rebased or merged the item's branch.
	Synced bool
	// CheckedOut is the working tree of the target that was updated along
	// with the branch, "" when the target is not checked out anywhere.
	CheckedOut string
	// Pushed is set when the remote's target ref was verified to hold Commit.
	Pushed bool
}

// Merge squashes the item's branch onto the target branch as one commit
// "{id}: {title}" with the trailer "Foreman-Item: {id}", and verifies that
// the target advanced to it. Merges of one repository run one at a time.
//
// The squash is computed with `git merge-tree --write-tree` and written with
// `commit-tree`, so no working tree is touched until it is known to be clean;
// then the target moves by a compare-and-swap `update-ref`, or, when the
// target is checked out, by `merge --ff-only` in that checkout, which
// refuses (typed *DirtyError) rather than overwrite local changes.
//
// Outcomes: a Result with Merged or AlreadyMerged; ErrNothingToMerge;
// *ConflictError (nothing changed anywhere); *DirtyError; *CheckError;
// *ProtectedPathError (the change touches a protected directory: nothing
// changed anywhere);
// *PushError (the Result is valid: the local merge stands); *LockedError and
// *InProgressError for leftovers it will not remove; other errors are
// system faults (git failing, ctx ending).
func (m *Manager) Merge(ctx context.Context, id foreman.ItemID, req Request) (Result, error) {
	path, err := m.Path(id)
	if err != nil {
		return Result{}, err
	}
	var res Result
	err = m.withLock(ctx, func() error {
		var err error
		res, err = m.mergeLocked(ctx, id, path, req)
		return err
	})
	return res, err
}

func (m *Manager) mergeLocked(ctx context.Context, id foreman.ItemID, path string, req Request) (Result, error) {
	branchRef := "refs/heads/" + m.cfg.BranchPrefix + "/" + string(id)
	res := Result{Item: id, Target: m.cfg.TargetBranch}

	if err := m.clearLeftoverCheck(id); err != nil {
		return res, err
	}
	admin, healthy := inspectWorktree(path)
	if !healthy {
		// A half-made worktree holds no work; clear it and merge the branch.
		if err := m.clearStale(path, admin); err != nil {
			return res, err
		}
		admin = ""
	}
	branch := m.cfg.BranchPrefix + "/" + string(id)
	head, err := m.resolveRef(ctx, branchRef)
	if err != nil {
		return res, err
	}
	if head == "" {
		return res, fmt.Errorf("%w: %s", ErrNoBranch, branch)
	}
	if healthy {
		if err := m.recoverItemWorktree(ctx, path, admin); err != nil {
			return res, err
		}
	}
	base, err := m.baseOf(ctx, admin, branch)
	if err != nil {
		return res, err
	}
	tip, err := m.resolveRef(ctx, m.target)
	if err != nil {
		return res, err
	}
	if tip == "" {
		return res, fmt.Errorf("merge: target branch %s does not exist", m.cfg.TargetBranch)
	}

	// A merge first asks three independent questions: is the worktree
	// clean, did the item land before, does it squash cleanly. Git answers
	// them at once; the answers are then acted on in that order, and the
	// squash is recomputed if the head moved meanwhile (pending changes
	// committed, sync).
	var (
		wg                  sync.WaitGroup
		status, prior, tree string
		statusErr, priorErr error
		treeErr             error
		speculativeHead     = head
	)
	if healthy {
		wg.Go(func() {
			// Read-only: no opportunistic index refresh written back.
			status, statusErr = m.git.Run(ctx, path, "--no-optional-locks", "status", "--porcelain=v2", "--branch", "-z")
		})
	}
	wg.Go(func() { prior, priorErr = m.findMerged(ctx, id, base, tip) })
	if head != base {
		wg.Go(func() { tree, treeErr = m.squashTree(ctx, id, tip, speculativeHead) })
	}
	wg.Wait()

	// Idempotency first: the item's trailer on the target means it landed
	// before (a retry after a crash, a duplicate request), whatever its
	// worktree looks like now. Only commits after the item's base can carry it.
	if priorErr != nil {
		return res, priorErr
	}
	if prior != "" {
		res.Status, res.Commit = AlreadyMerged, prior
		return m.pushIfAsked(ctx, res, req)
	}
	onBranch := false
	if healthy {
		if statusErr != nil {
			return res, statusErr
		}
		var h string
		if h, onBranch, err = m.cleanHead(ctx, id, path, branchRef, status, req); err != nil {
			return res, err
		}
		if onBranch {
			head = h
		}
	}
	if head == base {
		return res, ErrNothingToMerge
	}
	if req.Sync && onBranch {
		if head, err = m.sync(ctx, id, path, admin, tip); err != nil {
			return res, err
		}
		res.Synced = true
	}
	// What the item's branch holds must not touch a protected directory,
	// whatever the squash would make of it.
	headCommit, err := m.readCommit(ctx, head)
	if err != nil {
		return res, err
	}
	if err := m.refuseProtected(ctx, id, "branch", headCommit.Tree); err != nil {
		return res, err
	}
	if head != speculativeHead || (tree == "" && treeErr == nil) {
		tree, treeErr = m.squashTree(ctx, id, tip, head)
	}
	if treeErr != nil {
		return res, treeErr
	}
	tipCommit, err := m.readCommit(ctx, tip)
	if err != nil {
		return res, err
	}
	if tree == tipCommit.Tree {
		return res, ErrNothingToMerge
	}
	// Nor what lands: the target's checkout is moved to this tree.
	if err := m.refuseProtected(ctx, id, "squash", tree); err != nil {
		return res, err
	}
	// Nor a symbolic link that points outside the repository.
	if err := m.refuseLinksOutside(ctx, id, tipCommit.Tree, tree); err != nil {
		return res, err
	}
	msg := commitMessage(id, req)
	out, err := m.git.RunCmd(ctx, gitexec.Cmd{
		Dir:   m.topDir,
		Args:  []string{"commit-tree", tree, "-p", tip, "-F", "-"},
		Stdin: strings.NewReader(msg),
	})
	if err != nil {
		return res, err
	}
	commit := strings.TrimSpace(out)
	if len(req.Check) > 0 {
		if err := m.runCheck(ctx, id, commit, req.Check); err != nil {
			return res, err
		}
	}
	if res.CheckedOut, err = m.land(ctx, id, tip, commit); err != nil {
		return res, err
	}
	if err := m.verify(ctx, id, tip, commit); err != nil {
		return res, err
	}
	res.Status, res.Commit, res.Previous = Merged, commit, tip
	m.log.Info("merge: landed", "item", id, "target", m.cfg.TargetBranch, "commit", commit, "previous", tip)
	m.maintain(ctx)
	return m.pushIfAsked(ctx, res, req)
}

func commitMessage(id foreman.ItemID, req Request) string {
	title := strings.Join(strings.Fields(req.Title), " ")
	if title == "" {
		title = string(id)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n\n", id, title)
	if body := strings.TrimSpace(req.Body); body != "" {
		b.WriteString(body)
		b.WriteString("\n\n")
	}
	fmt.Fprintf(&b, "%s: %s\n", trailerKey, id)
	return b.String()
}

// cleanHead reads the worktree's status for uncommitted changes (committing them when
// asked) and returns the item branch's head and whether the worktree has the
// item's branch checked out (head is "" when it has not).
func (m *Manager) cleanHead(ctx context.Context, id foreman.ItemID, path, branchRef, status string, req Request) (string, bool, error) {
	head, onBranch, files := parseStatus(status, branchRef)
	if len(files) > 0 {
		// Committing is only safe on the item's own branch.
		if !req.CommitPending || !onBranch {
			return "", false, &DirtyError{Path: path, Files: files}
		}
		// git add -A would stage a file in the place of a protected
		// directory (an ignore rule for a directory does not cover a file
		// of that name) and anything an agent staged inside one.
		if hits := m.protectedPending(path, files); len(hits) > 0 {
			m.log.Warn("merge: refusing to commit a change to a protected directory", "item", id, "paths", hits)
			return "", false, &ProtectedPathError{Item: id, Source: "uncommitted", Paths: hits, Protected: slices.Clone(m.protected)}
		}
		msg := req.CommitMessage
		if strings.TrimSpace(msg) == "" {
			msg = string(id) + ": uncommitted work"
		}
		if _, err := m.git.Run(ctx, path, "add", "-A"); err != nil {
			return "", false, err
		}
		// Auto maintenance is run by maintain, not after every commit.
		if _, err := m.git.Run(ctx, path, "-c", "maintenance.auto=false", "commit", "-q", "--no-verify", "-m", msg); err != nil {
			return "", false, err
		}
		h, err := m.worktreeHead(ctx, path)
		if err != nil {
			return "", false, err
		}
		head = h
	}
	if !onBranch {
		return "", false, nil
	}
	return head, true, nil
}

// parseStatus reads `git status --porcelain=v2 --branch -z`.
func parseStatus(out, branchRef string) (head string, onBranch bool, files []string) {
	fields := strings.Split(out, "\x00")
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		switch {
		case strings.HasPrefix(f, "# branch.oid "):
			head = strings.TrimPrefix(f, "# branch.oid ")
		case strings.HasPrefix(f, "# branch.head "):
			onBranch = "refs/heads/"+strings.TrimPrefix(f, "# branch.head ") == branchRef
		case strings.HasPrefix(f, "1 "):
			files = append(files, nthField(f, 8))
		case strings.HasPrefix(f, "2 "):
			files = append(files, nthField(f, 9))
			i++ // the original path follows
		case strings.HasPrefix(f, "u "):
			files = append(files, nthField(f, 10))
		case strings.HasPrefix(f, "? "):
			files = append(files, f[2:])
		}
	}
	if !isHash(head) {
		head = ""
	}
	return head, onBranch, files
}

func nthField(s string, n int) string {
	parts := strings.SplitN(s, " ", n+1)
	if len(parts) <= n {
		return s
	}
	return parts[n]
}

// findMerged returns a commit in base..tip whose trailer names id.
func (m *Manager) findMerged(ctx context.Context, id foreman.ItemID, base, tip string) (string, error) {
	if base != "" && m.plainLayout {
		// The target's history since the item's base is usually a short
		// chain of squash commits, loose objects: read it from git's files.
		l := gitexec.Layout{TopLevel: m.mainDir, GitDir: m.commonDir, CommonDir: m.commonDir}
		if chain, ok := gitexec.LinearHistory(l, m.git.Env, base, tip); ok {
			line := trailerKey + ": " + string(id) // what the --grep below matches
			for i := len(chain) - 1; i >= 0; i-- { // newest first, as rev-list
				c := chain[i]
				if slices.Contains(strings.Split(c.Message, "\n"), line) &&
					slices.Contains(trailerValues(c.Message, trailerKey), string(id)) {
					return c.Hash, nil
				}
			}
			return "", nil
		}
	}
	pattern := "^" + trailerKey + ": " + strings.ReplaceAll(string(id), ".", `\.`) + "$"
	rng := tip
	if base != "" {
		rng = base + ".." + tip
	}
	hits, err := m.git.Lines(ctx, m.topDir, "rev-list", "--grep="+pattern, rng)
	if err != nil {
		return "", err
	}
	for _, h := range hits {
		c, err := m.readCommit(ctx, h)
		if err != nil {
			return "", err
		}
		if slices.Contains(trailerValues(c.Message, trailerKey), string(id)) {
			return h, nil
		}
	}
	return "", nil
}

// squashTree merges head into tip without touching any working tree and
// returns the resulting tree, or a *ConflictError.
func (m *Manager) squashTree(ctx context.Context, id foreman.ItemID, tip, head string) (string, error) {
	out, err := m.git.Run(ctx, m.topDir, "merge-tree", "--write-tree", "-z", "--name-only", tip, head)
	if err != nil && exitCode(err) != 1 {
		return "", err
	}
	fields := strings.Split(out, "\x00")
	tree := fields[0]
	if err == nil {
		if !isHash(tree) {
			return "", fmt.Errorf("merge: unexpected merge-tree output %q", out)
		}
		return tree, nil
	}
	var files []string
	for _, f := range fields[1:] {
		if f == "" {
			break // end of the conflicted-file list; messages follow
		}
		if !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	return "", &ConflictError{Item: id, Target: m.cfg.TargetBranch, Stage: "squash", Files: files}
}

// sync rebases the item's branch onto tip in its worktree at path (admin:
// its git directory), falling back to merging tip in, and returns the
// branch's new head.
func (m *Manager) sync(ctx context.Context, id foreman.ItemID, path, admin, tip string) (string, error) {
	stop, err := m.rebaseIn(ctx, id, path, admin, tip, nil)
	if err != nil {
		return "", err
	}
	if stop != nil {
		if _, err := m.runStoppable(ctx, id, path, admin, "merge", "-q", "--no-edit", "--no-verify", tip); err != nil {
			if ctx.Err() != nil {
				return "", err
			}
			files, _ := m.conflictedFiles(ctx, path)
			if err := m.settled(ctx, func(ctx context.Context) error { return m.abortOp(ctx, path, admin) }); err != nil {
				return "", err
			}
			return "", &ConflictError{Item: id, Target: m.cfg.TargetBranch, Stage: "sync", Files: files}
		}
	}
	return m.worktreeHead(ctx, path)
}

// worktreeHead returns the commit checked out at path: read from git's
// files when the worktree's layout is the plain one, else from git.
func (m *Manager) worktreeHead(ctx context.Context, path string) (string, error) {
	if l, ok := gitexec.ReadLayout(path, m.git.Env); ok {
		if head, ok := gitexec.ReadHead(l); ok {
			return head, nil
		}
	}
	out, err := m.git.Run(ctx, path, "rev-parse", "HEAD")
	return strings.TrimSpace(out), err
}
