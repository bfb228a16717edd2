package gates_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/gates"
	"github.com/agentforeman/foreman/phases/gates/gatesmock"
)

func onePlan(check phases.GateCheck) phases.GatePlan {
	return phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: []phases.GateCheck{check}}}}
}

// The Verifier runs what the Sandbox returns, in the environment it built
// (nothing of the host's added), and the result carries what it refused.
func TestTheVerifierRunsTheContainedCommand(t *testing.T) {
	t.Setenv("HOST_ONLY", "host-value")
	ctrl := gomock.NewController(t)
	sb := gatesmock.NewMockSandbox(ctrl)
	ws := t.TempDir()
	done := 0
	sb.EXPECT().Contain(gomock.Any(), gates.CheckCommand{Dir: ws, Argv: []string{"make", "test"}, Env: []string{"FROM_CONFIG=1", "FROM_CHECK=2"}}).
		Return(gates.Contained{
			CheckCommand: gates.CheckCommand{Dir: ws, Argv: []string{"sh", "-c", "echo contained; env; exit 4"}, Env: []string{"BUILT=yes"}},
			Done: func(context.Context) []string {
				done++
				return []string{"wrote \"x\" into the hidden host's home"}
			},
		}, nil)
	v := gates.NewVerifier(gates.VerifierConfig{Sandbox: sb, Env: []string{"FROM_CONFIG=1"}})
	rep, err := v.Verify(context.Background(), phases.Snapshot{WorkspacePath: ws},
		onePlan(phases.GateCheck{Name: "tests", Argv: []string{"make", "test"}, Env: []string{"FROM_CHECK=2"}}), phases.VerifyOptions{})
	require.NoError(t, err)
	res := rep.Levels[0].Checks[0]
	assert.False(t, res.Passed)
	assert.Equal(t, 4, res.ExitCode)
	assert.Equal(t, []string{"make", "test"}, res.Argv, "the result names the check's own command")
	assert.Contains(t, res.Output, "contained")
	assert.Contains(t, res.Output, "BUILT=yes")
	assert.NotContains(t, res.Output, "host-value")
	assert.Equal(t, []string{"wrote \"x\" into the hidden host's home"}, res.Refused)
	assert.Equal(t, 1, done)
}

// A check that cannot be contained does not run, on the host or anywhere:
// Verify fails with ErrNotContained and the Sandbox's cause.
func TestACheckThatCannotBeContainedDoesNotRun(t *testing.T) {
	ctrl := gomock.NewController(t)
	sb := gatesmock.NewMockSandbox(ctrl)
	cause := errors.New("no sandbox here")
	sb.EXPECT().Contain(gomock.Any(), gomock.Any()).Return(gates.Contained{}, cause)
	ws := t.TempDir()
	v := gates.NewVerifier(gates.VerifierConfig{Sandbox: sb})
	_, err := v.Verify(context.Background(), phases.Snapshot{WorkspacePath: ws},
		onePlan(phases.GateCheck{Name: "touch", Argv: []string{"touch", filepath.Join(ws, "ran")}}), phases.VerifyOptions{})
	require.ErrorIs(t, err, gates.ErrNotContained)
	require.ErrorIs(t, err, cause)
	assert.NoFileExists(t, filepath.Join(ws, "ran"))
}

// Done runs for a check that timed out, and for one whose command could
// not start: what the sandbox made goes either way.
func TestTheSandboxIsDoneWithEveryCheck(t *testing.T) {
	for _, tt := range []struct {
		name string
		argv []string
	}{
		{"cannot start", []string{filepath.Join(os.TempDir(), "no-such-program-for-foreman")}},
		{"times out", []string{"sleep", "60"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctrl := gomock.NewController(t)
			sb := gatesmock.NewMockSandbox(ctrl)
			done := make(chan struct{}, 1)
			sb.EXPECT().Contain(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, cmd gates.CheckCommand) (gates.Contained, error) {
				return gates.Contained{CheckCommand: cmd, Done: func(context.Context) []string { done <- struct{}{}; return nil }}, nil
			})
			fake := clock.NewFake(time.Unix(0, 0))
			v := gates.NewVerifier(gates.VerifierConfig{Sandbox: sb, Clock: fake})
			go func() {
				// The check's timeout, once it waits on the fake clock.
				if fake.BlockUntil(t.Context(), 1) == nil {
					fake.Advance(gates.DefaultCheckTimeout)
				}
			}()
			rep, err := v.Verify(context.Background(), phases.Snapshot{WorkspacePath: t.TempDir()},
				onePlan(phases.GateCheck{Name: "c", Argv: tt.argv}), phases.VerifyOptions{})
			require.NoError(t, err)
			assert.False(t, rep.Passed)
			select {
			case <-done:
			default:
				t.Fatal("Done was not called")
			}
		})
	}
}
