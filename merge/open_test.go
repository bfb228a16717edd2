package merge

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// New reads the repository from git's files where their layout is plain
// and asks git elsewhere; either way it finds what git rev-parse finds and
// refuses a branch git show-ref refuses.
func TestNewFindsTheRepositoryAsGitDoes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		setup   func(t *testing.T, repo string) (dir string, env []string)
		wantErr error // nil: opens
	}{
		{"main worktree", func(t *testing.T, repo string) (string, []string) { return repo, nil }, nil},
		{"linked worktree", func(t *testing.T, repo string) (string, []string) {
			wt := filepath.Join(t.TempDir(), "wt")
			git(t, repo, "worktree", "add", "-q", "-b", "side", wt)
			return wt, nil
		}, nil},
		{"subdirectory, read by git", func(t *testing.T, repo string) (string, []string) {
			sub := filepath.Join(repo, "sub")
			require.NoError(t, os.Mkdir(sub, 0o755))
			return sub, nil
		}, nil},
		{"packed refs and objects, read by git", func(t *testing.T, repo string) (string, []string) {
			git(t, repo, "gc", "-q")
			return repo, nil
		}, nil},
		{"GIT_DIR set, read by git", func(t *testing.T, repo string) (string, []string) {
			return repo, []string{"GIT_DIR=" + filepath.Join(repo, ".git")}
		}, nil},
		{"a branch whose commit is missing", func(t *testing.T, repo string) (string, []string) {
			require.NoError(t, os.WriteFile(filepath.Join(repo, ".git", "refs", "heads", "main"),
				[]byte(strings.Repeat("1", 40)+"\n"), 0o644))
			return repo, nil
		}, ErrUnknownBranch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			repo := newRepo(t, nil)
			dir, env := tt.setup(t, repo)
			m, err := New(context.Background(), Config{Repo: dir, GitEnv: env})
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			lines := strings.Split(git(t, dir, "rev-parse", "--path-format=absolute", "--git-common-dir", "--show-toplevel"), "\n")
			require.Len(t, lines, 2)
			assert.Equal(t, lines[0], m.commonDir)
			assert.Equal(t, lines[1], m.topDir)
			assert.Equal(t, filepath.Dir(lines[0]), m.mainDir)
		})
	}
}

// A branch prefix is checked by git's rules in process; one those rules
// refuse is refused with git's own message.
func TestNewRefusesABadBranchPrefixWithGitsMessage(t *testing.T) {
	t.Parallel()
	repo := newRepo(t, nil)
	for _, prefix := range []string{"bad..prefix", "a b", "x.lock", "-x"} {
		_, err := New(context.Background(), Config{Repo: repo, BranchPrefix: prefix})
		require.Error(t, err, prefix)
		assert.ErrorContains(t, err, "BranchPrefix")
		if prefix != "-x" {
			assert.ErrorContains(t, err, "not a valid branch name", prefix)
		}
	}
	for _, prefix := range []string{"agents/run1", "a@b"} {
		m, err := New(context.Background(), Config{Repo: repo, BranchPrefix: prefix})
		require.NoError(t, err, prefix)
		branch, err := m.Branch("x")
		require.NoError(t, err)
		assert.Equal(t, prefix+"/x", branch)
	}
}

// findMerged reads the target's history from git's files when it is a chain
// of loose commits: it must find what rev-list --grep and the trailer check
// find, for trailers written every way.
func TestFindMergedReadsHistoryAsGitDoes(t *testing.T) {
	t.Parallel()
	repo := newRepo(t, nil)
	base := revParse(t, repo, "HEAD")
	messages := []string{
		"a.b: squash\n\nForeman-Item: a.b\n",
		"mentions\n\nForeman-Item: axb\n",                      // '.' is not a wildcard
		"not a trailer\n\nForeman-Item: c\n\nlast paragraph\n", // grep hit, no trailer
		"spaces\n\nForeman-Item:   d  \n",                      // trailer, no grep hit
		"twice\n\nForeman-Item: e\n",
		"twice again\n\nForeman-Item: e\n",
	}
	for _, msg := range messages {
		out, err := testRunner().RunCmd(context.Background(), gitexecCmd(repo, msg))
		require.NoError(t, err, out)
	}
	tip := revParse(t, repo, "HEAD")
	m := newManager(t, repo, nil)
	require.True(t, m.plainLayout)
	byGit := *m
	byGit.plainLayout = false
	for _, id := range []string{"a.b", "axb", "c", "d", "e", "f"} {
		t.Run(id, func(t *testing.T) {
			want, err := byGit.findMerged(context.Background(), foreman.ItemID(id), base, tip)
			require.NoError(t, err)
			got, err := m.findMerged(context.Background(), foreman.ItemID(id), base, tip)
			require.NoError(t, err)
			assert.Equal(t, want, got)
			assert.Equal(t, id == "a.b" || id == "axb" || id == "e", got != "", "found")
		})
	}
	got, err := m.findMerged(context.Background(), "e", base, tip)
	require.NoError(t, err)
	assert.Equal(t, tip, got, "the newest hit, as rev-list lists it")
}

func gitexecCmd(dir, msg string) gitexec.Cmd {
	return gitexec.Cmd{Dir: dir, Stdin: strings.NewReader(msg),
		Args: []string{"commit", "-q", "--allow-empty", "--cleanup=verbatim", "-F", "-"}}
}
