package foreman

import "github.com/agentforeman/foreman/internal/gitexec"

// GitError is a git command that could not start, failed, or was cancelled,
// as returned (wrapped) by every package that runs git: merge, gitsnap and
// the worker runtime. Match it with errors.As to read the command, its exit
// code and stderr; it unwraps to the cause (an *exec.ExitError, a missing
// binary, or the context's error).
type GitError = gitexec.Error
