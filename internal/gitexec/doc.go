// Package gitexec runs the git CLI: argv only, never a shell, with an
// explicit author and committer, a C locale, no terminal prompts, and
// stderr carried in a typed error (*Error, re-exported as foreman.GitError).
// A cancelled context kills git's whole process group.
package gitexec
