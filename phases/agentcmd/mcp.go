package agentcmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/agentforeman/foreman/phases"
)

// ErrMCPServer means a request's MCP server cannot be configured (a name
// an agent cannot use, no URL).
var ErrMCPServer = errors.New("agentcmd: invalid MCP server")

// mcpName is what both CLIs accept as a server's name: Claude Code names
// the tools mcp__<name>__<tool>, and Codex's -c override takes it as a bare
// TOML key (mcp_servers.<name>.url).
var mcpName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func checkMCPServers(servers []phases.MCPServer) error {
	for _, s := range servers {
		if !mcpName.MatchString(s.Name) {
			return fmt.Errorf("%w: name %q (letters, digits, '_' and '-')", ErrMCPServer, s.Name)
		}
		if s.URL == "" {
			return fmt.Errorf("%w: %s has no URL", ErrMCPServer, s.Name)
		}
	}
	return nil
}

// claudeMCPTools are the names under which Claude Code lets the agent call
// the servers' tools without asking: mcp__<server>__<tool>
// (https://code.claude.com/docs/en/iam#tool-specific-permission-rules).
func claudeMCPTools(servers []phases.MCPServer) []string {
	var names []string
	for _, s := range servers {
		for _, t := range s.Tools {
			names = append(names, "mcp__"+s.Name+"__"+t)
		}
	}
	return names
}

// claudeMCPConfig writes the servers as a Claude Code MCP configuration
// file in dir and returns the argument that loads it. The format is the
// one of .mcp.json and `claude --mcp-config <file>`: an "mcpServers"
// object whose entries have "type": "http", "url" and "headers"
// (https://code.claude.com/docs/en/mcp, "Add a remote HTTP server" and
// the project-scope JSON; https://code.claude.com/docs/en/cli-reference,
// --mcp-config). The file, not an inline JSON argument, keeps the bearer
// token out of the process list; it is readable by its owner only.
func claudeMCPConfig(servers []phases.MCPServer, dir string) ([]string, error) {
	type server struct {
		Type    string            `json:"type"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers,omitempty"`
	}
	cfg := struct {
		MCPServers map[string]server `json:"mcpServers"`
	}{MCPServers: map[string]server{}}
	for _, s := range servers {
		e := server{Type: "http", URL: s.URL}
		if s.BearerToken != "" {
			e.Headers = map[string]string{"Authorization": "Bearer " + s.BearerToken}
		}
		cfg.MCPServers[s.Name] = e
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "mcp-config.json")
	if err := os.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return nil, err
	}
	// One argument: --mcp-config takes several values (<configs...>), and
	// "--mcp-config <path>" would take a prompt after it for another.
	return []string{"--mcp-config=" + path}, nil
}

// codexMCPArgs are Codex's -c overrides for the servers:
// mcp_servers.<name>.url and, for a token, .bearer_token_env_var naming
// the variable that holds it (Codex reads a streamable HTTP server's
// bearer token only from the environment), plus that variable for the
// agent's environment. Codex documents both keys under "Streamable HTTP"
// in https://github.com/openai/codex/blob/main/docs/config.md (MCP
// integration), and -c key=value overrides any config.toml key, the value
// parsed as TOML (same file, "-c/--config"). Nothing is written to the
// user's ~/.codex/config.toml.
func codexMCPArgs(servers []phases.MCPServer) (args, env []string) {
	for _, s := range servers {
		args = append(args, "-c", "mcp_servers."+s.Name+".url="+tomlString(s.URL))
		// codex exec refuses an MCP tool call that needs approval ("MCP tool
		// call requires approval, but approval policy is never"): the host
		// gave the agent this server to call, so its tools are approved.
		args = append(args, "-c", "mcp_servers."+s.Name+`.default_tools_approval_mode="approve"`)
		if len(s.Tools) > 0 {
			args = append(args, "-c", "mcp_servers."+s.Name+".enabled_tools="+tomlStrings(s.Tools))
		}
		if s.BearerToken == "" {
			continue
		}
		name := s.BearerTokenEnv
		if name == "" {
			name = "FOREMAN_MCP_TOKEN_" + s.Name
		}
		args = append(args, "-c", "mcp_servers."+s.Name+".bearer_token_env_var="+tomlString(name))
		env = append(env, name+"="+s.BearerToken)
	}
	return args, env
}

// tomlString quotes s as a TOML basic string: JSON's string escapes are
// all valid in one (\", \\, \n, \uXXXX, ...).
func tomlString(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

// tomlStrings is a TOML array of basic strings.
func tomlStrings(ss []string) string {
	b, _ := json.Marshal(ss) // strings always marshal; a JSON array of strings is a TOML one
	return string(b)
}
