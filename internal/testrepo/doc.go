// Package testrepo makes the throwaway git repositories tests start from,
// and the git environment tests run git in.
//
// New writes a repository's first commit straight to disk, byte for byte as
// git init, git add and git commit would (its own tests compare the commit
// id with git's), but without starting git: the tests make a few hundred
// such repositories per run, and the three or four git processes each cost
// were a good part of the CPU of README's go test ./.... Everything after
// the first commit (worktrees, merges, more commits) is real git.
//
// Its repositories have git's automatic maintenance turned off in their
// configuration: it otherwise starts one more process after every commit.
// IsolateGit, called from a package's TestMain, keeps the machine's git
// configuration out of every git the tests start (directly, through the
// library, or through scripted agents).
package testrepo
