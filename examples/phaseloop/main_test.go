package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/phases/agentcmd"
)

// The README's first command: the demo run succeeds in two iterations.
func TestDemoRunSucceedsAfterFeedback(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go vet and go test in a real repository")
	}
	var out bytes.Buffer
	ok, err := run(context.Background(), options{prompt: demoPrompt, maxIterations: 3, quiet: true}, &out)
	require.NoError(t, err, out.String())
	assert.True(t, ok, out.String())
	assert.Contains(t, out.String(), "iteration 1")
	assert.Contains(t, out.String(), "failed: L1/test")
	assert.Contains(t, out.String(), "outcome   SUCCEEDED (verified) after 2 iterations")
}

func TestDirNeedsPromptAndAgent(t *testing.T) {
	var out bytes.Buffer
	_, err := run(context.Background(), options{dir: t.TempDir(), prompt: demoPrompt}, &out)
	assert.ErrorContains(t, err, "-dir needs -prompt")
	_, err = run(context.Background(), options{dir: t.TempDir(), prompt: "p", promptSet: true}, &out)
	assert.ErrorContains(t, err, "-dir needs -agent")
	_, err = run(context.Background(), options{dir: t.TempDir(), prompt: "p", promptSet: true, agent: "'unterminated"}, &out)
	assert.ErrorContains(t, err, "unterminated single quote")
}

// A fake Claude Code CLI on PATH: -format claude needs no -agent, and the
// session, tokens and cost it reports are printed.
func TestClaudeFormatOnOwnRepo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go vet and go test in a real repository")
	}
	ctx := context.Background()
	repo := filepath.Join(t.TempDir(), "repo")
	require.NoError(t, demo.NewGoModuleRepo(ctx, repo))
	bin := t.TempDir()
	_, err := demo.WriteScript(bin, "claude", `#!/bin/sh
echo '{"type":"system","subtype":"init","session_id":"sess-42","model":"claude-test"}'
echo 'package calc' > extra.go
git add extra.go && git commit -qm "add extra.go"
echo '{"type":"result","subtype":"success","is_error":false,"session_id":"sess-42","total_cost_usd":0.0125,"result":"done","usage":{"input_tokens":100,"output_tokens":20}}'
`)
	require.NoError(t, err)
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	for _, kv := range demo.GitEnv() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	format, err := agentcmd.ParseFormat("claude")
	require.NoError(t, err)

	var out bytes.Buffer
	ok, err := run(ctx, options{dir: repo, prompt: "add extra.go", promptSet: true, format: format, maxIterations: 1, quiet: true}, &out)
	require.NoError(t, err, out.String())
	assert.True(t, ok, out.String())
	assert.Contains(t, out.String(), "session sess-42")
	assert.Contains(t, out.String(), "120 tokens")
	assert.Contains(t, out.String(), "$0.0125")
}
