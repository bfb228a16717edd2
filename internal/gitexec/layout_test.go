package gitexec

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testGit runs git with no machine configuration and a fixed identity.
func testGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	r := Runner{Env: []string{"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1"}}
	out, err := r.Run(context.Background(), dir, args...)
	require.NoError(t, err)
	return strings.TrimSpace(out)
}

// newRepo makes a repository with one commit on main under a fresh
// directory and returns the directory holding it and the repository.
func newRepo(t testing.TB) (string, string) {
	t.Helper()
	base := t.TempDir()
	repo := filepath.Join(base, "repo")
	require.NoError(t, os.Mkdir(repo, 0o755))
	testGit(t, repo, "init", "-q", "-b", "main")
	require.NoError(t, os.WriteFile(filepath.Join(repo, "f.txt"), []byte("x\n"), 0o644))
	testGit(t, repo, "add", "f.txt")
	testGit(t, repo, "commit", "-q", "-m", "first")
	return base, repo
}

// gitLayout is git's own answer for dir.
func gitLayout(t *testing.T, dir string) Layout {
	t.Helper()
	lines := SplitLines(testGit(t, dir, "rev-parse", "--path-format=absolute", "--git-common-dir", "--git-dir", "--show-toplevel"))
	require.Len(t, lines, 3)
	return Layout{CommonDir: lines[0], GitDir: lines[1], TopLevel: lines[2]}
}

func TestReadLayoutAgreesWithGit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, base, repo string) string // returns the directory to read
	}{
		{"main worktree", func(t *testing.T, base, repo string) string { return repo }},
		{"main worktree through a symbolic link", func(t *testing.T, base, repo string) string {
			link := filepath.Join(base, "link")
			require.NoError(t, os.Symlink(repo, link))
			return link
		}},
		{"linked worktree", func(t *testing.T, base, repo string) string {
			wt := filepath.Join(base, "wt")
			testGit(t, repo, "worktree", "add", "-q", "-b", "side", wt)
			return wt
		}},
		{"separate git directory", func(t *testing.T, base, repo string) string {
			dir := filepath.Join(base, "sep")
			testGit(t, base, "init", "-q", "-b", "main", "--separate-git-dir", filepath.Join(base, "sep.git"), dir)
			return dir
		}},
		{"relative gitdir file", func(t *testing.T, base, repo string) string {
			dir := filepath.Join(base, "rel")
			testGit(t, base, "init", "-q", "-b", "main", "--separate-git-dir", filepath.Join(base, "rel.git"), dir)
			require.NoError(t, os.WriteFile(filepath.Join(dir, ".git"), []byte("gitdir: ../rel.git\n"), 0o644))
			return dir
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base, repo := newRepo(t)
			dir := tt.setup(t, base, repo)
			got, ok := ReadLayout(dir, nil)
			require.True(t, ok)
			assert.Equal(t, gitLayout(t, dir), got)
		})
	}
}

func TestReadLayoutLeavesUnusualLayoutsToGit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		env   []string
		setup func(t *testing.T, base, repo string) string
	}{
		{"subdirectory", nil, func(t *testing.T, base, repo string) string {
			sub := filepath.Join(repo, "sub")
			require.NoError(t, os.Mkdir(sub, 0o755))
			return sub
		}},
		{"git directory itself", nil, func(t *testing.T, base, repo string) string { return filepath.Join(repo, ".git") }},
		{"bare repository", nil, func(t *testing.T, base, repo string) string {
			bare := filepath.Join(base, "bare.git")
			testGit(t, base, "clone", "-q", "--bare", repo, bare)
			return bare
		}},
		{"not a repository", nil, func(t *testing.T, base, repo string) string { return base }},
		{"missing directory", nil, func(t *testing.T, base, repo string) string { return filepath.Join(base, "nope") }},
		{"GIT_DIR set", []string{"GIT_DIR=/elsewhere"}, func(t *testing.T, base, repo string) string { return repo }},
		{"GIT_WORK_TREE set", []string{"GIT_WORK_TREE=/elsewhere"}, func(t *testing.T, base, repo string) string { return repo }},
		{"core.worktree", nil, func(t *testing.T, base, repo string) string {
			testGit(t, repo, "config", "core.worktree", base)
			return repo
		}},
		{"core.bare", nil, func(t *testing.T, base, repo string) string {
			testGit(t, repo, "config", "core.bare", "true")
			return repo
		}},
		{"an include", nil, func(t *testing.T, base, repo string) string {
			testGit(t, repo, "config", "include.path", filepath.Join(base, "more.config"))
			return repo
		}},
		{"an extension", nil, func(t *testing.T, base, repo string) string {
			testGit(t, repo, "config", "extensions.worktreeConfig", "true")
			return repo
		}},
		{"gitdir file naming nothing", nil, func(t *testing.T, base, repo string) string {
			dir := filepath.Join(base, "broken")
			require.NoError(t, os.Mkdir(dir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, ".git"), []byte("gitdir: /nonexistent\n"), 0o644))
			return dir
		}},
		{".git file that is not a gitdir file", nil, func(t *testing.T, base, repo string) string {
			dir := filepath.Join(base, "junk")
			require.NoError(t, os.Mkdir(dir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, ".git"), []byte("hello\n"), 0o644))
			return dir
		}},
		{".git directory without objects", nil, func(t *testing.T, base, repo string) string {
			require.NoError(t, os.RemoveAll(filepath.Join(repo, ".git", "objects")))
			return repo
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base, repo := newRepo(t)
			dir := tt.setup(t, base, repo)
			_, ok := ReadLayout(dir, tt.env)
			assert.False(t, ok)
		})
	}
}

func TestReadHeadAgreesWithGit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, base, repo string) string
	}{
		{"loose branch", func(t *testing.T, base, repo string) string { return repo }},
		{"packed branch", func(t *testing.T, base, repo string) string {
			testGit(t, repo, "pack-refs", "--all")
			require.NoFileExists(t, filepath.Join(repo, ".git", "refs", "heads", "main"))
			return repo
		}},
		{"detached", func(t *testing.T, base, repo string) string {
			testGit(t, repo, "checkout", "-q", "--detach")
			return repo
		}},
		{"branch in a nested directory", func(t *testing.T, base, repo string) string {
			testGit(t, repo, "checkout", "-q", "-b", "feature/deep/name")
			return repo
		}},
		{"linked worktree", func(t *testing.T, base, repo string) string {
			wt := filepath.Join(base, "wt")
			testGit(t, repo, "worktree", "add", "-q", "-b", "side", wt)
			require.NoError(t, os.WriteFile(filepath.Join(wt, "g.txt"), []byte("y\n"), 0o644))
			testGit(t, wt, "add", "g.txt")
			testGit(t, wt, "commit", "-q", "-m", "second")
			return wt
		}},
		{"detached linked worktree", func(t *testing.T, base, repo string) string {
			wt := filepath.Join(base, "wt")
			testGit(t, repo, "worktree", "add", "-q", "--detach", wt)
			return wt
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base, repo := newRepo(t)
			dir := tt.setup(t, base, repo)
			l, ok := ReadLayout(dir, nil)
			require.True(t, ok)
			got, ok := ReadHead(l)
			require.True(t, ok)
			assert.Equal(t, testGit(t, dir, "rev-parse", "--verify", "HEAD"), got)
		})
	}
}

func TestReadHeadLeavesUnclearHeadsToGit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, repo string)
	}{
		{"unborn branch", func(t *testing.T, repo string) { testGit(t, repo, "checkout", "-q", "--orphan", "new") }},
		{"symbolic ref behind HEAD", func(t *testing.T, repo string) {
			testGit(t, repo, "symbolic-ref", "refs/heads/alias", "refs/heads/main")
			testGit(t, repo, "symbolic-ref", "HEAD", "refs/heads/alias")
		}},
		{"malformed ref file", func(t *testing.T, repo string) {
			require.NoError(t, os.WriteFile(filepath.Join(repo, ".git", "refs", "heads", "main"), []byte("not a hash\n"), 0o644))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, repo := newRepo(t)
			tt.setup(t, repo)
			l, ok := ReadLayout(repo, nil)
			require.True(t, ok)
			_, ok = ReadHead(l)
			assert.False(t, ok)
		})
	}
}

func TestReadRef(t *testing.T) {
	t.Parallel()
	base, repo := newRepo(t)
	main := testGit(t, repo, "rev-parse", "main")
	wt := filepath.Join(base, "wt")
	testGit(t, repo, "worktree", "add", "-q", "-b", "side", wt)
	testGit(t, wt, "update-ref", "refs/worktree/mine", main)
	testGit(t, repo, "update-ref", "refs/tags/v1", main)
	testGit(t, repo, "pack-refs", "--all")
	l, ok := ReadLayout(wt, nil)
	require.True(t, ok)

	tests := []struct {
		ref    string
		want   string
		wantOK bool
	}{
		{"refs/heads/main", main, true},
		{"refs/heads/side", main, true},
		{"refs/tags/v1", main, true},
		{"refs/worktree/mine", main, true},
		{"refs/heads/missing", "", false},
		{"refs/heads/../../HEAD", "", false},
		{"HEAD", "", false},
		{"main", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			t.Parallel()
			got, ok := ReadRef(l, tt.ref)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
		})
	}
	_, ok = ReadLayout(repo, nil)
	require.True(t, ok)
	_, ok = ReadRef(Layout{TopLevel: repo, GitDir: filepath.Join(repo, ".git"), CommonDir: filepath.Join(repo, ".git")}, "refs/worktree/mine")
	assert.False(t, ok, "a linked worktree's own ref is not the main worktree's")
}

func TestHasLooseObject(t *testing.T) {
	t.Parallel()
	_, repo := newRepo(t)
	l, ok := ReadLayout(repo, nil)
	require.True(t, ok)
	head, ok := ReadHead(l)
	require.True(t, ok)
	assert.True(t, HasLooseObject(l, head))
	assert.False(t, HasLooseObject(l, strings.Repeat("1", 40)), "a missing commit")
	assert.False(t, HasLooseObject(l, "../../x"), "not an object name")
	testGit(t, repo, "gc", "-q")
	assert.False(t, HasLooseObject(l, head), "packed: only git reads it")
}
