package team_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline/team"
)

func TestParsePlanReadsEveryField(t *testing.T) {
	p, err := team.ParsePlan(strings.NewReader(team.PlanExample))
	require.NoError(t, err)
	require.Len(t, p.Stories, 2)
	assert.Equal(t, team.Story{ID: "US-001", Title: "Parse the config file",
		Body: "Add config.Parse(r io.Reader) (Config, error) reading the TOML\nformat in docs/config.md. Unknown keys are an error naming the line.\n"}, p.Stories[0])
	assert.Equal(t, []foreman.ItemID{"US-001"}, p.Stories[1].After)
	assert.Equal(t, 2, p.Workers)
	assert.Equal(t, phases.GatePlan{Levels: []phases.GateLevel{
		{Level: phases.L0Contracts, Checks: []phases.GateCheck{{Name: "vet", Argv: []string{"go", "vet", "./..."}}}},
		{Level: phases.L1Tests, Checks: []phases.GateCheck{{Name: "test", Argv: []string{"go", "test", "./..."},
			Timeout: 10 * time.Minute, Env: []string{"CGO_ENABLED=0"}}}},
	}}, p.UntrustedGates)
}

func TestParsePlanDefaults(t *testing.T) {
	p, err := team.ParsePlan(strings.NewReader(`
stories:
  - {id: B, title: second, after: [A]}
  - {id: A, title: first}
gates:
  - argv: [make, check]
  - {level: contracts, argv: [go, vet, ./...]}
`))
	require.NoError(t, err)
	assert.Equal(t, []team.Story{{ID: "B", Title: "second", After: []foreman.ItemID{"A"}}, {ID: "A", Title: "first"}}, p.Stories,
		"file order kept; after may name a later story")
	assert.Zero(t, p.Workers, "not set")
	require.Len(t, p.UntrustedGates.Levels, 2)
	assert.Equal(t, phases.L0Contracts, p.UntrustedGates.Levels[0].Level, "levels run in order whatever the file's order")
	assert.Equal(t, "make check", p.UntrustedGates.Levels[1].Checks[0].Name, "a gate's name defaults to its command")
	assert.Equal(t, phases.L1Tests, p.UntrustedGates.Levels[1].Level)

	p, err = team.ParsePlan(strings.NewReader("stories:\n  - {id: A, title: a}\n"))
	require.NoError(t, err)
	assert.Empty(t, p.UntrustedGates.Levels, "no gates in the file: the host's flags give them")
}

func TestAStoriesFilesGatesNeedConsent(t *testing.T) {
	p, err := team.ParsePlan(strings.NewReader(team.PlanExample))
	require.NoError(t, err)
	err = p.GatesNeedConsent()
	require.ErrorIs(t, err, team.ErrPlanGates)
	var ge *team.PlanGatesError
	require.ErrorAs(t, err, &ge)
	assert.Len(t, ge.Checks, 2)
	for _, want := range []string{`"vet" (go vet ./...)`, `"test" (go test ./...)`, "a stories file with gates is code"} {
		assert.Contains(t, err.Error(), want)
	}
	assert.False(t, errors.Is(err, team.ErrInvalidPlan), "the file is valid: the host decides")

	p, err = team.ParsePlan(strings.NewReader("stories:\n  - {id: A, title: a}\n"))
	require.NoError(t, err)
	assert.NoError(t, p.GatesNeedConsent(), "no gates, nothing to consent to")
}

func TestParsePlanRefusesBadFilesWithTheLine(t *testing.T) {
	cases := map[string]struct {
		yaml   string
		line   int
		story  foreman.ItemID
		reason string // a part of the error's text
		is     error  // also matched, besides ErrInvalidPlan
	}{
		"empty":             {"", 0, "", "empty", nil},
		"only a comment":    {"# nothing\n", 0, "", "empty", nil},
		"not a mapping":     {"- id: A\n", 1, "", "must be a mapping", nil},
		"syntax":            {"stories:\n  - id: A\n    title: x: y\n", 3, "", "mapping values are not allowed", nil},
		"tab indentation":   {"stories:\n\t- id: A\n", 2, "", "the line holds a tab: YAML indents with spaces", nil},
		"unknown top field": {"stories:\n  - {id: A, title: a}\nworker: 2\n", 3, "", `unknown field "worker" (a stories file has workers, gates, stories)`, nil},
		"unknown story field": {"stories:\n  - id: A\n    title: a\n    depends: [B]\n", 4, "",
			`unknown field "depends" (a story has id, title, body, after)`, nil},
		"unknown gate field": {"gates:\n  - argv: [x]\n    cmd: y\nstories:\n  - {id: A, title: a}\n", 3, "", `unknown field "cmd"`, nil},
		"duplicate key":      {"stories:\n  - id: A\n    title: a\n    title: b\n", 4, "", `"title" already defined at line 3`, nil},
		"wrong type":         {"workers: many\nstories:\n  - {id: A, title: a}\n", 1, "", "cannot unmarshal !!str `many` into int", nil},
		"stories not a list": {"stories: {id: A}\n", 1, "", "into a list of stories", nil},
		"bad timeout":        {"gates:\n  - {argv: [x], timeout: soon}\nstories:\n  - {id: A, title: a}\n", 2, "", "a duration", nil},
		"no stories":         {"workers: 2\nstories: []\n", 2, "", "no stories", nil},
		"stories missing":    {"workers: 2\n", 0, "", "no stories", nil},
		"empty story":        {"stories:\n  - {id: A, title: a}\n  -\n", 3, "", "story 2 is empty", nil},
		"missing title":      {"stories:\n  - id: A\n    body: b\n", 2, "A", "title is empty", team.ErrInvalidStory},
		"blank title":        {"stories:\n  - id: A\n    title: '  '\n", 3, "A", "title is empty", team.ErrInvalidStory},
		"multi-line title":   {"stories:\n  - id: A\n    title: |\n      two\n      lines\n", 3, "A", "line break", team.ErrInvalidStory},
		"missing id":         {"stories:\n  - title: a\n", 2, "", "story 1 has no id", team.ErrInvalidStory},
		"invalid id":         {"stories:\n  - id: ../etc\n    title: a\n", 2, "../etc", "invalid item id", team.ErrInvalidStory},
		"long id":            {"stories:\n  - id: " + strings.Repeat("x", 49) + "\n    title: a\n", 2, foreman.ItemID(strings.Repeat("x", 49)), "at most 48", team.ErrInvalidStory},
		"duplicate id": {"stories:\n  - id: A\n    title: a\n  - id: B\n    title: b\n  - id: A\n    title: again\n", 6, "A",
			"id already used by story 1 (line 2)", team.ErrInvalidStory},
		"after unknown":     {"stories:\n  - id: A\n    title: a\n    after: [Z]\n", 4, "A", `after names "Z", which is not a story of this file`, team.ErrInvalidStory},
		"after itself":      {"stories:\n  - id: A\n    title: a\n    after: [A]\n", 4, "A", "after itself", team.ErrInvalidStory},
		"after twice":       {"stories:\n  - {id: A, title: a}\n  - {id: B, title: b, after: [A, A]}\n", 3, "B", "listed twice", team.ErrInvalidStory},
		"cycle":             {"stories:\n  - {id: A, title: a, after: [C]}\n  - {id: B, title: b, after: [A]}\n  - {id: C, title: c, after: [B]}\n", 2, "A", "dependency cycle: A after C after B after A", team.ErrInvalidStory},
		"gate without argv": {"gates:\n  - name: test\nstories:\n  - {id: A, title: a}\n", 2, "", "gate 1: argv is empty", nil},
		"gate blank argv":   {"gates:\n  - argv: ['']\nstories:\n  - {id: A, title: a}\n", 2, "", "argv is empty", nil},
		"gate level":        {"gates:\n  - {argv: [x], level: L9}\nstories:\n  - {id: A, title: a}\n", 2, "", `level "L9" is not one of`, nil},
		"gate env":          {"gates:\n  - {argv: [x], env: [NOVALUE]}\nstories:\n  - {id: A, title: a}\n", 2, "", `"NOVALUE" is not KEY=VALUE`, nil},
		"gate negative":     {"gates:\n  - {argv: [x], timeout: -1s}\nstories:\n  - {id: A, title: a}\n", 2, "", "negative", nil},
		"gate names clash":  {"gates:\n  - {argv: [x]}\n  - {argv: [y], name: x}\nstories:\n  - {id: A, title: a}\n", 3, "", `name "x" already used by gate 1`, nil},
		"zero workers":      {"workers: 0\nstories:\n  - {id: A, title: a}\n", 1, "", "workers is 0", nil},
		"second document":   {"stories:\n  - {id: A, title: a}\n---\nstories: []\n", 3, "", "second YAML document", nil},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := team.ParsePlan(strings.NewReader(c.yaml))
			require.Error(t, err)
			assert.ErrorIs(t, err, team.ErrInvalidPlan)
			if c.is != nil {
				assert.ErrorIs(t, err, c.is)
			}
			var pe *team.PlanError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, c.line, pe.Line, err.Error())
			assert.Equal(t, c.story, pe.Story, err.Error())
			assert.Contains(t, err.Error(), c.reason)
			assert.NotContains(t, err.Error(), "team.", "Go type names stay out of the message")
		})
	}
}

func TestParsePlanCycleNamesItsStories(t *testing.T) {
	_, err := team.ParsePlan(strings.NewReader("stories:\n  - {id: A, title: a, after: [B]}\n  - {id: B, title: b, after: [A]}\n"))
	var pe *team.PlanError
	require.ErrorAs(t, err, &pe)
	assert.Contains(t, []foreman.ItemID{"A", "B"}, pe.Story)
	assert.Contains(t, []int{2, 3}, pe.Line, "the line of a story in the cycle")
	assert.Regexp(t, `dependency cycle: (A after B after A|B after A after B)`, err.Error())
}

func TestLoadPlanNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "stories.yaml")
	require.NoError(t, os.WriteFile(path, []byte("stories:\n  - id: A\n"), 0o644))
	_, err := team.LoadPlan(path)
	require.Error(t, err)
	assert.Equal(t, `team: plan `+path+`, line 2, story "A": title is empty`, err.Error())

	_, err = team.LoadPlan(filepath.Join(dir, "missing.yaml"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.False(t, errors.Is(err, team.ErrInvalidPlan))

	require.NoError(t, os.WriteFile(path, []byte(team.PlanExample), 0o644))
	p, err := team.LoadPlan(path)
	require.NoError(t, err)
	assert.Len(t, p.Stories, 2)
}

func TestParsePlanRefusesAHugeFile(t *testing.T) {
	big := "stories:\n  - id: A\n    title: a\n    body: " + strings.Repeat("x", team.MaxPlanBytes) + "\n"
	_, err := team.ParsePlan(strings.NewReader(big))
	assert.ErrorIs(t, err, team.ErrInvalidPlan)
	assert.Contains(t, err.Error(), "larger than")
}

// A parsed plan is one Add takes whole: ParsePlan checks what Add checks.
func TestAParsedPlanIsAddedWhole(t *testing.T) {
	p, err := team.ParsePlan(strings.NewReader(team.PlanExample))
	require.NoError(t, err)
	f := newFixture(t)
	tm := f.newTeam(t)
	require.NoError(t, tm.Add(t.Context(), p.Stories...))
	assert.Equal(t, p.Stories, tm.Stories())
	require.NoError(t, tm.Add(t.Context(), p.Stories...), "the same file again adds nothing")
}
