package gitremote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/merge"
)

// remoteName is the name the clone gives the shared repository.
const remoteName = "origin"

// DefaultMaxAttempts is how many times Merge tries to land an item when
// other mergers keep moving the remote's target first.
const DefaultMaxAttempts = 5

// Config configures a Clone. Remote and Dir are required.
type Config struct {
	// Remote is the shared repository every host fetches from and pushes
	// to: a URL or a path (a bare repository in tests). Required.
	Remote string
	// Dir is this host's clone. Open clones Remote there when it does not
	// exist; an existing clone must have Remote as its origin. Required.
	Dir string
	// Merge configures the clone's worktrees and merges (see merge.Config);
	// Open sets Repo to Dir and Remote to "origin". BaseBranch and
	// TargetBranch must exist on the remote. Merge.Protected should name
	// the state directories of the hosts that check the target out (a
	// team's .foreman): Merge then refuses a change that touches them
	// before it reaches the shared repository. Default: merge.Config's
	// defaults, with Repo and Remote set as above.
	Merge merge.Config
	// MaxAttempts bounds how many times Merge fetches and tries again after
	// losing the race for the remote's target to another merger. Default:
	// 5 (DefaultMaxAttempts).
	MaxAttempts int
	// Logger receives a line per push and per lost race. Default: none (nil
	// discards them).
	Logger *slog.Logger
}

// Clone is one host's clone of the shared repository. Workers use
// Checkout and Push; the leader's merger uses Merge. Its methods are safe
// for concurrent use.
type Clone struct {
	cfg    Config
	git    *gitexec.Runner
	mgr    *merge.Manager
	log    *slog.Logger
	base   string // short names
	target string
	prefix string

	mergeMu   sync.Mutex // one Merge or Fence at a time: each moves the local target or the fence
	fenceTip  string     // the fence commit this Clone last pushed or adopted ("" = not fenced)
	fenceTerm int64

	mu     sync.Mutex
	leases map[foreman.ItemID]string // item -> remote branch tip its worktree started from ("" = absent)
}

// Open returns the clone at cfg.Dir, cloning cfg.Remote there first when
// there is none. The clone's own checkout is detached, so that Foreman can
// move its local branches to follow the remote.
func Open(ctx context.Context, cfg Config) (*Clone, error) {
	if cfg.Remote == "" || cfg.Dir == "" {
		return nil, fmt.Errorf("%w: Remote and Dir are required", ErrInvalidConfig)
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("gitremote: %w", err)
	}
	cfg.Dir = dir
	c := &Clone{cfg: cfg, log: cfg.Logger, leases: map[foreman.ItemID]string{}}
	if c.log == nil {
		c.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c.git = &gitexec.Runner{Git: cfg.Merge.Git, Author: gitexec.Identity(cfg.Merge.Author),
		Committer: gitexec.Identity(cfg.Merge.Committer), Env: append([]string(nil), cfg.Merge.GitEnv...)}
	c.base, c.target, c.prefix = cfg.Merge.BaseBranch, cfg.Merge.TargetBranch, cfg.Merge.BranchPrefix
	if c.base == "" {
		c.base = "main"
	}
	if c.target == "" {
		c.target = c.base
	}
	if c.prefix == "" {
		c.prefix = "foreman"
	}
	if err := c.ensureClone(ctx); err != nil {
		return nil, err
	}
	// The local base and target follow the remote's before the manager
	// checks that they exist.
	if err := c.fetch(ctx, c.base, c.target); err != nil {
		return nil, err
	}
	mc := cfg.Merge
	mc.Repo, mc.Remote = dir, remoteName
	if c.mgr, err = merge.New(ctx, mc); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Clone) ensureClone(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(c.cfg.Dir, ".git")); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(c.cfg.Dir), 0o755); err != nil {
			return fmt.Errorf("gitremote: %w", err)
		}
		if _, err := c.git.Run(ctx, filepath.Dir(c.cfg.Dir), "clone", "-q", "--origin", remoteName, c.cfg.Remote, c.cfg.Dir); err != nil {
			return fmt.Errorf("gitremote: cloning %s: %w", c.cfg.Remote, err)
		}
	} else if err != nil {
		return fmt.Errorf("gitremote: %w", err)
	} else {
		url, err := c.git.Run(ctx, c.cfg.Dir, "remote", "get-url", remoteName)
		if err != nil {
			return fmt.Errorf("%w: %s has no remote %q: %w", ErrWrongRemote, c.cfg.Dir, remoteName, err)
		}
		if got := strings.TrimSpace(url); got != c.cfg.Remote {
			return fmt.Errorf("%w: %s fetches from %s, not %s", ErrWrongRemote, c.cfg.Dir, got, c.cfg.Remote)
		}
	}
	// Detached, the clone's checkout holds no branch, so the local base and
	// target can be moved to the remote's without touching a working tree.
	if _, err := c.git.Run(ctx, c.cfg.Dir, "checkout", "-q", "--detach"); err != nil {
		return fmt.Errorf("gitremote: %w", err)
	}
	return nil
}

// Manager returns the merge.Manager of the clone (worktrees, DiffStat).
func (c *Clone) Manager() *merge.Manager { return c.mgr }

// Dir returns the clone's directory.
func (c *Clone) Dir() string { return c.cfg.Dir }

// fetch sets each local branch to the remote's (which must exist).
func (c *Clone) fetch(ctx context.Context, branches ...string) error {
	args := []string{"fetch", "-q", "--no-tags", remoteName}
	for _, b := range branches {
		args = append(args, "+refs/heads/"+b+":refs/heads/"+b)
	}
	if _, err := c.git.Run(ctx, c.cfg.Dir, args...); err != nil {
		return fmt.Errorf("%w: fetching %s from %s: %w", ErrRemote, strings.Join(branches, ", "), c.cfg.Remote, err)
	}
	return nil
}

// remoteTip reads a branch's tip on the remote ("" when it has none).
func (c *Clone) remoteTip(ctx context.Context, branch string) (string, error) {
	out, err := c.git.Run(ctx, c.cfg.Dir, "ls-remote", remoteName, "refs/heads/"+branch)
	if err != nil {
		return "", fmt.Errorf("%w: reading %s on %s: %w", ErrRemote, branch, c.cfg.Remote, err)
	}
	if f := strings.Fields(out); len(f) > 0 {
		return f[0], nil
	}
	return "", nil
}

func (c *Clone) localTip(ctx context.Context, dir, rev string) (string, error) {
	out, err := c.git.Run(ctx, dir, "rev-parse", "-q", "--verify", rev+"^{commit}")
	if err != nil {
		if gitexec.ExitCode(err) == 1 {
			return "", nil
		}
		return "", err
	}
	return strings.TrimSpace(out), nil
}

func (c *Clone) branch(id foreman.ItemID) string { return c.prefix + "/" + string(id) }
