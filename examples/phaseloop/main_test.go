package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases/agentcmd"
)

// The README's first command: the demo run succeeds in two iterations.
func TestDemoRunSucceedsAfterFeedback(t *testing.T) {
	if v := os.Getenv("FOREMAN_STRESS"); v == "" || v == "0" {
		t.Skip("long end-to-end run (go vet and go test in a real repository): FOREMAN_STRESS=1 runs it (CI does)")
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
	assert.ErrorContains(t, err, "-agent: ")
	assert.ErrorContains(t, err, "nterminated")
}

// A fake Claude Code CLI on PATH: -format claude needs no -agent, and the
// session, tokens and cost it reports are printed.
func TestClaudeFormatOnOwnRepo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go vet and go test in a real repository")
	}
	ctx := context.Background()
	repo := filepath.Join(t.TempDir(), "repo")
	require.NoError(t, newRepo(ctx, repo))
	bin := t.TempDir()
	err := os.WriteFile(filepath.Join(bin, "claude"), []byte(`#!/bin/sh
echo '{"type":"system","subtype":"init","session_id":"5d8c3a2e-9f1b-4c6d-8e7a-1b2c3d4e5f60","model":"claude-test"}'
echo 'package calc' > extra.go
git add extra.go && git commit -qm "add extra.go"
echo '{"type":"result","subtype":"success","is_error":false,"session_id":"5d8c3a2e-9f1b-4c6d-8e7a-1b2c3d4e5f60","total_cost_usd":0.0125,"result":"done","usage":{"input_tokens":100,"output_tokens":20}}'
`), 0o755)
	require.NoError(t, err)
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	for _, kv := range gitEnv() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	format, err := agentcmd.ParseFormat("claude")
	require.NoError(t, err)

	var out bytes.Buffer
	ok, err := run(ctx, options{dir: repo, prompt: "add extra.go", promptSet: true, format: format, maxIterations: 1, quiet: true}, &out)
	require.NoError(t, err, out.String())
	assert.True(t, ok, out.String())
	assert.Contains(t, out.String(), "session 5d8c3a2e-9f1b-4c6d-8e7a-1b2c3d4e5f60")
	assert.Contains(t, out.String(), "120 tokens")
	assert.Contains(t, out.String(), "$0.0125")
}

// shellArgv's command line is split by sh as a shell would, and the
// placeholders arrive as whole arguments, never pasted into the line.
func TestShellArgv(t *testing.T) {
	prompt := `it's "quoted"; $(touch /tmp/pwned) and spaced`
	expand := strings.NewReplacer("{prompt}", prompt, "{task}", "T", "{feedback}", "F", "{workspace}", "/w s", "{session}", "", "{iteration}", "2")
	tests := []struct{ cmdline, want string }{
		{`printf '<%s>' 'a b' {prompt}`, "<a b><" + prompt + ">"},
		{`printf '<%s>' --in={workspace}`, "<--in=/w s><" + prompt + ">"}, // no {prompt}: it comes last
		{`printf "<%s>" {session} x {iteration}`, "<><x><2><" + prompt + ">"},
		{`printf "<%s>" {task} {feedback}`, "<T><F>"},
	}
	for _, tt := range tests {
		argv, err := shellArgv(tt.cmdline)
		require.NoError(t, err)
		argv = append(argv, "--resume", "s-1") // what agentcmd adds to resume a session
		for i := range argv {
			argv[i] = expand.Replace(argv[i])
		}
		got, err := exec.Command(argv[0], argv[1:]...).Output()
		require.NoError(t, err, tt.cmdline)
		assert.Equal(t, tt.want+"<--resume><s-1>", string(got), tt.cmdline)
	}
	_, err := shellArgv(`my-agent 'unterminated {prompt}`)
	assert.ErrorContains(t, err, "nterminated")
}
