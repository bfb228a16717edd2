// Package demo builds the throwaway repositories and scripted agents that
// the examples and integration tests run Foreman on: a tiny Go module in a
// real git repository, and shell-script agents that really edit files and
// commit.
package demo
