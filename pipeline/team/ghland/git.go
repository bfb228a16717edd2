package ghland

import (
	"context"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/gitexec"
)

// branch is a story's branch on the remote.
func (l *Lander) branch(item foreman.ItemID) string { return l.cfg.BranchPrefix + "/" + string(item) }

// gitRunner runs git for the Lander; with a token and an https remote,
// the push authenticates with it through the environment of that git
// process alone (GIT_CONFIG_* naming an http.extraHeader for the
// remote's URL): not in its arguments, not in any agent's environment.
func (l *Lander) gitRunner(auth bool) gitexec.Runner {
	env := append([]string{"GIT_TERMINAL_PROMPT=0"}, l.cfg.GitEnv...)
	if auth && l.cfg.Token != "" && strings.HasPrefix(l.cfg.Remote, "https://") {
		cred := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + l.cfg.Token))
		env = append(env, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http."+l.cfg.Remote+".extraHeader",
			"GIT_CONFIG_VALUE_0=Authorization: Basic "+cred)
	}
	return gitexec.Runner{Git: l.cfg.Git, Env: env, Author: gitexec.DefaultIdentity(), Committer: gitexec.DefaultIdentity()}
}

// push commits what the story's agent left uncommitted (title as the
// message) and pushes the worktree's HEAD to the story's branch on the
// remote (forced: the branch is the team's, and a rework may have rebased
// it). It returns the commit pushed.
func (l *Lander) push(ctx context.Context, item foreman.ItemID, title string) (string, error) {
	dir, err := l.cfg.Worktree(item)
	if err != nil {
		return "", err
	}
	g := l.gitRunner(false)
	if _, err := g.Run(ctx, dir, "add", "-A"); err != nil {
		return "", err
	}
	if _, err := g.Run(ctx, dir, "diff", "--cached", "--quiet"); err != nil {
		if _, err := g.Run(ctx, dir, "commit", "-q", "--no-verify", "-m", title); err != nil {
			return "", err
		}
	}
	head, err := g.Run(ctx, dir, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return "", err
	}
	head = strings.TrimSpace(head)
	if err := l.unprotected(ctx, item, dir); err != nil {
		return "", err
	}
	pg := l.gitRunner(true)
	if _, err := pg.Run(ctx, dir, "push", "-q", "--force", l.cfg.Remote, head+":refs/heads/"+l.branch(item)); err != nil {
		return "", fmt.Errorf("ghland: pushing %s: %w", item, err)
	}
	return head, nil
}

// syncLocal brings LocalRepo's Base up to the remote's (after a merge):
// fetched, then fast-forwarded, in its checkout when Base is checked out
// there (refusing to overwrite local changes), else by its ref. A Base
// that cannot fast-forward is left alone.
func (l *Lander) syncLocal(ctx context.Context) error {
	if l.cfg.LocalRepo == "" {
		return nil
	}
	g := l.gitRunner(true)
	dir, base := l.cfg.LocalRepo, l.cfg.Base
	if _, err := g.Run(ctx, dir, "fetch", "-q", l.cfg.Remote, "+refs/heads/"+base+":refs/remotes/foreman-land/"+base); err != nil {
		return err
	}
	remote := "refs/remotes/foreman-land/" + base
	if _, err := g.Run(ctx, dir, "merge-base", "--is-ancestor", "refs/heads/"+base, remote); err != nil {
		return fmt.Errorf("ghland: the local %s does not fast-forward to the remote's", base)
	}
	cur, _ := g.Run(ctx, dir, "symbolic-ref", "-q", "--short", "HEAD")
	if strings.TrimSpace(cur) == base {
		_, err := g.Run(ctx, dir, "merge", "-q", "--ff-only", "--no-overwrite-ignore", remote)
		return err
	}
	old, err := g.Run(ctx, dir, "rev-parse", "refs/heads/"+base)
	if err != nil {
		return err
	}
	_, err = g.Run(ctx, dir, "update-ref", "refs/heads/"+base, remote, strings.TrimSpace(old))
	return err
}

// protectedError is a story whose branch touches a protected path.
type protectedError struct {
	item  foreman.ItemID
	paths []string
}

func (e *protectedError) Error() string {
	return fmt.Sprintf("the branch of %s touches protected paths, which no landed change may: %s", e.item, strings.Join(e.paths, ", "))
}

// unprotected checks that the worktree's commits since they left the
// local Base touch no Config.Protected path.
func (l *Lander) unprotected(ctx context.Context, item foreman.ItemID, dir string) error {
	if len(l.cfg.Protected) == 0 {
		return nil
	}
	g := l.gitRunner(false)
	base, err := g.Run(ctx, dir, "merge-base", "HEAD", "refs/heads/"+l.cfg.Base)
	if err != nil {
		return err
	}
	out, err := g.Run(ctx, dir, "diff", "--name-only", "--no-renames", "-z", strings.TrimSpace(base), "HEAD", "--")
	if err != nil {
		return err
	}
	var bad []string
	for _, p := range strings.Split(out, "\x00") {
		for _, prot := range l.cfg.Protected {
			prot = strings.Trim(filepath.ToSlash(filepath.Clean(prot)), "/")
			if p != "" && (strings.EqualFold(p, prot) || strings.HasPrefix(strings.ToLower(p), strings.ToLower(prot)+"/")) {
				bad = append(bad, p)
			}
		}
	}
	if len(bad) > 0 {
		return &protectedError{item: item, paths: bad}
	}
	return nil
}
