package agentcmd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// homeRoot is where the driver keeps its agents' homes, one per workspace;
// "" when it keeps none (each execution's home is removed after it).
func (d *Driver) homeRoot() string {
	if d.cfg.Sandbox.HomeDir != "" {
		return d.cfg.Sandbox.HomeDir
	}
	if d.cfg.LeaseDir != "" {
		return filepath.Join(d.cfg.LeaseDir, "homes")
	}
	return ""
}

// agentHOME is the HOME of an agent whose home is hostHome on the host:
// sandboxHome for a sandboxed agent, "" for one that is not (hostHome "").
func agentHOME(hostHome string) string {
	if hostHome == "" {
		return ""
	}
	return sandboxHome
}

// RemoveHome removes the home the sandbox keeps for workspace's agents
// (under Sandbox.HomeDir or <LeaseDir>/homes) and its gate checks' (see
// Contain), for a host that is done
// with the workspace for good: the CLI's sessions and whatever the agents
// left in their home (a transcript, a saved flood of output) go with it,
// where otherwise every workspace's home would stay. Call it before the
// workspace itself is removed (its path names the home). It does nothing
// where no home is kept; with a LeaseDir it waits for this driver's agent
// in the workspace and fails with ErrLeaseHeld while another driver's or
// process's works there.
func (d *Driver) RemoveHome(ctx context.Context, workspace string) error {
	root := d.homeRoot()
	if root == "" {
		return nil
	}
	if d.cfg.LeaseDir != "" {
		lease, err := d.acquireLease(ctx, workspace)
		if err != nil {
			return err
		}
		defer lease.release()
	}
	key, _, err := leaseKey(workspace)
	if err != nil {
		return err
	}
	// The agents' home, and the gate checks' beside it (gatebox.go).
	for _, home := range []string{filepath.Join(root, key), filepath.Join(root, key+gateHomeSuffix)} {
		if err := removeHomeDir(home); err != nil {
			return fmt.Errorf("agentcmd: removing the agent home of %s: %w", workspace, err)
		}
	}
	return nil
}

// removeHomeDir removes home, and what an agent or a check left read-only
// there (Go's module cache is): writable first, then again.
func removeHomeDir(home string) error {
	if err := os.RemoveAll(home); err == nil {
		return nil
	}
	_ = filepath.WalkDir(home, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(home); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
