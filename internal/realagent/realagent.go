package realagent

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// ErrMissing is matched (with errors.Is) when a pinned CLI is not installed.
var ErrMissing = errors.New("realagent: agent CLI not installed (run .ci/install-agents)")

// CLI names an agent CLI: the name of its binary.
type CLI string

// The pinned CLIs (.ci/agents/package.json).
const (
	Claude CLI = "claude" // @anthropic-ai/claude-code
	Codex  CLI = "codex"  // @openai/codex
	Gemini CLI = "gemini" // @google/gemini-cli
)

// BinEnv overrides the directory the binaries are found in.
const BinEnv = "FOREMAN_AGENT_BIN"

// module is the module whose root holds .ci/agents.
const module = "github.com/agentforeman/foreman"

// Dir is the directory holding the pinned binaries: $FOREMAN_AGENT_BIN, else
// <module root>/.ci/agents/node_modules/.bin, the module root found by
// walking up from the working directory.
func Dir() (string, error) {
	if d := os.Getenv(BinEnv); d != "" {
		return d, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".ci", "agents", "node_modules", ".bin"), nil
}

// ModuleRoot is the root of Foreman's module, found by walking up from the
// working directory to the go.mod declaring it.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("realagent: working directory: %w", err)
	}
	for {
		if declares(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("realagent: no go.mod of %s above the working directory", module)
		}
		dir = parent
	}
}

func declares(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "module ") {
			return strings.TrimSpace(strings.TrimPrefix(line, "module ")) == module
		}
	}
	return false
}

// Path is the path of the CLI's binary; an error matching ErrMissing when it
// is not there.
func Path(cli CLI) (string, error) {
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, string(cli))
	st, err := os.Stat(p)
	if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%w: %s not found at %s", ErrMissing, cli, p)
	}
	return p, nil
}

// Require returns the CLI's path. When it is missing the test is skipped,
// or fails when the environment says CI=true: CI must run the real CLIs.
func Require(tb testing.TB, cli CLI) string {
	tb.Helper()
	p, err := Path(cli)
	if err == nil {
		return p
	}
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		tb.Fatalf("%v; CI=true requires the real CLIs", err)
		return ""
	}
	tb.Skipf("%v", err)
	return ""
}
