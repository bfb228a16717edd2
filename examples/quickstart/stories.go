package main

import (
	"fmt"
	"strings"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/team"
)

// story is one of the demo's stories: what the team is asked (Story) and
// what the scripted agent does about it in the build stage.
type story struct {
	team.Story
	// Tasks are what the scripted planner reports.
	Tasks []string
	// Implement is the shell that does the build in the story's worktree:
	// it writes files; the script commits them.
	Implement string
	// FixWhen and Fix make the first build wrong: once the prompt carries
	// the gates' feedback mentioning FixWhen, Fix runs instead of Implement.
	FixWhen, Fix string
	// WaitFor makes the build wait until that story has landed on main, so
	// that two stories changing the same line meet in a merge conflict
	// whatever the machine's speed.
	WaitFor foreman.ItemID
	// OnConflict is what the agent does when the team gives the story
	// back with a merge conflict to resolve (its prompt then has the
	// files and both sides); it commits what it wrote.
	OnConflict string
}

// The six stories of the demo. Their dependencies only point at earlier
// stories, so any prefix of the list is a complete plan.
//
//	US-001 Add ───► US-004 Sum ──┐
//	US-003 Mul ─┬────────────────┴─► US-006 Dot
//	            └─► US-005 Pow
//	US-002 Abs      (changes the line of calc.go US-001 changes: a merge conflict
//	                 that a rebase cannot clear; its agent keeps its own line)
func demoStories(n int) []story {
	after := func(ids ...foreman.ItemID) []foreman.ItemID { return ids }
	all := []story{
		{
			Story: team.Story{ID: "US-001", Title: "Add: the sum of two integers",
				Body: "Add func Add(a, b int) int in add.go with a test in add_test.go, and mention Add in calc.go's package comment."},
			Tasks: []string{"write Add", "test Add", "document Add in the package comment"},
			Implement: packageDoc("Add and Sub") + goFile("add.go", `package calc

// Add returns a plus b.
func Add(a, b int) int { return a + b }
`) + goFile("add_test.go", testFile("TestAdd", "Add(2, 3)", "5")),
		},
		{
			Story: team.Story{ID: "US-002", Title: "Abs: the absolute value",
				Body: "Add func Abs(x int) int in abs.go with a test in abs_test.go, and mention Abs in calc.go's package comment."},
			Tasks:   []string{"write Abs", "test Abs", "document Abs in the package comment"},
			WaitFor: "US-001",
			// A scripted agent does not merge wording: it keeps its own
			// package comment, so the conflict waits for a person.
			OnConflict: `echo "given the merge conflict in calc.go back; keeping this story's own package comment"
` + packageDoc("Abs and Sub"),
			Implement: packageDoc("Sub and Abs") + goFile("abs.go", `package calc

// Abs returns the absolute value of x.
func Abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
`) + goFile("abs_test.go", testFile("TestAbs", "Abs(-7)", "7")),
		},
		{
			Story: team.Story{ID: "US-003", Title: "Mul: the product of two integers",
				Body: "Add func Mul(a, b int) int in mul.go with a test in mul_test.go."},
			Tasks: []string{"write Mul", "test Mul"},
			Implement: goFile("mul.go", `package calc

// Mul returns a times b.
func Mul(a, b int) int { return a + b }
`) + goFile("mul_test.go", testFile("TestMul", "Mul(2, 3)", "6")),
			FixWhen: "FAIL: TestMul",
			Fix: `echo "the gates say TestMul fails: Mul adds instead of multiplying; fixing it"
` + goFile("mul.go", `package calc

// Mul returns a times b.
func Mul(a, b int) int { return a * b }
`),
		},
		{
			Story: team.Story{ID: "US-004", Title: "Sum: the sum of a list", After: after("US-001"),
				Body: "Add func Sum(xs ...int) int in sum.go, built on Add, with a test in sum_test.go."},
			Tasks: []string{"write Sum on top of Add", "test Sum"},
			Implement: goFile("sum.go", `package calc

// Sum returns the sum of xs.
func Sum(xs ...int) int {
	total := 0
	for _, x := range xs {
		total = Add(total, x)
	}
	return total
}
`) + goFile("sum_test.go", testFile("TestSum", "Sum(1, 2, 3, 4)", "10")),
		},
		{
			Story: team.Story{ID: "US-005", Title: "Pow: integer powers", After: after("US-003"),
				Body: "Add func Pow(base, exp int) int in pow.go, built on Mul, with a test in pow_test.go."},
			Tasks: []string{"write Pow on top of Mul", "test Pow"},
			Implement: goFile("pow.go", `package calc

// Pow returns base raised to exp (exp >= 0).
func Pow(base, exp int) int {
	result := 1
	for i := 0; i < exp; i++ {
		result = Mul(result, base)
	}
	return result
}
`) + goFile("pow_test.go", testFile("TestPow", "Pow(2, 10)", "1024")),
		},
		{
			Story: team.Story{ID: "US-006", Title: "Dot: the dot product", After: after("US-003", "US-004"),
				Body: "Add func Dot(a, b []int) int in dot.go, built on Mul and Sum, with a test in dot_test.go."},
			Tasks: []string{"write Dot on top of Mul and Sum", "test Dot"},
			Implement: goFile("dot.go", `package calc

// Dot returns the dot product of a and b, which have the same length.
func Dot(a, b []int) int {
	products := make([]int, len(a))
	for i := range a {
		products[i] = Mul(a[i], b[i])
	}
	return Sum(products...)
}
`) + goFile("dot_test.go", testFile("TestDot", "Dot([]int{1, 2, 3}, []int{4, 5, 6})", "32")),
		},
	}
	if n <= len(all) {
		return all[:n]
	}
	// More stories than the six: constants, each on top of Add.
	for i := len(all) + 1; i <= n; i++ {
		fn := fmt.Sprintf("C%d", i)
		file := strings.ToLower(fn)
		all = append(all, story{
			Story: team.Story{ID: foreman.ItemID(fmt.Sprintf("US-%03d", i)), Title: fmt.Sprintf("%s: the constant %d", fn, i),
				After: after("US-001"), Body: fmt.Sprintf("Add func %s() int returning %d in %s.go with a test.", fn, i, file)},
			Tasks: []string{"write " + fn, "test " + fn},
			Implement: goFile(file+".go", fmt.Sprintf("package calc\n\n// %s returns %d.\nfunc %s() int { return Add(%d, 0) }\n", fn, i, fn, i)) +
				goFile(file+"_test.go", testFile("Test"+fn, fn+"()", fmt.Sprint(i))),
		})
	}
	return all
}

// goFile is shell that writes a file verbatim.
func goFile(name, body string) string {
	return fmt.Sprintf("cat > %s <<'GO'\n%sGO\n", name, body)
}

// packageDoc rewrites calc.go with a package comment naming its functions:
// the line two stories both change.
func packageDoc(names string) string {
	return goFile("calc.go", fmt.Sprintf(`// Package calc does integer arithmetic: %s.
package calc

// Sub returns a minus b.
func Sub(a, b int) int { return a - b }
`, names))
}

func testFile(name, call, want string) string {
	return fmt.Sprintf(`package calc

import "testing"

func %s(t *testing.T) {
	if got := %s; got != %s {
		t.Fatalf("%s = %%d, want %s", got)
	}
}
`, name, call, want, strings.ReplaceAll(call, `"`, `\"`), want)
}

// agentScript is the scripted agent: one shell script for every story and
// stage. The team runs it in the story's worktree with the prompt as $1 and
// FOREMAN_ITEM, FOREMAN_STAGE (0 plan, 1 validate, 2 build; the quality
// gate runs no agent), FOREMAN_ASSIGNMENT and FOREMAN_RESULT in its
// environment; it reports by writing a team.Report to $FOREMAN_RESULT.
func agentScript(stories []story) string {
	var b strings.Builder
	b.WriteString(`#!/bin/sh
set -eu
prompt="$1"
report() { # outcome, more JSON fields
	printf '{"assignment": "%s", "outcome": "%s"%s}\n' "$FOREMAN_ASSIGNMENT" "$1" "${2:-}" > "$FOREMAN_RESULT"
}
case "$FOREMAN_STAGE.$FOREMAN_ITEM" in
1.*) test -f go.mod && report go ', "score": 8' ;;
`)
	for _, s := range stories {
		fmt.Fprintf(&b, "0.%s) report complete ', \"tasks\": %d, \"score\": 4, \"summary\": \"%s\"' ;;\n", s.ID, len(s.Tasks), strings.Join(s.Tasks, "; "))
		fmt.Fprintf(&b, "2.%s)\n", s.ID)
		if s.OnConflict != "" {
			fmt.Fprintf(&b, "\tif printf '%%s\\n' \"$prompt\" | grep -q '^## The merge conflict to resolve'; then\n%s"+
				"\tgit commit -qam '%s: keep my package comment'\n\treport complete ', \"summary\": \"kept my package comment\"'\n\texit 0\n\tfi\n",
				s.OnConflict, s.ID)
		}
		if s.WaitFor != "" {
			fmt.Fprintf(&b, `	echo "waiting for %[1]s to land on main first (both stories change calc.go's first line)"
	i=0
	until git log main --format=%%B | grep -qx 'Foreman-Item: %[1]s'; do
		i=$((i + 1)); [ "$i" -lt 1200 ] || break
		sleep 0.1
	done
`, s.WaitFor)
		}
		if s.FixWhen != "" {
			fmt.Fprintf(&b, "\tif printf '%%s\\n' \"$prompt\" | grep -q '%s'; then\n%s\tgit commit -qam '%s: fix after the gates'\"'\"' feedback'\n\telse\n", s.FixWhen, s.Fix, s.ID)
		}
		fmt.Fprintf(&b, "%s\tgit add -A && git commit -qm '%s: %s'\n", s.Implement, s.ID, s.Title)
		if s.FixWhen != "" {
			b.WriteString("\tfi\n")
		}
		fmt.Fprintf(&b, "\treport complete ', \"summary\": \"implemented %s with a test\"' ;;\n", s.ID)
	}
	b.WriteString(`*) echo "no script for stage $FOREMAN_STAGE of $FOREMAN_ITEM" >&2; exit 1 ;;
esac
`)
	return b.String()
}
