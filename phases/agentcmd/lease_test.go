package agentcmd

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/atomicfile"
	"github.com/agentforeman/foreman/internal/proc"
	"github.com/agentforeman/foreman/phases"
)

// The helper process is the "coordinator" the crash test kills: it runs one
// Execute with a lease and never returns on its own.
const (
	helperEnv          = "AGENTCMD_LEASE_HELPER"
	helperWorkspaceEnv = "AGENTCMD_LEASE_HELPER_WORKSPACE"
	helperLeaseDirEnv  = "AGENTCMD_LEASE_HELPER_LEASE_DIR"
	helperAgentEnv     = "AGENTCMD_LEASE_HELPER_AGENT"
	helperSandboxEnv   = "AGENTCMD_LEASE_HELPER_SANDBOX"
)

func TestLeaseHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper process for TestExecuteReapsTheOrphanOfACrashedHost")
	}
	mode := SandboxOff // an agent outliving its host: the sandbox would take it down
	if os.Getenv(helperSandboxEnv) != "" {
		mode = SandboxRequired
	}
	_, err := New(Config{Argv: []string{os.Getenv(helperAgentEnv)}, LeaseDir: os.Getenv(helperLeaseDirEnv),
		Sandbox: Sandbox{Mode: mode}}).Execute(
		context.Background(), phases.AgentRequest{WorkspacePath: os.Getenv(helperWorkspaceEnv), SessionID: "s-1"}, nil)
	t.Fatalf("the helper's agent runs until the test kills the helper; Execute returned %v", err)
}

// reapRecorder collects OnReap events; OnReap runs on Execute's goroutine,
// but the race detector is happier with a lock than with that argument.
type reapRecorder struct {
	mu     sync.Mutex
	events []Reaped
}

func (r *reapRecorder) onReap(ev Reaped) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *reapRecorder) all() []Reaped {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Reaped(nil), r.events...)
}

// leaseFiles lists the lease files (not the lock files) in dir.
func leaseFiles(t *testing.T, dir string) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(dir, "*.lease"))
	require.NoError(t, err)
	return matches
}

func startTimeOf(t *testing.T, pid int) uint64 {
	t.Helper()
	st, err := proc.ReadStat(pid)
	require.NoError(t, err)
	return st.StartTime
}

// killGroupAtCleanup makes sure a failing test leaves no sleepers behind.
func killGroupAtCleanup(t *testing.T, pgid int) {
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
}

// The coordinator dies hard (SIGKILL) while its agent runs; the agent and
// its child live on as orphans. The next driver with the same LeaseDir kills
// them before its own agent starts in the workspace.
func TestExecuteReapsTheOrphanOfACrashedHost(t *testing.T) {
	workspace, leaseDir, scratch := t.TempDir(), t.TempDir(), t.TempDir()
	pidFile := filepath.Join(scratch, "pids")
	orphanAgent := writeScript(t, scratch, "orphan-agent", `
sleep 1000 &
echo "$$ $!" > "`+pidFile+`.tmp" && mv "`+pidFile+`.tmp" "`+pidFile+`"
wait
`)
	helper := exec.Command(os.Args[0], "-test.run=^TestLeaseHelperProcess$", "-test.count=1")
	helper.Env = append(os.Environ(), helperEnv+"=1", helperWorkspaceEnv+"="+workspace,
		helperLeaseDirEnv+"="+leaseDir, helperAgentEnv+"="+orphanAgent)
	require.NoError(t, helper.Start())
	helperDone := make(chan error, 1)
	go func() { helperDone <- helper.Wait() }()
	t.Cleanup(func() { _ = helper.Process.Kill() })

	var leader, child int
	require.Eventually(t, func() bool {
		data, err := os.ReadFile(pidFile)
		if err != nil || len(leaseFiles(t, leaseDir)) == 0 {
			return false
		}
		f := strings.Fields(string(data))
		require.Len(t, f, 2)
		leader, _ = strconv.Atoi(f[0])
		child, _ = strconv.Atoi(f[1])
		// The mv that wrote the file may still be a member of the group
		// for a moment; the orphan is the leader and its sleeping child.
		return len(liveGroupMembers(t, leader)) == 2
	}, 30*time.Second, 10*time.Millisecond, "the helper's agent never started")
	killGroupAtCleanup(t, leader)

	var lease Lease
	data, err := os.ReadFile(leaseFiles(t, leaseDir)[0])
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &lease))
	assert.Equal(t, leader, lease.PID)
	assert.Equal(t, leader, lease.PGID)
	assert.Equal(t, startTimeOf(t, leader), lease.StartTime)
	assert.Equal(t, workspace, lease.Workspace)
	assert.Equal(t, "s-1", lease.Env["FOREMAN_SESSION_ID"])
	assert.False(t, lease.WrittenAt.IsZero())
	entries, err := os.ReadDir(workspace)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing is written in the workspace")

	require.NoError(t, helper.Process.Signal(syscall.SIGKILL)) // the host crashes
	require.Error(t, <-helperDone)
	require.True(t, processRunning(leader), "the agent outlives its host")
	require.True(t, processRunning(child), "and so does its child")

	// The new agent looks, as it starts, whether the orphans still run.
	newAgent := writeScript(t, scratch, "new-agent", `
for p in $ORPHANS; do
  s=$(sed 's/.*) //' /proc/$p/stat 2>/dev/null | cut -d' ' -f1)
  case "$s" in ""|Z|X) echo "gone $p" ;; *) echo "running $p" ;; esac
done
`)
	reaps := &reapRecorder{}
	rec := &recorder{}
	res, err := New(Config{
		Argv: []string{newAgent}, LeaseDir: leaseDir, OnReap: reaps.onReap, KillGrace: time.Minute,
		Env:     []string{"ORPHANS=" + strconv.Itoa(leader) + " " + strconv.Itoa(child)},
		Sandbox: Sandbox{Mode: SandboxOff}, // it reads the host's /proc
	}).Execute(context.Background(), phases.AgentRequest{WorkspacePath: workspace}, rec.callback)
	require.NoError(t, err)
	assert.True(t, res.Success)
	assert.Equal(t, []string{"gone " + strconv.Itoa(leader), "gone " + strconv.Itoa(child)}, rec.stdoutLines(),
		"the orphans were gone before the new agent started")
	if evs := reaps.all(); assert.Len(t, evs, 1) {
		assert.Equal(t, lease, evs[0].Lease)
		assert.ElementsMatch(t, []int{leader, child}, evs[0].PIDs)
		assert.Equal(t, "SIGTERM", evs[0].Signal)
	}
	assertGroupGone(t, leader)
	assert.Empty(t, leaseFiles(t, leaseDir), "the new agent's lease went with it")
}

// The leader of an orphaned group can be gone while a member, which here
// also ignores SIGTERM, runs on: the group is still reaped, with SIGKILL.
func TestExecuteReapsAGroupWhoseLeaderIsGone(t *testing.T) {
	workspace, leaseDir := t.TempDir(), t.TempDir()
	orphan := exec.Command("sh", "-c", `trap '' TERM; sleep 1000 >/dev/null 2>&1 & echo $!`)
	orphan.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := orphan.Output() // the leader exits and is reaped; its child runs on
	require.NoError(t, err)
	pgid := orphan.Process.Pid
	killGroupAtCleanup(t, pgid)
	member, err := strconv.Atoi(strings.TrimSpace(string(out)))
	require.NoError(t, err)
	require.True(t, processRunning(member))

	d := New(Config{Argv: []string{"true"}, LeaseDir: leaseDir, KillGrace: 50 * time.Millisecond})
	key, abs, err := leaseKey(workspace)
	require.NoError(t, err)
	require.NoError(t, atomicfile.WriteJSON(filepath.Join(leaseDir, key+".lease"),
		Lease{PID: pgid, PGID: pgid, StartTime: startTimeOf(t, member), Workspace: abs}, 0o600))
	reaps := &reapRecorder{}
	d.cfg.OnReap = reaps.onReap

	_, err = d.Execute(context.Background(), phases.AgentRequest{WorkspacePath: workspace}, nil)
	require.NoError(t, err)
	assertGroupGone(t, pgid)
	if evs := reaps.all(); assert.Len(t, evs, 1) {
		assert.Equal(t, []int{member}, evs[0].PIDs)
		assert.Equal(t, "SIGKILL", evs[0].Signal, "the member ignored SIGTERM")
	}
	assert.Empty(t, leaseFiles(t, leaseDir))
}

// A host can die after it started an agent and before it wrote the lease:
// the agent still carries its host in AgentOwnerEnv, and is reaped by it.
func TestExecuteReapsAnAgentWhoseHostDiedBeforeItsLease(t *testing.T) {
	workspace, leaseDir := t.TempDir(), t.TempDir()
	orphan := exec.Command("sh", "-c", `sleep 1000 >/dev/null 2>&1 & echo $!`)
	orphan.Dir = workspace
	// No process can have this pid (above the kernel's limit): a host that is gone.
	orphan.Env = append(os.Environ(), AgentOwnerEnv+"=999999999.1")
	orphan.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := orphan.Output() // its leader exits; the sleeping agent runs on
	require.NoError(t, err)
	pgid := orphan.Process.Pid
	killGroupAtCleanup(t, pgid)
	member, err := strconv.Atoi(strings.TrimSpace(string(out)))
	require.NoError(t, err)
	require.True(t, processRunning(member))

	// Another agent of a host that is gone, in another workspace, is not
	// this workspace's business.
	elsewhere := exec.Command("sh", "-c", `sleep 1000 >/dev/null 2>&1 & echo $!`)
	elsewhere.Dir = t.TempDir()
	elsewhere.Env = orphan.Env
	elsewhere.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err = elsewhere.Output()
	require.NoError(t, err)
	killGroupAtCleanup(t, elsewhere.Process.Pid)
	other, err := strconv.Atoi(strings.TrimSpace(string(out)))
	require.NoError(t, err)

	reaps := &reapRecorder{}
	_, err = New(Config{Argv: []string{"true"}, LeaseDir: leaseDir, OnReap: reaps.onReap, KillGrace: time.Minute}).
		Execute(context.Background(), phases.AgentRequest{WorkspacePath: workspace}, nil)
	require.NoError(t, err)
	assertGroupGone(t, pgid)
	_, abs, err := leaseKey(workspace)
	require.NoError(t, err)
	if evs := reaps.all(); assert.Len(t, evs, 1) {
		assert.Equal(t, []int{member}, evs[0].PIDs)
		assert.Equal(t, "SIGTERM", evs[0].Signal)
		assert.Equal(t, abs, evs[0].Lease.Workspace)
	}
	assert.True(t, processRunning(other), "an agent in another workspace runs on")
}

func TestExecuteRemovesStaleLeases(t *testing.T) {
	// A group leader of its own, like an agent: the hardest process to tell
	// from one.
	unrelated := exec.Command("sleep", "1000")
	unrelated.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, unrelated.Start())
	t.Cleanup(func() { _ = unrelated.Process.Kill(); _ = unrelated.Wait() })
	exited := exec.Command("true")
	require.NoError(t, exited.Run())

	tests := []struct {
		name  string
		lease func() Lease
	}{
		{"the process is gone", func() Lease {
			return Lease{PID: exited.Process.Pid, PGID: exited.Process.Pid, StartTime: 1}
		}},
		{"the pid was reused by an unrelated process", func() Lease {
			pid := unrelated.Process.Pid
			return Lease{PID: pid, PGID: pid, StartTime: startTimeOf(t, pid) - 1}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			workspace, leaseDir := t.TempDir(), t.TempDir()
			key, abs, err := leaseKey(workspace)
			require.NoError(t, err)
			lease := tt.lease()
			lease.Workspace = abs
			require.NoError(t, atomicfile.WriteJSON(filepath.Join(leaseDir, key+".lease"), lease, 0o600))
			reaps := &reapRecorder{}
			res, err := New(Config{Argv: []string{"true"}, LeaseDir: leaseDir, OnReap: reaps.onReap}).Execute(
				context.Background(), phases.AgentRequest{WorkspacePath: workspace}, nil)
			require.NoError(t, err)
			assert.True(t, res.Success)
			// Reported with no process to stop: the agent ended with its
			// host, and the host clears what it may have left.
			got := reaps.all()
			require.Len(t, got, 1)
			assert.Empty(t, got[0].PIDs, "nothing was signalled")
			assert.Empty(t, got[0].Signal)
			assert.Equal(t, abs, got[0].Lease.Workspace)
			assert.Empty(t, leaseFiles(t, leaseDir))
			assert.True(t, processRunning(unrelated.Process.Pid), "the unrelated process was not touched")
		})
	}
}

// ReapStale deals with every stale lease before any agent runs, also in a
// workspace no agent will run in again, and leaves a held one alone.
func TestReapStaleReportsEveryLeftLease(t *testing.T) {
	exited := exec.Command("true")
	require.NoError(t, exited.Run())
	leaseDir := t.TempDir()
	var workspaces []string
	for range 2 {
		ws := t.TempDir()
		key, abs, err := leaseKey(ws)
		require.NoError(t, err)
		workspaces = append(workspaces, abs)
		require.NoError(t, atomicfile.WriteJSON(filepath.Join(leaseDir, key+".lease"),
			Lease{PID: exited.Process.Pid, PGID: exited.Process.Pid, StartTime: 1, Workspace: abs}, 0o600))
	}
	// The second workspace's lease is held by another driver: left alone.
	held, err := New(Config{LeaseDir: leaseDir}).acquireLease(context.Background(), workspaces[1])
	require.NoError(t, err)
	defer held.release()

	reaps := &reapRecorder{}
	require.NoError(t, New(Config{LeaseDir: leaseDir, OnReap: reaps.onReap}).ReapStale(context.Background()))
	got := reaps.all()
	require.Len(t, got, 1)
	assert.Equal(t, workspaces[0], got[0].Lease.Workspace)
	assert.Len(t, leaseFiles(t, leaseDir), 1, "the held workspace's lease stays")
}

func TestExecuteWithoutLeaseDirWritesNoLease(t *testing.T) {
	workspace := t.TempDir()
	d := New(Config{Argv: []string{"sh", "-c", "echo ok"}})
	res, err := d.Execute(context.Background(), phases.AgentRequest{WorkspacePath: workspace}, nil)
	require.NoError(t, err)
	assert.True(t, res.Success)
	entries, err := os.ReadDir(workspace)
	require.NoError(t, err)
	assert.Empty(t, entries)
	assert.Nil(t, d.leaseLocks.slots, "the lease machinery was never used")
}

// Another process holding the workspace's lease lock is a live host with an
// agent there: the driver starts nothing.
func TestExecuteRefusesAWorkspaceLeasedByAnotherProcess(t *testing.T) {
	workspace, leaseDir, scratch := t.TempDir(), t.TempDir(), t.TempDir()
	key, _, err := leaseKey(workspace)
	require.NoError(t, err)
	// flock is per open file: this descriptor conflicts with the driver's
	// as another process's would.
	f, err := os.OpenFile(filepath.Join(leaseDir, key+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB))

	marker := filepath.Join(scratch, "ran")
	_, err = New(Config{Argv: []string{"touch", marker}, LeaseDir: leaseDir}).Execute(context.Background(),
		phases.AgentRequest{WorkspacePath: workspace}, nil)
	require.ErrorIs(t, err, ErrLeaseHeld)
	assert.NoFileExists(t, marker, "no agent was started")
}

// Two executions in one workspace (a host bug) run one after the other, and
// neither sees the other's lease.
func TestExecuteSerializesOneWorkspace(t *testing.T) {
	workspace, leaseDir, scratch := t.TempDir(), t.TempDir(), t.TempDir()
	// mkdir is atomic: an agent finding the directory ran beside another.
	agent := writeScript(t, scratch, "agent", `
mkdir "`+scratch+`/busy" || { echo overlap; exit 1; }
ls "`+leaseDir+`" | grep -c '\.lease$'
rmdir "`+scratch+`/busy"
`)
	d := New(Config{Argv: []string{agent}, LeaseDir: leaseDir})
	const runs = 8
	results := make(chan phases.AgentResult, runs)
	var wg sync.WaitGroup
	for range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A sandboxed agent writes scratch because the request says so;
			// the lease directory is hidden from it (it sees none there).
			res, err := d.Execute(context.Background(), phases.AgentRequest{WorkspacePath: workspace, Writable: []string{scratch}}, nil)
			assert.NoError(t, err)
			results <- res
		}()
	}
	wg.Wait()
	close(results)
	for res := range results {
		assert.True(t, res.Success, res.Output)
		// Its own lease may not be written yet when the agent looks; no
		// other execution's can be there.
		assert.Contains(t, []string{"0\n", "1\n"}, res.Output, "leases seen by the agent")
	}
	assert.Empty(t, leaseFiles(t, leaseDir))
	assert.Empty(t, d.leaseLocks.slots, "the per-workspace locks are dropped when unused")
}
