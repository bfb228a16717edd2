// Package gitexec runs the git CLI: argv only, never a shell, with an
// explicit author and committer, a C locale, no terminal prompts, and
// stderr carried in a typed error (*Error, re-exported as foreman.GitError).
// A cancelled context ends git's whole process group: SIGTERM, on which
// git removes its lock files, then SIGKILL after Runner.WaitDelay.
//
// It also answers the questions Foreman asks most often (where is this
// worktree's git directory, what is HEAD, does this branch exist, which
// commits are new since the base, is this a valid branch name) by reading
// git's own files, because every git process costs milliseconds of CPU and
// a team asks them on every heartbeat, snapshot and merge. Each reader
// answers only where the files are the plain, documented layout, and
// reports ok=false for anything else (a relocating environment variable,
// core.worktree, packed objects, replace refs, ...): the caller then runs
// the git command it stands for, so a reader changes the cost of an
// answer, never the answer.
//
// Every git a Runner starts carries OwnerEnv, naming the process that
// started it, and OrphanReaper finds the processes whose owner is gone:
// merge waits for a crashed host's gits with it, and agentcmd, reading its
// own variable, stops a crashed host's agents.
package gitexec
