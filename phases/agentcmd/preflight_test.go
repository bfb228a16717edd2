package agentcmd_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases/agentcmd"
)

func TestCheck(t *testing.T) {
	script := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		cfg  agentcmd.Config
		want error
	}{
		{"in PATH", agentcmd.Config{Argv: []string{"sh", "-c", "true"}}, nil},
		{"absolute path", agentcmd.Config{Argv: []string{script}}, nil},
		{"relative to each workspace: not checked", agentcmd.Config{Argv: []string{"./bin/agent"}}, nil},
		{"missing program", agentcmd.Config{Argv: []string{"no-such-agent-xyz"}}, agentcmd.ErrAgentNotFound},
		{"missing absolute program", agentcmd.Config{Argv: []string{filepath.Join(t.TempDir(), "gone")}}, agentcmd.ErrAgentNotFound},
		{"no command", agentcmd.Config{}, agentcmd.ErrNoCommand},
		{"unknown format", agentcmd.Config{Format: "yaml"}, agentcmd.ErrUnknownFormat},
		{"sandbox required, bwrap missing", agentcmd.Config{Argv: []string{"sh"},
			Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxRequired, Bwrap: filepath.Join(t.TempDir(), "no-bwrap")}}, agentcmd.ErrNoSandbox},
		{"sandbox required, bwrap cannot make one", agentcmd.Config{Argv: []string{"sh"},
			Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxRequired, Bwrap: "false"}}, agentcmd.ErrNoSandbox},
		{"sandbox required, program relative to each workspace", agentcmd.Config{Argv: []string{"./bin/agent"},
			Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxRequired, Bwrap: "false"}}, agentcmd.ErrNoSandbox},
		{"sandbox wanted where available: no error", agentcmd.Config{Argv: []string{"sh"},
			Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxAuto, Bwrap: "false"}}, nil},
		{"sandbox off: not looked for", agentcmd.Config{Argv: []string{"sh"},
			Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxOff, Bwrap: "false"}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := agentcmd.New(c.cfg)
			err := d.Check()
			if c.want == nil {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, c.want)
			if c.want == agentcmd.ErrNoSandbox {
				// The error says why, as Containment does.
				why, ok := strings.CutPrefix(d.Containment(), "none: ")
				assert.True(t, ok, d.Containment())
				assert.Contains(t, err.Error(), why)
			}
		})
	}
}

func TestWithLeaseDir(t *testing.T) {
	d := agentcmd.New(agentcmd.Config{Argv: []string{"sh"}})
	assert.Empty(t, d.LeaseDir())
	dir := t.TempDir()
	d2 := d.WithLeaseDir(dir)
	assert.Equal(t, dir, d2.LeaseDir())
	assert.Empty(t, d.LeaseDir(), "the original is unchanged")
	assert.NoError(t, d2.Check())
}
