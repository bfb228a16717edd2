package agentcmd

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"time"
)

// The identity a sandboxed agent's git commits with where neither the host
// nor the host's git in the workspace gives one (see gitIdentity).
const (
	FallbackGitName  = "Foreman agent"
	FallbackGitEmail = "agent@foreman.invalid"
)

// identityTimeout bounds the host's git config run for the identity.
const identityTimeout = 10 * time.Second

// withGitIdentity is env (a sandboxed agent's, built) with git's identity
// variables GIT_AUTHOR_NAME, GIT_AUTHOR_EMAIL, GIT_COMMITTER_NAME and
// GIT_COMMITTER_EMAIL added where env has none (or an empty one): the
// sandbox hides the host's home, so the agent's git reads no
// ~/.gitconfig, and without them its first commit fails "Author identity
// unknown" (and an agent following git's hint writes the repository's
// config, a refusal). The values are what the host's git says in the
// workspace (user.name and user.email: repo-local, global and system
// configuration alike, run with the host's environment), else
// FallbackGitName and FallbackGitEmail. A variable the host set (passed
// from its environment, Config.Env, the request's Env) is kept: the
// host's choice wins.
//
// Variables, not a ~/.gitconfig in the agent's home: they reach the agent
// whatever its home is (a kept home, a host's Bind over ~/.gitconfig, a
// GIT_CONFIG_GLOBAL passed from the host), a host's own choice wins by
// exec's ordinary rule, they are read again each execution, and nothing is
// written into a home the agent can change.
func (d *Driver) withGitIdentity(ctx context.Context, workspace string, env []string) []string {
	names := [...]string{"GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"}
	emails := [...]string{"GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"}
	missing := false
	for _, k := range append(names[:], emails[:]...) {
		if lookupEnv(env, k) == "" {
			missing = true
		}
	}
	if !missing {
		return env
	}
	name, email := d.hostGitIdentity(ctx, workspace)
	if name == "" {
		name = FallbackGitName
	}
	if email == "" {
		email = FallbackGitEmail
	}
	for i := range names {
		if lookupEnv(env, names[i]) == "" {
			env = append(env, names[i]+"="+name)
		}
		if lookupEnv(env, emails[i]) == "" {
			env = append(env, emails[i]+"="+email)
		}
	}
	return env
}

// hostGitIdentity is user.name and user.email as the host's git has them
// in workspace ("" for one it has none of, or when git fails).
func (d *Driver) hostGitIdentity(ctx context.Context, workspace string) (name, email string) {
	ctx, cancel := context.WithTimeout(ctx, identityTimeout)
	defer cancel()
	out, err := hostGit(ctx, workspace, "config", "-z", "--get-regexp", `^user\.(name|email)$`)
	if err != nil {
		// Exit 1: neither is set. Anything else: the fallback too.
		if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 1 {
			d.cfg.Logger.Debug("agentcmd: the host's git identity", "workspace", workspace, "err", err)
		}
		return "", ""
	}
	// key\nvalue\0 per entry; the last of a key wins, as for git.
	for _, e := range strings.Split(out, "\x00") {
		k, v, ok := strings.Cut(strings.TrimSpace(e), "\n")
		v = strings.TrimSpace(v)
		if !ok || strings.ContainsAny(v, "\n\x00") {
			continue
		}
		switch k {
		case "user.name":
			name = v
		case "user.email":
			email = v
		}
	}
	return name, email
}
