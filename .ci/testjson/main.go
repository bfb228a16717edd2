// Command testjson reads `go test -json` on stdin and holds a test run to
// its promises: it prints the output of every failed test, a closing line
// "N passed, N failed, N skipped", and exits non-zero when any test failed,
// when a test skipped that is not on the allowed list (-allow FILE: one
// regular expression a line matched against "package TestName", # starts a
// comment that should say why), or when fewer than -min tests passed. CI
// runs every suite step through it, so that a test that cannot run (a
// missing PostgreSQL, browser, agent CLI or bubblewrap) fails the run
// instead of passing silently.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

type allowRule struct {
	re   *regexp.Regexp
	text string
}

func main() {
	allowFile := flag.String("allow", "", "file of skips allowed (regexps over \"package TestName\")")
	minPassed := flag.Int("min", 1, "fewest passing tests the run must have")
	echo := flag.Bool("v", false, "print every test's output, not only failures'")
	flag.Parse()
	rules, err := readAllow(*allowFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testjson:", err)
		os.Exit(2)
	}
	os.Exit(check(os.Stdin, os.Stdout, rules, *minPassed, *echo))
}

func readAllow(path string) ([]allowRule, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rules []allowRule
	for i, line := range strings.Split(string(data), "\n") {
		if j := strings.Index(line, "#"); j >= 0 {
			line = line[:j]
		}
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		re, err := regexp.Compile(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, i+1, err)
		}
		rules = append(rules, allowRule{re: re, text: line})
	}
	return rules, nil
}

func check(in io.Reader, out io.Writer, rules []allowRule, minPassed int, echo bool) int {
	output := map[string]*strings.Builder{}
	var passed, failed, skipped int
	var failures, badSkips []string
	pkgFailed := map[string]bool{}
	buildFailed := false
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			// go test prints build failures as plain text.
			fmt.Fprintln(out, sc.Text())
			continue
		}
		key := ev.Package + " " + ev.Test
		switch ev.Action {
		case "build-output":
			fmt.Fprint(out, ev.Output)
		case "build-fail":
			buildFailed = true
		case "output":
			b := output[key]
			if b == nil {
				b = &strings.Builder{}
				output[key] = b
			}
			b.WriteString(ev.Output)
			if echo {
				fmt.Fprint(out, ev.Output)
			}
		case "pass":
			if ev.Test != "" {
				passed++
			}
			delete(output, key)
		case "skip":
			if ev.Test == "" {
				delete(output, key)
				continue // a package without tests
			}
			skipped++
			if !allowed(rules, key) {
				reason := ""
				if b := output[key]; b != nil {
					reason = lastLines(b.String(), 3)
				}
				badSkips = append(badSkips, key+": "+reason)
			}
			delete(output, key)
		case "fail":
			if ev.Test == "" {
				pkgFailed[ev.Package] = true
			} else {
				failed++
			}
			failures = append(failures, key)
			if b := output[key]; b != nil && !echo {
				fmt.Fprintf(out, "--- FAIL %s\n%s\n", key, b.String())
			}
			delete(output, key)
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(out, "testjson: reading the test output:", err)
		return 1
	}
	status := 0
	sort.Strings(badSkips)
	for _, s := range badSkips {
		fmt.Fprintln(out, "SKIPPED, not on the allowed list:", s)
		status = 1
	}
	if len(failures) > 0 {
		fmt.Fprintln(out, "failed:", strings.Join(failures, ", "))
		status = 1
	}
	if buildFailed {
		fmt.Fprintln(out, "a package failed to build")
		status = 1
	}
	if len(pkgFailed) > 0 && failed == 0 {
		status = 1 // a package that failed to build or panicked outside a test
	}
	if passed < minPassed {
		fmt.Fprintf(out, "only %d tests passed; this step needs at least %d\n", passed, minPassed)
		status = 1
	}
	fmt.Fprintf(out, "%d passed, %d failed, %d skipped\n", passed, failed, skipped)
	return status
}

func allowed(rules []allowRule, key string) bool {
	for _, r := range rules {
		if r.re.MatchString(key) {
			return true
		}
	}
	return false
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, " | ")
}
