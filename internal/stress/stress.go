package stress

import "os"

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
