package merge

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A squash that adds or changes a symbolic link pointing outside the
// repository (absolute, or climbing above its root) is refused: whatever
// reads it would read what it points at. Links inside the repository
// merge as before.
func TestMergeRefusesALinkThatPointsOutsideTheRepository(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name, path, target string
		refused            bool
	}{
		{"absolute, to a secret", "notes.txt", "/root/.netrc", true},
		{"climbing out", "docs/secret", "../../../etc/shadow", true},
		{"to the repository's parent", "up", "..", true},
		{"inside, relative", "docs/readme", "../README.md", false},
		{"inside, beside it", "a/b", "c", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			repo := newRepo(t, nil)
			m := newManager(t, repo, nil)
			wt := create(t, m, "links")
			writeFile(t, wt.Path, "ok.txt", "fine\n")
			require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(wt.Path, tc.path)), 0o755))
			require.NoError(t, os.Symlink(tc.target, filepath.Join(wt.Path, tc.path)))
			git(t, wt.Path, "add", "-A")
			git(t, wt.Path, "commit", "-q", "-m", "links")
			old := revParse(t, repo, "main")

			_, err := m.Merge(ctx, "links", Request{Title: "t"})
			if !tc.refused {
				require.NoError(t, err)
				assert.NotEqual(t, old, revParse(t, repo, "main"))
				return
			}
			var lerr *LinkOutsideError
			require.ErrorAs(t, err, &lerr)
			assert.ErrorIs(t, err, ErrLinkOutside)
			assert.Equal(t, []string{tc.path + " -> " + tc.target}, lerr.Links)
			assert.Contains(t, err.Error(), "nothing was merged")
			assert.Equal(t, old, revParse(t, repo, "main"), "main did not move")
		})
	}
}

func TestLinkOutside(t *testing.T) {
	for _, tc := range []struct {
		name, target string
		outside      bool
	}{
		{"a", "b", false}, {"a/b", "../c", false}, {"a/b", "../../c", true}, {"a", "/x", true},
		{"a", "", true}, {"a", "./b/../../c", true}, {"a/b/c", "../../d/e", false},
	} {
		assert.Equal(t, tc.outside, linkOutside(tc.name, tc.target), "%s -> %s", tc.name, tc.target)
	}
}
