package agentcmd

import (
	"regexp"
	"strings"
)

// configURL, configURLSection, configHeader and configCredential find,
// in a git config file, a remote's URL (url, pushurl), a [url "..."]
// section (insteadOf's target), an http extraheader and a credential
// helper (git credential-store's --file names the host's stored passwords).
var (
	configURL        = regexp.MustCompile(`(?i)^(\s*(?:url|pushurl)\s*=\s*"?[a-z][a-z0-9+.-]*://)[^/@\s"]*@`)
	configURLSection = regexp.MustCompile(`(?i)^(\s*\[\s*url\s+"[a-z][a-z0-9+.-]*://)[^/@\s"]*@`)
	configHeader     = regexp.MustCompile(`(?i)^\s*extraheader\s*=`)
	configCredential = regexp.MustCompile(`(?i)^\s*helper\s*=`)
)

// redactConfig is a git config file without the credentials a host keeps
// in one: a remote URL's user and password (in url, pushurl and a [url]
// section's name), an http extraheader (a CI's bearer token), a
// credential helper. The agent's copy holds this; it needs none of them.
func redactConfig(data []byte) []byte {
	lines := strings.SplitAfter(string(data), "\n")
	for i, line := range lines {
		switch {
		case configHeader.MatchString(line):
			lines[i] = "\t# (an http extraheader the host keeps)\n"
		case configCredential.MatchString(line):
			lines[i] = "\t# (a credential helper the host keeps)\n"
		case configURL.MatchString(line):
			lines[i] = configURL.ReplaceAllString(line, "${1}")
		case configURLSection.MatchString(line):
			lines[i] = configURLSection.ReplaceAllString(line, "${1}")
		}
	}
	return []byte(strings.Join(lines, ""))
}

// sandboxGitConfig ends the copy's config. git gc (and git maintenance's
// gc task) expires every worktree's reflogs, which locks each other
// worktree's HEAD in its admin directory, read-only in the sandbox: it
// failed ("cannot lock ref 'worktrees/B/HEAD': ... Read-only file
// system", "fatal: failed to run reflog"); and it prunes the worktrees
// whose directory is gone, which in the sandbox are those it hides. Both
// set to never, git gc skips those steps and does the rest in the agent's
// copy (its objects packed in its own object directory, its refs packed in
// its copy); the host's gc of the real repository is the host's.
const sandboxGitConfig = "\n# (agentcmd: the sandbox's git gc leaves the other worktrees alone)\n[gc]\n" +
	"\treflogExpire = never\n\treflogExpireUnreachable = never\n\tworktreePruneExpire = never\n"
