package merge

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/phases/gates"
	"github.com/agentforeman/foreman/phases/gates/gatesmock"
)

// The post-merge check runs the squash's code: with a CheckSandbox it runs
// what the sandbox returns, in the environment it built; what the sandbox
// refused fails the check even when it exited 0, and a check that cannot
// be contained does not run. The target moves only for a clean pass.
func TestMergeCheckRunsInItsSandbox(t *testing.T) {
	t.Setenv("HOST_ONLY", "host") // not for the check
	ctx := context.Background()
	tests := []struct {
		name      string
		script    string
		refused   []string
		containEr error
		want      func(t *testing.T, cerr *CheckError)
	}{
		{name: "passes", script: `test "$FOREMAN_ITEM" = c && test "$BUILT" = yes && test -z "$HOST_ONLY"`},
		{name: "refused though it exited 0", script: "exit 0", refused: []string{`wrote "x" into the hidden main checkout`},
			want: func(t *testing.T, cerr *CheckError) {
				assert.Equal(t, []string{`wrote "x" into the hidden main checkout`}, cerr.Refused)
				assert.Contains(t, cerr.Error(), "reached beyond its checkout (exit 0), refused by its sandbox: wrote")
			}},
		{name: "fails", script: "echo broken >&2; exit 3",
			want: func(t *testing.T, cerr *CheckError) {
				assert.Equal(t, 3, cerr.ExitCode)
				assert.Contains(t, cerr.Output, "broken")
			}},
		{name: "cannot be contained", containEr: errors.New("no sandbox"),
			want: func(t *testing.T, cerr *CheckError) {
				assert.ErrorIs(t, cerr, gates.ErrNotContained)
				assert.Contains(t, cerr.Error(), "no sandbox")
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctrl := gomock.NewController(t)
			sb := gatesmock.NewMockSandbox(ctrl)
			argv := []string{"sh", "-c", "the squash's own check"}
			sb.EXPECT().Contain(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, cmd gates.CheckCommand) (gates.Contained, error) {
				assert.Equal(t, argv, cmd.Argv)
				assert.Contains(t, cmd.Env, "FOREMAN_ITEM=c")
				assert.True(t, strings.HasPrefix(filepath.Base(cmd.Dir), checkPrefix), cmd.Dir)
				if tt.containEr != nil {
					return gates.Contained{}, tt.containEr
				}
				env := append([]string{"BUILT=yes", "PATH=/usr/bin:/bin"}, cmd.Env...)
				return gates.Contained{
					CheckCommand: gates.CheckCommand{Dir: cmd.Dir, Argv: []string{"sh", "-c", tt.script}, Env: env},
					Done:         func(context.Context) []string { return tt.refused },
				}, nil
			})
			repo := newRepo(t, nil)
			m := newManager(t, repo, func(c *Config) { c.CheckSandbox = sb })
			wt := create(t, m, "c")
			commitFile(t, wt.Path, "c.txt", "c\n", "c")
			old := revParse(t, repo, "main")

			res, err := m.Merge(ctx, "c", Request{Title: "C", Check: argv})
			if tt.want == nil {
				require.NoError(t, err)
				assert.Equal(t, Merged, res.Status)
				return
			}
			var cerr *CheckError
			require.ErrorAs(t, err, &cerr)
			tt.want(t, cerr)
			assert.Equal(t, old, revParse(t, repo, "main"), "the target stays where it was")
			assert.NoDirExists(t, filepath.Join(m.Root(), checkPrefix+"c"))
		})
	}
}

// A post-merge check that does not end is killed at Config.CheckTimeout
// (on the configured clock), with what it started, and fails: the target
// does not move.
func TestMergeCheckTimesOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake := clock.NewFake(time.Unix(0, 0))
	repo := newRepo(t, nil)
	m := newManager(t, repo, func(c *Config) { c.Clock = fake; c.CheckTimeout = time.Minute })
	wt := create(t, m, "c")
	commitFile(t, wt.Path, "c.txt", "c\n", "c")
	old := revParse(t, repo, "main")
	go func() {
		if fake.BlockUntil(t.Context(), 1) == nil {
			fake.Advance(time.Minute)
		}
	}()
	_, err := m.Merge(ctx, "c", Request{Title: "C", Check: []string{"sh", "-c", "echo started; sleep 600 & wait"}})
	var cerr *CheckError
	require.ErrorAs(t, err, &cerr)
	assert.True(t, cerr.TimedOut)
	assert.Contains(t, cerr.Error(), "timed out after 1m0s; its process group was killed")
	assert.Equal(t, old, revParse(t, repo, "main"))
	assert.NoDirExists(t, filepath.Join(m.Root(), checkPrefix+"c"))
}
