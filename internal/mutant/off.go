//go:build !foreman_mutants

package mutant

// Enabled reports whether this build can switch a mutant on: false
// without the foreman_mutants tag.
const Enabled = false

// Active reports whether mutant m is switched on: never, without the
// foreman_mutants tag. The call is inlined and the code it guards removed.
func Active(Name) bool { return false }
