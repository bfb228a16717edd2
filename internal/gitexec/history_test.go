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

// gitLog is git's own list of base..head, oldest first: "hash subject".
func gitLog(t *testing.T, dir, base, head string) []string {
	t.Helper()
	out := testGit(t, dir, "log", "-z", "--reverse", "--format=%H %s", base+".."+head, "--")
	if out == "" {
		return nil
	}
	return strings.Split(strings.TrimRight(out, "\x00"), "\x00")
}

func commitWithMessage(t *testing.T, dir, msg string) {
	t.Helper()
	r := Runner{Env: []string{"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1"}}
	_, err := r.RunCmd(context.Background(), Cmd{Dir: dir, Stdin: strings.NewReader(msg),
		Args: []string{"commit", "-q", "--allow-empty", "--allow-empty-message", "--cleanup=verbatim", "-F", "-"}})
	require.NoError(t, err)
}

func TestLinearHistoryAgreesWithGitLog(t *testing.T) {
	t.Parallel()
	_, repo := newRepo(t)
	base := testGit(t, repo, "rev-parse", "HEAD")
	messages := []string{
		"plain subject\n",
		"subject\n\nbody line\nForeman-Item: A\n",
		"first line\nsecond line of the same paragraph\n\nbody\n",
		"\n\n  \nafter blank lines\n",
		"trailing spaces   \t\nnext\n",
		"crlf subject\r\n\r\nbody\r\n",
		"",
		"   \n",
		"tab\tinside and ünïcode\n",
		"no newline at the end",
		"vertical\vtab\f\n",
	}
	for _, msg := range messages {
		commitWithMessage(t, repo, msg)
	}
	head := testGit(t, repo, "rev-parse", "HEAD")
	l, ok := ReadLayout(repo, nil)
	require.True(t, ok)

	got, ok := LinearHistory(l, nil, base, head)
	require.True(t, ok)
	var lines []string
	for _, c := range got {
		lines = append(lines, c.Hash+" "+c.Subject())
	}
	assert.Equal(t, gitLog(t, repo, base, head), lines)
	require.Len(t, got, len(messages))
	assert.Equal(t, messages[1], got[1].Message, "the raw message is kept")

	empty, ok := LinearHistory(l, nil, head, head)
	require.True(t, ok)
	assert.Empty(t, empty)
}

func TestLinearHistoryLeavesOtherHistoriesToGit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		env   []string
		setup func(t *testing.T, repo, base string) (from, to string)
	}{
		{"a merge commit", nil, func(t *testing.T, repo, base string) (string, string) {
			testGit(t, repo, "checkout", "-q", "-b", "side")
			commitWithMessage(t, repo, "side\n")
			testGit(t, repo, "checkout", "-q", "main")
			commitWithMessage(t, repo, "main\n")
			testGit(t, repo, "merge", "-q", "--no-edit", "side")
			return base, testGit(t, repo, "rev-parse", "HEAD")
		}},
		{"packed objects", nil, func(t *testing.T, repo, base string) (string, string) {
			commitWithMessage(t, repo, "x\n")
			testGit(t, repo, "gc", "-q")
			return base, testGit(t, repo, "rev-parse", "HEAD")
		}},
		{"base not an ancestor", nil, func(t *testing.T, repo, base string) (string, string) {
			commitWithMessage(t, repo, "x\n")
			head := testGit(t, repo, "rev-parse", "HEAD")
			testGit(t, repo, "checkout", "-q", "-b", "other", base)
			commitWithMessage(t, repo, "y\n")
			return testGit(t, repo, "rev-parse", "HEAD"), head
		}},
		{"an encoding header", nil, func(t *testing.T, repo, base string) (string, string) {
			testGit(t, repo, "config", "i18n.commitEncoding", "ISO-8859-1")
			commitWithMessage(t, repo, "caf\xe9\n")
			return base, testGit(t, repo, "rev-parse", "HEAD")
		}},
		{"a log output encoding", nil, func(t *testing.T, repo, base string) (string, string) {
			commitWithMessage(t, repo, "x\n")
			testGit(t, repo, "config", "i18n.logOutputEncoding", "ISO-8859-1")
			return base, testGit(t, repo, "rev-parse", "HEAD")
		}},
		{"a log output encoding in the environment", []string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=i18n.logOutputEncoding", "GIT_CONFIG_VALUE_0=ISO-8859-1"},
			func(t *testing.T, repo, base string) (string, string) {
				commitWithMessage(t, repo, "x\n")
				return base, testGit(t, repo, "rev-parse", "HEAD")
			}},
		{"a replace ref", nil, func(t *testing.T, repo, base string) (string, string) {
			commitWithMessage(t, repo, "x\n")
			head := testGit(t, repo, "rev-parse", "HEAD")
			commitWithMessage(t, repo, "y\n")
			testGit(t, repo, "replace", head, testGit(t, repo, "rev-parse", "HEAD"))
			return base, head
		}},
		{"a shallow repository", nil, func(t *testing.T, repo, base string) (string, string) {
			commitWithMessage(t, repo, "x\n")
			require.NoError(t, os.WriteFile(filepath.Join(repo, ".git", "shallow"), []byte(base+"\n"), 0o644))
			return base, testGit(t, repo, "rev-parse", "HEAD")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, repo := newRepo(t)
			base := testGit(t, repo, "rev-parse", "HEAD")
			from, to := tt.setup(t, repo, base)
			l, ok := ReadLayout(repo, nil)
			require.True(t, ok)
			_, ok = LinearHistory(l, tt.env, from, to)
			assert.False(t, ok)
		})
	}
}
