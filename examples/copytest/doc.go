// Package copytest checks that every example under examples/ is a program a
// user can copy into a module of their own: it imports nothing internal to
// Foreman, and, copied into a fresh module outside the repository that
// requires github.com/agentforeman/foreman (replaced by this checkout), it
// builds and its tests compile.
package copytest
