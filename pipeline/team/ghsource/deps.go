package ghsource

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
)

var (
	blockedByRE = regexp.MustCompile(`(?i)\bblocked\s+by:?\s*(#\d+(?:\s*(?:,|&|\band\b)?\s*#\d+)*)`)
	taskRE      = regexp.MustCompile(`^\s*[-*+]\s+\[( |x|X)\]\s+#(\d+)\b`)
	refRE       = regexp.MustCompile(`#(\d+)`)
)

// blockers reads the issues an issue's body says it is blocked by: "blocked
// by #N" (also "Blocked by: #3, #4 and #7") and unchecked task list items
// "- [ ] #N" (a checked one, "- [x] #N", is done). Fenced code blocks are
// skipped, and so is the issue itself. In the order written, each once.
func blockers(body string, self int) []int {
	var out []int
	add := func(s string) {
		n, err := strconv.Atoi(s)
		if err == nil && n > 0 && n != self && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	fenced := false
	for line := range strings.Lines(body) {
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if m := taskRE.FindStringSubmatch(line); m != nil {
			if m[1] == " " {
				add(m[2])
			}
			continue
		}
		for _, m := range blockedByRE.FindAllStringSubmatch(line, -1) {
			for _, r := range refRE.FindAllStringSubmatch(m[1], -1) {
				add(r[1])
			}
		}
	}
	return out
}
