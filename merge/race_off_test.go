//go:build !race

package merge

// raceEnabled reports that the tests run under the race detector.
const raceEnabled = false
