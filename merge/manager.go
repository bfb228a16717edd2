package merge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/phases/gates"
)

// Config configures a Manager. The zero value of every field but Repo means
// the documented default.
type Config struct {
	// Repo is any path inside a non-bare git repository (its main worktree
	// or a linked one). Required.
	Repo string
	// Root is the directory holding the item worktrees, <Root>/<id>.
	// Relative paths are taken against the main worktree. When Root is
	// inside the repository it is added to .git/info/exclude so that it
	// never shows as untracked, and it is protected (see Protected).
	// Default: <main worktree>/.worktrees.
	Root string
	// Protected are directories inside the repository's working tree that
	// no merge may touch: a host's own state, git-ignored, which git would
	// delete or overwrite when it checks out a commit with a file in their
	// place or files inside them. Merge refuses (*ProtectedPathError) an
	// item whose branch, uncommitted changes (Request.CommitPending) or
	// squash has an entry at or under one of them, or a file or symbolic
	// link where one of their parents is; names are compared ignoring
	// case. New refuses (*UnsafeDirError) one that is a symbolic link or
	// is reached through one inside the working tree, is not a directory,
	// or is tracked by git (in the index, on the base or target branch).
	// Relative paths are taken against the main worktree; paths outside it
	// are ignored. Root is always protected. Default: Root alone.
	Protected []string
	// BranchPrefix names item branches <BranchPrefix>/<id>. Default: "foreman".
	BranchPrefix string
	// BaseBranch is the branch new worktrees start from. Default: "main".
	BaseBranch string
	// TargetBranch is the branch Merge lands on. Default: BaseBranch.
	TargetBranch string
	// DeleteBranchOnRemove makes Remove and Prune delete the item's branch
	// too. Default: false (the branch is kept: the squash commit carries the
	// work, the branch its history).
	DeleteBranchOnRemove bool
	// RequireCleanTarget refuses (*DirtyError with Target set) to merge when
	// a checkout of the target branch has any uncommitted change. Default:
	// false (like `git merge`, local changes the merge does not touch are
	// carried along, and only changes it would overwrite refuse the merge).
	RequireCleanTarget bool
	// Remote is where Request.Push pushes the target. Default: "origin".
	Remote string
	// StaleLockAge is the age after which a git lock file (index.lock, a
	// ref's .lock) found in Foreman's way is taken for a crash leftover and
	// removed. Younger ones are reported as *LockedError. It is also how
	// long New lets a git that a process now gone left running finish (see
	// the package documentation). Default: 2 min.
	StaleLockAge time.Duration
	// Git is the git binary. Default: "git" from PATH.
	Git string
	// Author and Committer sign the commits Foreman makes (squash commits,
	// CommitPending); one with no Name counts as unset. Default: author
	// "Foreman <foreman@localhost>", committer the author.
	Author, Committer Identity
	// GitEnv is extra environment for every git command (for example
	// GIT_CONFIG_*). Default: none.
	GitEnv []string
	// Clock tells the age of git lock files (see StaleLockAge). Waiting for
	// the repository lock is always paced by the wall clock, whatever Clock
	// is: the holder may be another process, which a fake clock does not
	// govern, so a fake clock nobody advances never stalls a Manager.
	// Default: the wall clock.
	Clock foreman.Clock
	// Logger receives one line per repair and per merge, and a debug line
	// each time the repository lock is found held. Default: none (nil
	// discards them).
	Logger *slog.Logger
	// CheckSandbox contains Request.Check, which runs the squash's code
	// (a test suite the work changed): the check runs what its Contain
	// returns, and a check whose sandbox refused it anything fails
	// (*CheckError with Refused) even when it exited 0. agentcmd.Driver
	// is one; pipeline/team sets its agent's. A CheckSandbox with a
	// RemoveHome(ctx, workspace) error method (agentcmd.Driver has one)
	// has the home it kept for the temporary checkout removed after the
	// check. Default: none (nil: the
	// check runs on the host with the host's environment and rights).
	CheckSandbox gates.Sandbox
	// CheckTimeout bounds Request.Check: a check still running then is
	// killed with its process group and fails (*CheckError with TimedOut;
	// the target does not move). Measured on Clock. Default: 30 min
	// (DefaultCheckTimeout).
	CheckTimeout time.Duration
}

// DefaultCheckTimeout is Config.CheckTimeout's default.
const DefaultCheckTimeout = 30 * time.Minute

// Identity is a git author or committer.
type Identity struct {
	Name  string
	Email string
}

const (
	trailerKey   = "Foreman-Item"
	lockFileName = "foreman.lock"
	checkPrefix  = ".foreman-check-" // item ids never start with '.', so no clash
	baseFileName = "foreman-base"
)

// Manager owns the item worktrees and the merges of one repository. All its
// methods are safe for concurrent use; operations that change the repository
// are serialized per repository, across Managers and processes (see Locking
// in the package documentation).
type Manager struct {
	cfg       Config
	git       *gitexec.Runner
	clk       clock.Clock
	log       *slog.Logger
	lock      *repoLock
	topDir    string // the worktree Repo names; where repository-wide git commands run
	mainDir   string // the main worktree
	commonDir string // the shared git directory
	// plainLayout: the layout was read from git's files (no environment
	// relocating the repository), so its refs may be read from them too.
	plainLayout bool
	root        string
	// protected are the protected directories inside the main worktree:
	// relative, slash-separated, and (protectedAbs) as configured, absolute.
	protected    []string
	protectedAbs []string
	target       string // fully qualified target ref
	merges       int    // landed merges, guarded by lock
}

// New opens the repository named by cfg.Repo.
func New(ctx context.Context, cfg Config) (*Manager, error) {
	if cfg.Repo == "" {
		return nil, errors.New("merge: Config.Repo is required")
	}
	m := &Manager{cfg: cfg, clk: clock.OrReal(cfg.Clock), log: cfg.Logger}
	m.git = &gitexec.Runner{
		Git:       cfg.Git,
		Author:    gitexec.Identity(cfg.Author),
		Committer: gitexec.Identity(cfg.Committer),
		Env:       append([]string(nil), cfg.GitEnv...),
	}
	if m.log == nil {
		m.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if m.cfg.BranchPrefix == "" {
		m.cfg.BranchPrefix = "foreman"
	}
	if m.cfg.BaseBranch == "" {
		m.cfg.BaseBranch = "main"
	}
	if m.cfg.TargetBranch == "" {
		m.cfg.TargetBranch = m.cfg.BaseBranch
	}
	if m.cfg.Remote == "" {
		m.cfg.Remote = "origin"
	}
	if m.cfg.StaleLockAge <= 0 {
		m.cfg.StaleLockAge = 2 * time.Minute
	}
	if m.cfg.CheckTimeout <= 0 {
		m.cfg.CheckTimeout = DefaultCheckTimeout
	}
	repo, err := filepath.Abs(cfg.Repo)
	if err != nil {
		return nil, fmt.Errorf("merge: %w", err)
	}
	if err := m.findRepository(ctx, repo); err != nil {
		return nil, err
	}
	if err := m.checkBranches(ctx); err != nil {
		return nil, err
	}
	m.root = cfg.Root
	if m.root == "" {
		m.root = ".worktrees"
	}
	if !filepath.IsAbs(m.root) {
		m.root = filepath.Join(m.mainDir, m.root)
	}
	m.root = filepath.Clean(m.root)
	m.target = "refs/heads/" + m.cfg.TargetBranch
	if err := m.validBranch(ctx, m.cfg.BranchPrefix+"/x"); err != nil {
		return nil, fmt.Errorf("merge: BranchPrefix %q: %w", m.cfg.BranchPrefix, err)
	}
	m.lock = newRepoLock(filepath.Join(m.commonDir, lockFileName), m.log)
	if err := m.reapOrphanedGits(ctx); err != nil {
		return nil, err
	}
	if err := m.setupProtected(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// orphanGrace is how long an orphaned git gets to end after SIGTERM, and
// again after SIGKILL: git removes its lock files and exits at once on
// SIGTERM.
const orphanGrace = 5 * time.Second

// reapOrphanedGits waits for the gits that a process now gone started in
// this repository or its worktrees: a host SIGKILLed in the
// middle of `git worktree add` or a merge leaves its git running (git runs
// in a process group of its own), and the repairs this Manager makes, or an
// agent's next commit, would race with it. They get StaleLockAge to finish
// (the age at which a git lock file counts as abandoned), then SIGTERM. The
// waits are paced by the wall clock, whatever Config.Clock is: the orphans
// are other processes.
func (m *Manager) reapOrphanedGits(ctx context.Context) error {
	reaper := gitexec.OrphanReaper{Clock: clock.Real(), Patience: m.cfg.StaleLockAge, Grace: orphanGrace,
		OnFound: func(found []gitexec.Orphan) {
			for _, o := range found {
				m.log.Info("merge: waiting for a git left running by a host that is gone", "dir", o.Dir,
					"pgid", o.PGID, "pids", o.PIDs, "owner", o.Owner)
			}
		}}
	orphans, err := reaper.Reap(ctx, []string{m.mainDir, m.commonDir, m.root})
	for _, o := range orphans {
		switch {
		case len(o.Survivors) > 0:
			m.log.Warn("merge: a git left running by a host that is gone survived SIGKILL", "dir", o.Dir, "pgid", o.PGID, "pids", o.Survivors)
		case o.Signal != "":
			m.log.Warn("merge: ended a git left running by a host that is gone", "dir", o.Dir, "pgid", o.PGID, "signal", o.Signal)
		default:
			m.log.Info("merge: a git left running by a host that is gone has finished", "dir", o.Dir, "pgid", o.PGID)
		}
	}
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	return nil
}

// findRepository sets the working tree, main worktree and common git
// directory of repo, from git's files when their layout is the plain one
// (gitexec.ReadLayout), else from git rev-parse.
func (m *Manager) findRepository(ctx context.Context, repo string) error {
	l, ok := gitexec.ReadLayout(repo, m.git.Env)
	m.plainLayout = ok
	if !ok {
		// No `git worktree list` here: it reads every worktree's registration and
		// fails while another process is in the middle of `worktree add`.
		lines, err := m.git.Lines(ctx, repo, "rev-parse", "--path-format=absolute",
			"--git-common-dir", "--git-dir", "--show-toplevel")
		if err != nil {
			return fmt.Errorf("merge: %s is not a git work tree: %w", repo, err)
		}
		if len(lines) != 3 {
			return fmt.Errorf("merge: unexpected rev-parse output %q", lines)
		}
		l = gitexec.Layout{CommonDir: lines[0], GitDir: lines[1], TopLevel: lines[2]}
	}
	m.commonDir, m.topDir = l.CommonDir, l.TopLevel
	switch {
	case l.CommonDir == l.GitDir:
		m.mainDir = m.topDir // Repo is the main worktree
	case filepath.Base(m.commonDir) == ".git":
		m.mainDir = filepath.Dir(m.commonDir)
	default:
		return fmt.Errorf("merge: cannot find the main worktree of %s (git dir %s)", repo, m.commonDir)
	}
	return nil
}

// checkBranches makes sure the base and target branches exist, as git
// show-ref --verify does: from the ref files when they are plain, else by
// asking git.
func (m *Manager) checkBranches(ctx context.Context) error {
	l := gitexec.Layout{TopLevel: m.mainDir, GitDir: m.commonDir, CommonDir: m.commonDir}
	for i, branch := range []string{m.cfg.BaseBranch, m.cfg.TargetBranch} {
		if i == 1 && branch == m.cfg.BaseBranch {
			break
		}
		// show-ref also refuses a ref whose commit is missing: only a
		// commit found as a loose object is as sure as its answer.
		if m.plainLayout {
			if hash, ok := gitexec.ReadRef(l, "refs/heads/"+branch); ok && gitexec.HasLooseObject(l, hash) {
				continue
			}
		}
		if _, err := m.git.Run(ctx, m.mainDir, "show-ref", "--verify", "--quiet", "refs/heads/"+branch); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("merge: %w", err)
			}
			return fmt.Errorf("%w: %q in %s (set Config.BaseBranch / TargetBranch)", ErrUnknownBranch, branch, m.mainDir)
		}
	}
	return nil
}

// validBranch checks a branch name by git's rules in process, and asks git
// check-ref-format (for its verdict and its message) only about a name
// those rules refuse or leave to git.
func (m *Manager) validBranch(ctx context.Context, name string) error {
	if strings.HasPrefix(name, "-") {
		return errors.New("must not start with '-'")
	}
	if gitexec.ValidBranchName(name) {
		return nil
	}
	_, err := m.git.Run(ctx, m.topDir, "check-ref-format", "--branch", name)
	return err
}

// Root returns the absolute directory holding the item worktrees.
func (m *Manager) Root() string { return m.root }

// Target returns the branch Merge lands on.
func (m *Manager) Target() string { return m.cfg.TargetBranch }

// Path returns the absolute worktree path of id, validating id first.
func (m *Manager) Path(id foreman.ItemID) (string, error) {
	if err := id.Validate(); err != nil {
		return "", err
	}
	return filepath.Join(m.root, string(id)), nil
}

// Branch returns the short branch name of id, validating id first.
func (m *Manager) Branch(id foreman.ItemID) (string, error) {
	if err := id.Validate(); err != nil {
		return "", err
	}
	return m.cfg.BranchPrefix + "/" + string(id), nil
}

// withLock runs fn holding the repository lock.
func (m *Manager) withLock(ctx context.Context, fn func() error) error {
	unlock, err := m.lock.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return fn()
}

func exitCode(err error) int { return gitexec.ExitCode(err) }
