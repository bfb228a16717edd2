package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envPostgres names a PostgreSQL server the role tests may create databases
// on (.ci/with-postgres sets it).
const envPostgres = "FOREMAN_TEST_POSTGRES"

// testDatabase creates a database of its own for one test and returns its
// connection string; without a server the test skips (fails in CI).
func testDatabase(t *testing.T) string {
	t.Helper()
	base := os.Getenv(envPostgres)
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal(envPostgres + " is not set: the PostgreSQL tests must run in CI (.ci/with-postgres)")
		}
		t.Skip("no PostgreSQL: set " + envPostgres + " or run under .ci/with-postgres")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "foreman_roles_" + hex.EncodeToString(b[:])
	_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), base)
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			_ = c.Close(context.Background())
		}
	})
	if strings.HasPrefix(base, "postgres://") || strings.HasPrefix(base, "postgresql://") {
		u, err := url.Parse(base)
		require.NoError(t, err)
		u.Path = "/" + name
		return u.String()
	}
	return base + " dbname=" + name
}

// cluster is a team spread over processes: a shared bare repository (made
// from the fixture's repository, with a hook that logs every push and who
// made it), one database, and coordinator and worker processes, each with
// a clone of its own.
type cluster struct {
	*fixture
	remote, db, pushLog string
	mu                  sync.Mutex
	procs               []*proc
	exitWake            chan struct{} // closed and replaced when a process exits
}

type proc struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{fixture: newFixture(t), db: testDatabase(t)}
	dir := t.TempDir()
	c.remote = filepath.Join(dir, "shared.git")
	c.pushLog = filepath.Join(dir, "pushes")
	c.git(t, "clone", "-q", "--bare", c.repo, c.remote)
	hook := fmt.Sprintf("#!/bin/sh\nwhile read old new ref; do echo \"${FOREMAN_TEST_PROC:-?} $ref $old $new\" >> %s; done\n", shellQuote(c.pushLog))
	require.NoError(t, os.WriteFile(filepath.Join(c.remote, "hooks", "post-receive"), []byte(hook), 0o755))
	t.Cleanup(func() {
		c.stopAll(t)
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, p := range c.procs {
			assert.Empty(t, raceReports(p.out.String()), "a data race in %s", p.name)
		}
	})
	return c
}

// start runs foreman -role role as the process name.
func (c *cluster) start(t *testing.T, name, role string, extra ...string) *proc {
	t.Helper()
	args := []string{"-role", role, "-db", c.db, "-remote", c.remote, "-repo", filepath.Join(filepath.Dir(c.remote), name),
		"-plan", c.plan, "-http", ""}
	if role == roleWorker { // a coordinator runs no agent and no gate
		args = append(args, "-agent", shellQuote(c.agent)+" {prompt}", "-bind", c.ctl, "-gate", `sh -c '! grep -qs BAD *.txt'`)
	}
	cmd := exec.Command(binary, append(args, extra...)...)
	// FOREMAN_TEST_PROC names the process in the push log;
	// FOREMAN_TEST_CLUSTER marks this cluster's processes apart from
	// another test's on the same machine (an agent's environment is built
	// and does not carry it).
	cmd.Env = append(os.Environ(), append(gitEnv(), "FOREMAN_TEST_PROC="+name, "FOREMAN_TEST_CLUSTER="+c.remote)...)
	p := &proc{name: name, cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	require.NoError(t, cmd.Start())
	go func() {
		p.err = cmd.Wait()
		close(p.done)
		c.mu.Lock()
		if c.exitWake != nil {
			close(c.exitWake)
			c.exitWake = nil
		}
		c.mu.Unlock()
	}()
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p
}

// wait waits for p to exit and returns its exit status.
func (p *proc) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(limit):
		t.Fatalf("%s did not exit within %v; output:\n%s", p.name, limit, p.out)
	}
	if p.err == nil {
		return 0
	}
	if ee, ok := p.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

// waitFor waits until p's output contains s.
func (p *proc) waitFor(t *testing.T, s string, limit time.Duration) {
	t.Helper()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		more := p.out.changed() // before the check: a write after it wakes us
		if strings.Contains(p.out.String(), s) {
			return
		}
		select {
		case <-more:
		case <-p.done:
			if strings.Contains(p.out.String(), s) {
				return
			}
			t.Fatalf("%s exited before printing %q:\n%s", p.name, s, p.out)
		case <-deadline.C:
			t.Fatalf("%s did not print %q within %v:\n%s", p.name, s, limit, p.out)
		}
	}
}

func (c *cluster) stopAll(t *testing.T) {
	c.mu.Lock()
	procs := append([]*proc(nil), c.procs...)
	c.mu.Unlock()
	for _, p := range procs {
		select {
		case <-p.done:
			continue
		default:
		}
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// remoteMerged lists the Foreman-Item trailers on the shared main, oldest first.
func (c *cluster) remoteMerged(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("git", "--git-dir", c.remote, "log", "--reverse", "--format=%(trailers:key=Foreman-Item,valueonly,separator=%x2C)", "main")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var ids []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			ids = append(ids, l)
		}
	}
	return ids
}

// pushesToMain lists the processes that moved the shared main, in order.
func (c *cluster) pushesToMain(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(c.pushLog)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var who []string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if f := strings.Fields(l); len(f) == 4 && f[1] == "refs/heads/main" {
			who = append(who, f[0])
		}
	}
	return who
}

// A coordinator and two worker hosts, each a process with its own clone,
// run the plan through PostgreSQL and the shared repository: every story
// lands once on the shared main, in dependency order, pushed by the leader.
func TestRolesRunThePlanAcrossProcesses(t *testing.T) {
	c := newCluster(t)
	w1 := c.start(t, "worker-1", roleWorker)
	w2 := c.start(t, "worker-2", roleWorker)
	lead := c.start(t, "coord-1", roleCoordinator, leaseArgs()...)
	code := lead.wait(t, 3*time.Minute)
	require.Equal(t, exitMerged, code, "coordinator output:\n%s\nworker-1:\n%s\nworker-2:\n%s", lead.out, w1.out, w2.out)
	assert.Contains(t, lead.out.String(), "coordinator: leading, term 1")

	got := c.remoteMerged(t)
	assert.ElementsMatch(t, []string{"US-001", "US-002", "US-003"}, got, "each story once on the shared main")
	assert.Less(t, indexOf(got, "US-001"), indexOf(got, "US-002"))
	assert.Equal(t, []string{"coord-1", "coord-1", "coord-1"}, c.pushesToMain(t), "only the leader moves main")

	// A person on any machine reads how the team stands from its database.
	code, status, errOut := c.foreman(t, "-status", "-db", c.db)
	assert.Equal(t, exitMerged, code, "%s", errOut)
	assert.Contains(t, status, "No coordinator leads the team now")
	assert.Contains(t, status, "led term 1")
	assert.Regexp(t, `US-003\s+merged`, status)

	c.stopAll(t)
	for _, w := range []*proc{w1, w2} {
		assert.Contains(t, w.out.String(), "worker: stopped after")
		assert.Contains(t, w.out.String(), "worker: warning: this host's database role can write the team's state",
			"a host with the coordinators' role says what that means")
	}
	assert.Empty(t, processesWith(t, "FOREMAN_TEST_CLUSTER="+c.remote), "no process of this cluster's is left")
}

// workerRole creates a login role of its own for worker hosts (before
// newCluster, so that it is dropped after the test's database) and returns
// it with its password.
func workerRole(t *testing.T) (role, password string) {
	t.Helper()
	base := os.Getenv(envPostgres)
	if base == "" {
		testDatabase(t) // skips, or fails in CI
	}
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	role, password = "foreman_worker_"+hex.EncodeToString(b[:]), hex.EncodeToString(b[:])+"-pw"
	conn, err := pgx.Connect(ctx, base)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE ROLE "+role+" LOGIN PASSWORD '"+password+"'")
	require.NoError(t, err)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), base)
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP ROLE IF EXISTS "+role)
			_ = c.Close(context.Background())
		}
	})
	return role, password
}

// asRole is the connection string db with another user.
func asRole(t *testing.T, db, role, password string) string {
	t.Helper()
	if strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://") {
		u, err := url.Parse(db)
		require.NoError(t, err)
		u.User = url.UserPassword(role, password)
		return u.String()
	}
	return db + " user=" + role + " password=" + password
}

// Worker hosts that log in with a role of their own, which the coordinator
// grants (-worker-role) what a worker host needs and nothing more, run the
// plan as the coordinators' role does: the hosts started first wait for
// the grant, and then every story lands once. With that role, the team's
// records and the leader's lease are out of reach.
func TestWorkerHostsWithARoleOfTheirOwn(t *testing.T) {
	role, password := workerRole(t)
	c := newCluster(t)
	workerDB := asRole(t, c.db, role, password)
	w1 := c.start(t, "worker-1", roleWorker, "-db", workerDB)
	w2 := c.start(t, "worker-2", roleWorker, "-db", workerDB)
	lead := c.start(t, "coord-1", roleCoordinator, leaseArgs("-worker-role", role)...)
	code := lead.wait(t, 3*time.Minute)
	require.Equal(t, exitMerged, code, "coordinator output:\n%s\nworker-1:\n%s\nworker-2:\n%s", lead.out, w1.out, w2.out)
	assert.Contains(t, lead.out.String(), fmt.Sprintf("worker role %q may claim", role))
	got := c.remoteMerged(t)
	assert.ElementsMatch(t, []string{"US-001", "US-002", "US-003"}, got, "each story once on the shared main")
	assert.Less(t, indexOf(got, "US-001"), indexOf(got, "US-002"))

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, workerDB)
	require.NoError(t, err)
	defer conn.Close(ctx)
	for _, sql := range []string{
		`UPDATE foreman.leases SET term = term + 1`,
		`UPDATE foreman.records SET data = ''`,
		`SELECT count(*) FROM foreman.records`,
		`DELETE FROM foreman.wt_assignments`,
		`CREATE TABLE foreman.evil (x int)`,
	} {
		_, err := conn.Exec(ctx, sql)
		var pe *pgconn.PgError
		require.ErrorAs(t, err, &pe, "%s was not refused", sql)
		assert.Equal(t, "42501", pe.Code, "%s: %v", sql, err)
	}

	c.stopAll(t)
	for _, w := range []*proc{w1, w2} {
		assert.Contains(t, w.out.String(), "worker: stopped after")
		assert.NotContains(t, w.out.String(), "worker: warning", "a role of its own is no cause for a warning")
	}
}

func TestRoleFlagsAreChecked(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-role", "boss", "-plan", f.plan}, `-role "boss"`},
		{[]string{"-role", roleWorker, "-plan", f.plan}, "needs -db"},
		{[]string{"-db", "postgres://x", "-plan", f.plan}, "-db and -remote go with -role"},
		{[]string{"-db", "postgres://x", "-resolve", "US-001=retry"}, "leading coordinator's page"},
		{[]string{"-role", "coordinator", "-db", "postgres://x", "-remote", "r", "-status"}, "give -status -db alone"},
		{[]string{"-role", "worker", "-db", "postgres://x", "-remote", "r", "-worker-role", "w", "-plan", f.plan}, "-worker-role goes with -role coordinator"},
	} {
		code, _, stderr := f.foreman(t, tc.args...)
		assert.Equal(t, exitUsage, code, "%v", tc.args)
		assert.Contains(t, stderr, tc.want, "%v", tc.args)
	}
}

// A leader stopped (SIGSTOP) past its lease while a story is being built
// is replaced; when it is continued (SIGCONT) it learns it lost the lease
// and exits without moving the shared main again, and the new leader
// finishes the plan: every story once.
func TestAPausedOldLeaderNeverMergesAfterItResumes(t *testing.T) {
	c := newCluster(t)
	started := filepath.Join(c.ctl, "US-001.started")
	release := filepath.Join(c.ctl, "US-001.release")
	for _, p := range []string{started, release} {
		require.NoError(t, syscall.Mkfifo(p, 0o644))
	}
	c.start(t, "worker-1", roleWorker)
	c.start(t, "worker-2", roleWorker)
	old := c.start(t, "coord-a", roleCoordinator, leaseArgs()...)
	old.waitFor(t, "coordinator: leading, term 1", time.Minute)
	next := c.start(t, "coord-b", roleCoordinator, leaseArgs()...)
	next.waitFor(t, "coordinator: campaigning", time.Minute)

	// US-001's build has committed and waits: the old leader is idle.
	readFIFO(t, started, 2*time.Minute)
	require.NoError(t, os.Remove(started)) // later builds do not wait
	require.NoError(t, old.cmd.Process.Signal(syscall.SIGSTOP))
	c.failOver(t, 1, func() bool { return strings.Contains(next.out.String(), "coordinator: leading, term 2") }, time.Minute)
	writeFIFO(t, release)
	before := len(c.pushesToMain(t))
	require.NoError(t, old.cmd.Process.Signal(syscall.SIGCONT))

	code := old.wait(t, time.Minute)
	assert.NotEqual(t, exitMerged, code)
	// It learns from its lease's renewal or from its next write, whichever
	// comes first (its own clock says the lease has time left), and stops
	// either way.
	assert.Regexp(t, `lost the lease \(term 1\)|write fenced`, old.out.String())
	require.Equal(t, exitMerged, next.wait(t, 3*time.Minute), "new leader:\n%s", next.out)

	got := c.remoteMerged(t)
	assert.ElementsMatch(t, []string{"US-001", "US-002", "US-003"}, got, "each story once on the shared main")
	pushes := c.pushesToMain(t)
	for _, who := range pushes[before:] {
		assert.Equal(t, "coord-b", who, "after it resumed, the old leader moved main: %v", pushes)
	}
}

// The window no database fence closes: a leader stopped in the middle of
// a merge, after its last check of the lease and before its push. The new
// leader fences the shared repository with its term before it does
// anything, so the old one's push is refused once it resumes.
func TestALeaderStoppedMidMergeLandsNothingOnceResumed(t *testing.T) {
	c := newCluster(t)
	started := filepath.Join(c.ctl, "check.started")
	release := filepath.Join(c.ctl, "check.release")
	for _, p := range []string{started, release} {
		require.NoError(t, syscall.Mkfifo(p, 0o644))
	}
	// The merge check runs between the leader's store check and its push;
	// coord-a's first one waits there.
	check := filepath.Join(c.ctl, "merge-check.sh")
	// It runs in the coordinator's sandbox (the control directory bound),
	// in an environment built without the test's variables: the
	// checkout's path names the coordinator.
	script := fmt.Sprintf("#!/bin/sh\ncase \"$PWD\" in */coord-a/*) a=1 ;; esac\nif [ -n \"$a\" ] && mkdir %[1]s/check.once 2>/dev/null; then\n"+
		"  echo started > %[2]s\n  read line < %[3]s\nfi\nexit 0\n", shellQuote(c.ctl), shellQuote(started), shellQuote(release))
	require.NoError(t, os.WriteFile(check, []byte(script), 0o755))

	c.start(t, "worker-1", roleWorker)
	old := c.start(t, "coord-a", roleCoordinator, leaseArgs("-merge-check", check, "-bind", c.ctl)...)
	old.waitFor(t, "coordinator: leading, term 1", time.Minute)
	next := c.start(t, "coord-b", roleCoordinator, leaseArgs("-merge-check", check, "-bind", c.ctl)...)
	next.waitFor(t, "coordinator: campaigning", time.Minute)

	readFIFO(t, started, 3*time.Minute) // coord-a is inside its first merge
	require.NoError(t, old.cmd.Process.Signal(syscall.SIGSTOP))
	c.failOver(t, 1, func() bool { return strings.Contains(next.out.String(), "coordinator: leading, term 2") }, time.Minute)
	before := len(c.pushesToMain(t))
	writeFIFO(t, release)
	require.NoError(t, old.cmd.Process.Signal(syscall.SIGCONT))

	code := old.wait(t, time.Minute)
	assert.NotEqual(t, exitMerged, code)
	require.Equal(t, exitMerged, next.wait(t, 3*time.Minute), "new leader:\n%s", next.out)
	assert.ElementsMatch(t, []string{"US-001", "US-002", "US-003"}, c.remoteMerged(t), "each story once on the shared main")
	pushes := c.pushesToMain(t)
	for _, who := range pushes[before:] {
		assert.Equal(t, "coord-b", who, "after it resumed, the old leader moved main: %v\nold leader:\n%s", pushes, old.out)
	}
	assert.Contains(t, c.git(t, "--git-dir", c.remote, "log", "-1", "--format=%B", "refs/foreman/leader"), "Foreman-Leader-Term: 2")
}

func readFIFO(t *testing.T, path string, limit time.Duration) {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		f, err := os.Open(path)
		if err == nil {
			_, err = f.Read(make([]byte, 64))
			f.Close()
		}
		got <- err
	}()
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(limit):
		t.Fatalf("nothing came through %s within %v", path, limit)
	}
}

// writeFIFO writes a line to a FIFO without waiting for a reader (the
// agent may have been killed meanwhile).
func writeFIFO(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteString("go\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
}
