package agentcmd_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"

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
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := agentcmd.New(c.cfg).Check()
			if c.want == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, c.want)
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
