package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// binary is the foreman command the tests run as a user does (signals
// need a real process): a link named foreman to this test binary, which
// TestMain runs as the reference binary when it is started by that name.
// Linking the real command took a 33 MB link (about 4 s) per go test run.
// Under the race detector the command is built as before, without it: a
// race-instrumented foreman in every chaos run would be several times
// slower in CI. With FOREMAN_RACE_BINARY=1 the command is built with -race
// instead (CI's race chaos step), and the process tests fail on any data
// race a foreman process reports (raceReports).
var binary string

const (
	binaryName = "foreman"
	// envRaceBinary builds the reference binary with -race.
	envRaceBinary = "FOREMAN_RACE_BINARY"
)

func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == binaryName {
		main() // exits
	}
	dir, err := os.MkdirTemp("", "foreman-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, binaryName)
	if err := makeBinary(binary); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// makeBinary puts the reference binary at path: a link to this test binary,
// or under the race detector a real build without it, or with
// FOREMAN_RACE_BINARY=1 a real build with it.
func makeBinary(path string) error {
	race := os.Getenv(envRaceBinary)
	if race != "" && race != "0" && race != "1" {
		return fmt.Errorf("%s=%q: 1 builds the foreman binary with -race, 0 or nothing without", envRaceBinary, race)
	}
	if race != "1" && !raceDetector() {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		return os.Symlink(self, path)
	}
	args := []string{"build", "-o", path}
	if race == "1" {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		return fmt.Errorf("building foreman (go %s): %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// raceReports returns the data race reports in a foreman process's output
// (a race-instrumented binary prints them when it finds a race, also in a
// process that is killed later), "" when there is none.
func raceReports(output string) string {
	i := strings.Index(output, "WARNING: DATA RACE")
	if i < 0 {
		return ""
	}
	return output[i:]
}

// raceDetector reports whether this test binary was built with -race.
func raceDetector() bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}
