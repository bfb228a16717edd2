package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"text/template"

	"github.com/agentforeman/foreman"
)

// story is one unit of work the quickstart plans. Its scripted agent is a
// shell script generated from it (scriptFor); a real agent gets Description.
type story struct {
	ID          foreman.ItemID
	Title       string
	Description string
	BlockedBy   []foreman.ItemID
	Tasks       []string
	// Implement is the shell that does Stage 2's work in the worktree: it
	// writes files; the script commits them.
	Implement string
	// FixWhen and Fix make the story's first Stage 2 attempt wrong: when
	// the prompt's feedback mentions FixWhen, Fix runs instead of Implement.
	FixWhen, Fix string
	// WaitFor makes Stage 2 wait until that story has landed on main, so
	// that two stories editing the same lines meet in a merge conflict
	// whatever the machine's speed.
	WaitFor foreman.ItemID
}

// The six stories of the demo. Their dependencies only point at earlier
// stories, so any prefix of the list is a complete plan.
//
//	US-001 Add ───► US-004 Sum ──┐
//	US-003 Mul ─┬────────────────┴─► US-006 Dot
//	            └─► US-005 Pow
//	US-002 Abs      (changes the line of calc.go US-001 changes: a merge conflict)
func demoStories(n int) []*story {
	all := []*story{
		{
			ID: "US-001", Title: "Add: the sum of two integers",
			Description: "Add func Add(a, b int) int in add.go with a test in add_test.go, and mention Add in calc.go's package comment.",
			Tasks:       []string{"write Add", "test Add", "document Add in the package comment"},
			Implement: packageDoc("Add and Sub") + goFile("add.go", `package calc

// Add returns a plus b.
func Add(a, b int) int { return a + b }
`) + goFile("add_test.go", testFile("TestAdd", "Add(2, 3)", "5")),
		},
		{
			ID: "US-002", Title: "Abs: the absolute value",
			Description: "Add func Abs(x int) int in abs.go with a test in abs_test.go, and mention Abs in calc.go's package comment.",
			Tasks:       []string{"write Abs", "test Abs", "document Abs in the package comment"},
			WaitFor:     "US-001",
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
			ID: "US-003", Title: "Mul: the product of two integers",
			Description: "Add func Mul(a, b int) int in mul.go with a test in mul_test.go.",
			Tasks:       []string{"write Mul", "test Mul"},
			Implement: goFile("mul.go", `package calc

// Mul returns a times b.
func Mul(a, b int) int { return a + b }
`) + goFile("mul_test.go", testFile("TestMul", "Mul(2, 3)", "6")),
			FixWhen: "TestMul",
			Fix: `echo "the quality gate says TestMul fails: Mul adds instead of multiplying; fixing it"
` + goFile("mul.go", `package calc

// Mul returns a times b.
func Mul(a, b int) int { return a * b }
`),
		},
		{
			ID: "US-004", Title: "Sum: the sum of a list", BlockedBy: []foreman.ItemID{"US-001"},
			Description: "Add func Sum(xs ...int) int in sum.go, built on Add, with a test in sum_test.go.",
			Tasks:       []string{"write Sum on top of Add", "test Sum"},
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
			ID: "US-005", Title: "Pow: integer powers", BlockedBy: []foreman.ItemID{"US-003"},
			Description: "Add func Pow(base, exp int) int in pow.go, built on Mul, with a test in pow_test.go.",
			Tasks:       []string{"write Pow on top of Mul", "test Pow"},
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
			ID: "US-006", Title: "Dot: the dot product", BlockedBy: []foreman.ItemID{"US-003", "US-004"},
			Description: "Add func Dot(a, b []int) int in dot.go, built on Mul and Sum, with a test in dot_test.go.",
			Tasks:       []string{"write Dot on top of Mul and Sum", "test Dot"},
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
		all = append(all, &story{
			ID: foreman.ItemID(fmt.Sprintf("US-%03d", i)), Title: fmt.Sprintf("%s: the constant %d", fn, i),
			BlockedBy:   []foreman.ItemID{"US-001"},
			Description: fmt.Sprintf("Add func %s() int returning %d in %s.go with a test.", fn, i, file),
			Tasks:       []string{"write " + fn, "test " + fn},
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

// boardJSON is the story's board file with status: what the scripted
// agent writes (FileBoard's format) and what a real agent is asked to write.
func boardJSON(s *story, status string) string {
	type entry struct {
		Title  string   `json:"title"`
		Status string   `json:"status"`
		Tasks  []string `json:"tasks"`
	}
	b, _ := json.Marshal(struct {
		Version int              `json:"version"`
		Items   map[string]entry `json:"items"`
	}{1, map[string]entry{string(s.ID): {s.Title, status, s.Tasks}}})
	return string(b)
}

var scriptTemplate = template.Must(template.New("agent").Parse(`#!/bin/sh
# Scripted agent for {{.S.ID}} ({{.S.Title}}). Foreman runs it once per stage,
# in the story's git worktree, with the prompt as $1 and the stage in
# FOREMAN_STAGE. It really edits files and commits, writes the story's board
# file ($FOREMAN_BOARD) like a planner would, and ends with the stage's
# canonical report line.
set -eu
prompt="$1"
case "$FOREMAN_STAGE" in
0)
	printf '%s\n' '{{.Backlog}}' > "$FOREMAN_BOARD.tmp" && mv "$FOREMAN_BOARD.tmp" "$FOREMAN_BOARD"
	echo "Stage 0 COMPLETE for {{.S.ID}}. {{len .S.Tasks}} tasks created. Plan score: 4/4."
	;;
1)
	test -f go.mod # the worktree holds the module the story is about
	printf '%s\n' '{{.Todo}}' > "$FOREMAN_BOARD.tmp" && mv "$FOREMAN_BOARD.tmp" "$FOREMAN_BOARD"
	echo "Stage 1 COMPLETE for {{.S.ID}}. Verdict: GO. Readiness: 8."
	;;
2)
{{- if .S.WaitFor}}
	echo "waiting for {{.S.WaitFor}} to land on main first (both stories change calc.go's first line)"
	i=0
	until git log main --format=%B | grep -qx 'Foreman-Item: {{.S.WaitFor}}'; do
		i=$((i + 1))
		if [ "$i" -ge 1200 ]; then echo "{{.S.WaitFor}} has not landed; going ahead"; break; fi
		sleep 0.1
	done
{{- end}}
{{- if .S.FixWhen}}
	if printf '%s\n' "$prompt" | grep '^Previous round:' | grep -q '{{.S.FixWhen}}'; then
{{.S.Fix}}		git commit -qam "{{.S.ID}}: fix after the quality gate's feedback"
	else
{{.S.Implement}}		git add -A && git commit -qm "{{.S.ID}}: {{.S.Title}}"
	fi
{{- else}}
{{.S.Implement}}	git add -A && git commit -qm "{{.S.ID}}: {{.S.Title}}"
{{- end}}
	printf '%s\n' '{{.Review}}' > "$FOREMAN_BOARD.tmp" && mv "$FOREMAN_BOARD.tmp" "$FOREMAN_BOARD"
	echo "Stage 2 COMPLETE for {{.S.ID}}. All tasks Done. Story set to To Review."
	;;
*)
	echo "Stage $FOREMAN_STAGE ERROR for {{.S.ID}}: this script has no stage $FOREMAN_STAGE"
	exit 1
	;;
esac
`))

// scriptFor renders a story's scripted agent.
func scriptFor(s *story) (string, error) {
	var b bytes.Buffer
	err := scriptTemplate.Execute(&b, struct {
		S                     *story
		Backlog, Todo, Review string
	}{s, boardJSON(s, "Backlog"), boardJSON(s, "Todo"), boardJSON(s, "To Review")})
	return b.String(), err
}
