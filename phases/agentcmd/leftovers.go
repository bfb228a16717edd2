package agentcmd

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentforeman/foreman/internal/proc"
)

// An execution makes entries of its own outside its workspace (its decoys
// under <LeaseDir>/decoys; in the temporary directory its copy of the git
// directory, an empty file, and without a LeaseDir its home and MCP
// configuration) and removes them once its agent is gone. A host killed
// before that (kill -9, a crash) leaves them behind: their names carry the
// owner process's pid and start time (ownerTag), and each driver's first
// execution removes those whose owner is gone (sweepLeftovers).

// tempPrefixes begin the names of the executions' own entries in the
// temporary directory; decoyRunPrefix those under <LeaseDir>/decoys.
var tempPrefixes = []string{"foreman-sandbox-git-", "foreman-sandbox-empty-", "foreman-agent-home-", "foreman-mcp-"}

const decoyRunPrefix = "run-"

// maxSwept bounds the leftovers one driver removes, so that its first
// execution does not wait long behind a host's years of crashes.
const maxSwept = 256

// ownerPattern is the os.MkdirTemp / os.CreateTemp pattern of an entry
// named prefix of this process: prefix, "<pid>.<start time>-", random.
func ownerPattern(prefix string) string {
	pid := os.Getpid()
	var start uint64
	if st, err := proc.ReadStat(pid); err == nil {
		start = st.StartTime
	}
	return prefix + strconv.Itoa(pid) + "." + strconv.FormatUint(start, 10) + "-*"
}

// ownerGone reports whether entry name, made with ownerPattern(prefix),
// belongs to a process that is gone; false for a name without an owner.
func ownerGone(name, prefix string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return false
	}
	tag, _, ok := strings.Cut(rest, "-")
	pidText, startText, ok2 := strings.Cut(tag, ".")
	pid, err := strconv.Atoi(pidText)
	start, err2 := strconv.ParseUint(startText, 10, 64)
	if !ok || !ok2 || err != nil || err2 != nil || pid <= 0 || start == 0 {
		return false
	}
	return !proc.Alive(pid, start)
}

// sweepLeftovers removes, once per driver, what executions of processes
// that are gone left behind.
func (d *Driver) sweepLeftovers() {
	d.swept.Do(func() {
		budget := maxSwept
		sweep := func(dir, prefix string) {
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if budget <= 0 {
					return
				}
				if ownerGone(e.Name(), prefix) {
					budget--
					removeDecoys(filepath.Join(dir, e.Name()))
				}
			}
		}
		for _, prefix := range tempPrefixes {
			sweep(os.TempDir(), prefix)
		}
		if d.cfg.LeaseDir != "" {
			sweep(filepath.Join(d.cfg.LeaseDir, decoyDirName), decoyRunPrefix)
		}
	})
}
