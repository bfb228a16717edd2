package gitremote

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Two mergers that squash the same change onto the same tip in the same
// second make the same commit; the second push finds it there and git
// reports the ref up to date, without checking the lease.
func TestUpToDateReadsGitPushPorcelain(t *testing.T) {
	ref := "refs/heads/main"
	for _, tt := range []struct {
		out  string
		want bool
	}{
		{"To /tmp/shared.git\n=\t0123abcd:refs/heads/main\t[up to date]\nDone\n", true},
		{"To /tmp/shared.git\n \t0123abcd:refs/heads/main\t1111111..0123abc\nDone\n", false},
		{"To /tmp/shared.git\n=\t0123abcd:refs/heads/foreman/US-1\t[up to date]\nDone\n", false},
		{"", false},
	} {
		assert.Equal(t, tt.want, upToDate(tt.out, ref), tt.out)
	}
}
