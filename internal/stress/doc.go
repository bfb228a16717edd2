// Package stress says whether a test run wants the long stress runs.
//
// A few tests exist to shake out rare failures by repetition: a thousand
// parallel worktree cycles on one repository, many processes contending for
// one lock. Their full size takes minutes on two cores, too long for the
// test command a developer runs after every change. Such tests run a
// smaller, still meaningful size by default (the same code paths, fewer
// repetitions) and their full size when the environment variable
// FOREMAN_STRESS is set to 1; CI runs them at full size in steps of their
// own (.ci/run). This is independent of go test's -short flag, which keeps
// its usual meaning.
package stress
