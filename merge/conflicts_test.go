package merge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func lines(s ...string) string { return strings.Join(s, "\n") + "\n" }

func TestParseHunks(t *testing.T) {
	t.Parallel()
	one := lines("1", "2", "3", "<<<<<<< HEAD", "two-A", "=======", "two-B", ">>>>>>> 1234abc (B: two)", "4", "5", "6")
	cases := []struct {
		name    string
		content string
		ctx     int
		budget  int
		want    []Hunk
		clipped bool
	}{
		{"no markers", "plain\ntext\n", 3, 1000, nil, false},
		{"one hunk with context", one, 2, 1000, []Hunk{{Line: 2, Before: []string{"2", "3"}, Target: []string{"two-A"},
			Item: []string{"two-B"}, Label: "1234abc (B: two)", After: []string{"4", "5"}}}, false},
		{"context at the file's edges", one, 9, 1000, []Hunk{{Line: 1, Before: []string{"1", "2", "3"}, Target: []string{"two-A"},
			Item: []string{"two-B"}, Label: "1234abc (B: two)", After: []string{"4", "5", "6"}}}, false},
		{"diff3: the base too, and empty sides", lines("<<<<<<< HEAD", "||||||| parent of 1234abc", "base", "=======", ">>>>>>> 1234abc"), 3, 1000,
			[]Hunk{{Line: 1, Target: []string{}, Base: []string{"base"}, Item: []string{}, Label: "1234abc"}}, false},
		{"two hunks close together share no line", lines("<<<<<<< HEAD", "a", "=======", "b", ">>>>>>> c", "mid", "<<<<<<< HEAD", "x", "=======", "y", ">>>>>>> c", "end"), 3, 1000,
			[]Hunk{
				{Line: 1, Target: []string{"a"}, Item: []string{"b"}, Label: "c", After: []string{"mid"}},
				{Line: 7, Target: []string{"x"}, Item: []string{"y"}, Label: "c", After: []string{"end"}},
			}, false},
		{"an opening marker git did not close", lines("<<<<<<< not a conflict", "text"), 3, 1000, nil, false},
		{"a marker-like line inside a side is content", lines("<<<<<<< HEAD", "a", "=======", "=======", ">>>>>>> c"), 0, 1000,
			[]Hunk{{Line: 1, Target: []string{"a"}, Item: []string{"======="}, Label: "c"}}, false},
		{"invalid UTF-8 made valid", lines("<<<<<<< HEAD", "a\xff", "=======", "b", ">>>>>>> c"), 0, 1000,
			[]Hunk{{Line: 1, Target: []string{"a\uFFFD"}, Item: []string{"b"}, Label: "c"}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, clipped := parseHunks(c.content, c.ctx, c.budget)
			assert.Equal(t, c.want, got)
			assert.Equal(t, c.clipped, clipped)
			for i := 1; i < len(got); i++ {
				assert.LessOrEqual(t, got[i-1].End(), got[i].Line, "hunk %d starts after hunk %d ends", i, i-1)
			}
		})
	}
	hs, _ := parseHunks(lines("<<<<<<< HEAD", "a", "=======", "b", ">>>>>>> c", "mid", "<<<<<<< HEAD", "x", "=======", "y", ">>>>>>> c"), 3, 1000)
	assert.Equal(t, hs[1].Line, hs[0].End(), "End names the next hunk's line when it follows directly")
}

func TestParseHunksKeepsBothSidesWithinItsBudget(t *testing.T) {
	t.Parallel()
	big := lines("ctx", "<<<<<<< HEAD") + strings.Repeat("a line of main\n", 500) + lines("=======", "mine", ">>>>>>> c", "after")
	hs, clipped := parseHunks(big, 3, 300)
	assert.True(t, clipped)
	require.Len(t, hs, 1)
	assert.LessOrEqual(t, hunkSize(hs[0]), 300)
	assert.Equal(t, []string{"mine"}, hs[0].Item, "the item's side survives a huge target side")
	assert.NotEmpty(t, hs[0].Target)
	assert.Empty(t, hs[0].Before, "context goes first")
	assert.Equal(t, 2, hs[0].Line, "the opening marker's line")

	long := lines("<<<<<<< HEAD", strings.Repeat("é", 400), "=======", "b", ">>>>>>> c")
	hs, clipped = parseHunks(long, 0, 200)
	assert.True(t, clipped)
	require.Len(t, hs, 1)
	assert.Less(t, len(hs[0].Target[0]), 200, "a long line is cut")
	assert.True(t, strings.HasPrefix(hs[0].Target[0], "éé"))

	// The hunks after the budget are left out.
	two := lines("<<<<<<< HEAD", "a", "=======", "b", ">>>>>>> c", "<<<<<<< HEAD", "x", "=======", "y", ">>>>>>> c")
	hs, clipped = parseHunks(two, 0, 40)
	assert.True(t, clipped)
	require.Len(t, hs, 1)
	assert.Equal(t, []string{"a"}, hs[0].Target)

	hs, clipped = parseHunks(two, 0, 5)
	assert.True(t, clipped)
	assert.Empty(t, hs, "not even the markers fit")
}

func TestReadConflictsReadsOnlyPlainFilesWithinBounds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conflict := lines("<<<<<<< HEAD", "a", "=======", "b", ">>>>>>> c")
	secret := filepath.Join(t.TempDir(), "secret")
	writeFile(t, dir, "f1", conflict)
	writeFile(t, dir, "sub/f2", conflict)
	writeFile(t, dir, "f3", conflict)
	require.NoError(t, os.WriteFile(secret, []byte(conflict), 0o600))
	require.NoError(t, os.Symlink(secret, filepath.Join(dir, "link")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "adir"), 0o755))

	b := conflictBounds{context: 3, files: 8, fileBytes: 1000, bytes: 1000}
	got := readConflicts(dir, []string{"f1", "link", "adir", "gone", "sub/f2"}, b)
	require.Len(t, got, 5)
	assert.Len(t, got[0].Hunks, 1)
	assert.Equal(t, ConflictFile{Path: "link"}, got[1], "a symbolic link is not followed")
	assert.Equal(t, ConflictFile{Path: "adir"}, got[2])
	assert.Equal(t, ConflictFile{Path: "gone", Missing: true}, got[3])
	assert.Len(t, got[4].Hunks, 1)

	b.files = 2
	assert.Len(t, readConflicts(dir, []string{"f1", "sub/f2", "f3"}, b), 2, "MaxFiles")
	size := hunkSize(got[0].Hunks[0])
	b = conflictBounds{context: 3, files: 8, fileBytes: 1000, bytes: 2*size + 1}
	got = readConflicts(dir, []string{"f1", "sub/f2", "f3"}, b)
	require.Len(t, got, 3, "the third file is read with what is left")
	assert.Empty(t, got[2].Hunks)
	assert.True(t, got[2].Clipped)
	b.bytes = 2 * size
	assert.Len(t, readConflicts(dir, []string{"f1", "sub/f2", "f3"}, b), 2, "MaxBytes spent: no more files")
}
