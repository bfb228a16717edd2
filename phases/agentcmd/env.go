package agentcmd

import (
	"os"
	"strconv"
	"strings"

	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/phases"
)

// DefaultPassEnv returns the names of the host's environment variables an
// agent of format f gets by default (a name ending in "*" is a prefix):
//
//   - the basics: PATH, HOME (unsandboxed only; a sandboxed agent gets its
//     own), USER, LOGNAME, SHELL, TERM, COLORTERM, NO_COLOR, TZ, TMPDIR
//     (unsandboxed only), LANG, LANGUAGE and LC_*;
//   - reaching an API through a proxy: HTTP_PROXY, HTTPS_PROXY, NO_PROXY,
//     ALL_PROXY (and lower case), SSL_CERT_FILE, SSL_CERT_DIR,
//     NODE_EXTRA_CA_CERTS (a proxy URL's credentials never pass: the agent
//     gets a local proxy that adds them, see the package doc);
//   - git's identity and isolation: GIT_AUTHOR_NAME, GIT_AUTHOR_EMAIL,
//     GIT_COMMITTER_NAME, GIT_COMMITTER_EMAIL, GIT_CONFIG_GLOBAL,
//     GIT_CONFIG_NOSYSTEM (a sandboxed agent gets the identity variables
//     the host does not set from the host's git config, or a fallback:
//     see the package doc);
//   - Go's module settings: GOTOOLCHAIN, GOPROXY, GOFLAGS, GOPRIVATE,
//     GONOPROXY, GONOSUMDB, GOSUMDB, GOINSECURE;
//   - the CLI's own API variables: ANTHROPIC_* and CLAUDE_CODE_* for
//     FormatClaude; OPENAI_* and CODEX_* for FormatCodex; GEMINI_*,
//     GOOGLE_GEMINI_*, GOOGLE_GENAI_*, GOOGLE_API_KEY, GOOGLE_CLOUD_PROJECT
//     and GOOGLE_CLOUD_LOCATION for FormatGemini; all of those for
//     FormatText, whose CLI is unknown.
//
// The slice is new on every call.
func DefaultPassEnv(f Format) []string {
	names := basePassEnv()
	claude := []string{"ANTHROPIC_*", "CLAUDE_CODE_*"}
	codex := []string{"OPENAI_*", "CODEX_*"}
	gemini := []string{"GEMINI_*", "GOOGLE_GEMINI_*", "GOOGLE_GENAI_*", "GOOGLE_API_KEY", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION"}
	switch f {
	case FormatClaude:
		return append(names, claude...)
	case FormatCodex:
		return append(names, codex...)
	case FormatGemini:
		return append(names, gemini...)
	default:
		names = append(names, claude...)
		names = append(names, codex...)
		return append(names, gemini...)
	}
}

// basePassEnv are DefaultPassEnv's names of every format: all but the
// CLIs' API variables.
func basePassEnv() []string {
	return []string{
		"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "COLORTERM", "NO_COLOR", "TZ", "TMPDIR",
		"LANG", "LANGUAGE", "LC_*",
		"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
		"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
		"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
		"GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM",
		"GOTOOLCHAIN", "GOPROXY", "GOFLAGS", "GOPRIVATE", "GONOPROXY", "GONOSUMDB", "GOSUMDB", "GOINSECURE",
	}
}

// DefaultSecretEnv returns the names of the host's environment variables
// no agent gets from the host's environment, whatever PassEnv says: the
// team's own secrets, the forge tokens a story source or lander uses
// (GITHUB_TOKEN, GH_TOKEN and their Enterprise forms: they would let an
// agent act on the repository as the host) and the owner marks of the
// orphan reapers. (A host that means to hand one to an agent sets it in
// Config.Env.) The slice is new on every call.
func DefaultSecretEnv() []string {
	return []string{"FOREMAN_NOTIFY_SECRET", "DATABASE_URL", "PGPASSWORD",
		"GITHUB_TOKEN", "GH_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN", gitexec.OwnerEnv, AgentOwnerEnv}
}

// envMatch reports whether name is one of patterns (a pattern ending in
// "*" matches the names it prefixes).
func envMatch(name string, patterns []string) bool {
	for _, p := range patterns {
		if pre, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(name, pre) {
				return true
			}
		} else if name == p {
			return true
		}
	}
	return false
}

// environ is the agent's environment, built: the host's variables that
// DefaultPassEnv and Config.PassEnv name and no secret list does, the
// driver's FOREMAN_* and sandbox entries, Config.Env, extra (MCP), then
// the request's Env, a later entry for a key winning (as exec takes it).
// home is the sandbox's HOME, "" unsandboxed.
func (d *Driver) environ(req phases.AgentRequest, extra []string, home string) []string {
	pass := append(DefaultPassEnv(d.cfg.Format), d.cfg.PassEnv...)
	secret := append(DefaultSecretEnv(), d.cfg.SecretEnv...)
	var env []string
	for _, kv := range os.Environ() {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || !envMatch(k, pass) || envMatch(k, secret) {
			continue
		}
		if home != "" && (k == "HOME" || k == "TMPDIR") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"FOREMAN_WORKSPACE="+req.WorkspacePath,
		"FOREMAN_ITERATION="+strconv.Itoa(req.Iteration),
		"FOREMAN_SESSION_ID="+req.SessionID,
		AgentOwnerEnv+"="+gitexec.OwnerValue(),
	)
	if home != "" {
		// IS_SANDBOX tells Claude Code it runs in a sandbox, where it takes
		// --dangerously-skip-permissions as root.
		env = append(env, "HOME="+home, "TMPDIR=/tmp", "IS_SANDBOX=1")
	}
	env = append(env, d.cfg.Env...)
	env = append(env, extra...)
	return append(env, req.Env...)
}
