package stress

import (
	"os"
	"testing"
)

// EnvVar is the environment variable that turns the full stress runs on
// (FOREMAN_STRESS=1 go test ./...).
const EnvVar = "FOREMAN_STRESS"

// Enabled reports whether EnvVar asks for the full stress runs: any value
// but empty or "0".
func Enabled() bool {
	v := os.Getenv(EnvVar)
	return v != "" && v != "0"
}

// Size returns full when the full stress runs are enabled and quick
// otherwise: a test's repetition count.
func Size(quick, full int) int {
	if Enabled() {
		return full
	}
	return quick
}

// Long skips t unless the full stress runs are enabled. It marks an
// end-to-end run whose code paths faster default tests cover too (a whole
// example program run a second way, a host killed again and again): worth
// running in CI, too slow for the test command a developer runs after every
// change.
func Long(t testing.TB) {
	t.Helper()
	if !Enabled() {
		t.Skip("long end-to-end run: " + EnvVar + "=1 runs it (CI does)")
	}
}
