//go:build foreman_mutants

package mutant

import "os"

// Enabled reports whether this build can switch a mutant on: true with
// the foreman_mutants tag.
const Enabled = true

// Active reports whether mutant m is switched on: whether the environment
// variable FOREMAN_MUTANT names it.
func Active(m Name) bool { return os.Getenv(Env) == string(m) }
