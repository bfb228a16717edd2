// Package realagent finds the pinned real agent CLIs (Claude Code, Codex
// and Gemini CLI, installed by .ci/install-agents from .ci/agents/package.json) and
// builds the environment that points each at a modeltest server, for tests
// that run the real CLIs offline.
//
// The binaries are looked up in $FOREMAN_AGENT_BIN, else in
// <module root>/.ci/agents/node_modules/.bin. Require skips a test when a CLI
// is missing, and fails it when CI=true.
//
// ClaudeEnv gives Claude Code ANTHROPIC_BASE_URL, an API key, a HOME of its
// own and CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1. CodexEnv writes a
// config.toml selecting a model provider with wire_api "responses" in a
// CODEX_HOME that must not be under /tmp (Codex's bubblewrap sandbox gives
// commands a private /tmp and then misses its own helper); CodexHome makes
// one in the user's cache directory. GeminiEnv writes a
// ~/.gemini/settings.json selecting API-key authentication into a HOME of
// Gemini CLI's own and points it at the server with GOOGLE_GEMINI_BASE_URL.
package realagent
