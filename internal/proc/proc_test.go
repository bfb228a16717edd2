package proc

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name, in string
		want     Stat
		wantErr  bool
	}{
		{name: "comm with spaces and a parenthesis",
			in:   "4242 (a) b (c) S 1 4240 4240 0 -1 4194304 93 0 0 0 0 0 0 0 20 0 1 0 987654 2273280 224 rest\n",
			want: Stat{State: 'S', PPID: 1, PGrp: 4240, Session: 4240, StartTime: 987654}},
		{name: "too short", in: "4242 (a) S 1", wantErr: true},
		{name: "no comm", in: "4242 S 1", wantErr: true},
		{name: "bad start time", in: "1 (a) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 x 0 0", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStat(tt.in)
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestReadsAChildProcess(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("sleep", "60")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PROC_TEST=one", "PROC_TEST=two")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	pid := cmd.Process.Pid
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	st, err := ReadStat(pid)
	require.NoError(t, err)
	assert.True(t, st.Running())
	assert.Equal(t, pid, st.PGrp, "the child leads a group of its own")
	self, err := ReadStat(os.Getpid())
	require.NoError(t, err)
	assert.Equal(t, self.Session, st.Session, "but not a session")
	assert.Equal(t, os.Getpid(), st.PPID)
	assert.True(t, Alive(pid, st.StartTime))
	assert.False(t, Alive(pid, st.StartTime+1), "another start time is another process")
	assert.True(t, GroupAlive(pid))
	members, err := GroupMembers(pid, st.StartTime)
	require.NoError(t, err)
	assert.Equal(t, []int{pid}, members)

	v, ok := Getenv(pid, "PROC_TEST")
	assert.True(t, ok)
	assert.Equal(t, "two", v, "the last setting wins, as for exec")
	_, ok = Getenv(pid, "PROC_TEST_UNSET")
	assert.False(t, ok)
	cwd, err := Cwd(pid)
	require.NoError(t, err)
	real, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	assert.Equal(t, real, cwd)

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	assert.False(t, Alive(pid, st.StartTime))
	assert.False(t, GroupAlive(pid))
	_, err = ReadStat(pid)
	assert.ErrorIs(t, err, os.ErrNotExist)
}
