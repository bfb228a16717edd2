package foreman

import "github.com/agentforeman/foreman/internal/gitexec"

// GitError is a git command that could not start, failed, or was cancelled,
// as returned (wrapped) by every package that runs git: merge, gitsnap and
// the worker runtime. Match it with errors.As. Its fields:
//
//	Dir      string   // where git ran
//	Args     []string // git's arguments
//	ExitCode int      // -1 when git did not exit normally
//	Stderr   string
//	Err      error    // the cause, also reached by Unwrap: an *exec.ExitError,
//	                  // a missing binary, or the context's error
type GitError = gitexec.Error
