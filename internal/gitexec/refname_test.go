package gitexec

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// branchNames are names git check-ref-format --branch accepts (true) or
// refuses (false), one per rule of git help check-ref-format.
var branchNames = map[string]bool{
	"main": true, "foreman/x": true, "a/b/c": true, "x-y_z.1": true, "feature/ünïcode": true,
	"a{b}": true, "a}": true, "ends-with-lock.d": true, "a.b": true, "{": true, "x.lockx": true,
	"":           false, // empty
	"-x":         false, // a leading dash
	"HEAD":       false,
	"a/.b":       false, // a component starting with '.'
	".a":         false,
	"a.lock":     false, // a component ending in .lock
	"a.lock/":    false,
	"a/b.lock/c": false,
	"a..b":       false,
	"a/":         false, // ends with '/'
	"/a":         false,
	"a//b":       false,
	"a.":         false, // ends with '.'
	"a/b.":       false,
	"a b":        false, "a~b": false, "a^b": false, "a:b": false, "a?b": false, "a*b": false,
	"a[b": false, `a\b`: false, "a\x01b": false, "a\tb": false, "a\x7fb": false,
	"a@{b":  false,
	"@":     false, // git reads "@" as HEAD; never sure without git
	"a@b":   false, // git accepts it, but '@' names are left to git
	"@{-1}": false,
}

// gitAcceptsBranch asks git itself, in a repository, as merge does.
func gitAcceptsBranch(t testing.TB, repo, name string) bool {
	r := Runner{Env: []string{"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1"}}
	_, err := r.Run(context.Background(), repo, "check-ref-format", "--branch", name)
	return err == nil
}

func TestValidBranchNameAgreesWithGit(t *testing.T) {
	t.Parallel()
	_, repo := newRepo(t)
	for name, want := range branchNames {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, want, ValidBranchName(name))
			if strings.ContainsRune(name, '@') {
				return // ValidBranchName leaves these to git
			}
			assert.Equal(t, want, gitAcceptsBranch(t, repo, name), "git's verdict")
		})
	}
	assert.True(t, gitAcceptsBranch(t, repo, "a@b"), "git accepts a@b, which ValidBranchName leaves to it")
}

// FuzzValidBranchName checks that ValidBranchName never accepts a name git
// refuses, and refuses a name without '@' only when git does.
func FuzzValidBranchName(f *testing.F) {
	for _, name := range []string{"foreman/x", "a..b", "a/.b", "x.lock", "a@{b"} {
		f.Add(name)
	}
	_, repo := newRepo(f)
	f.Fuzz(func(t *testing.T, name string) {
		if strings.ContainsRune(name, 0) {
			return // not an argument a process can get
		}
		got := ValidBranchName(name)
		if !got && strings.ContainsRune(name, '@') {
			return
		}
		require.Equal(t, gitAcceptsBranch(t, repo, name), got, "name %q", name)
	})
}
