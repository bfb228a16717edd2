// Package modeltest is a scripted model server for running the real agent
// CLIs offline: Claude Code, Codex and Gemini CLI talk to it as they would
// to their provider, and it answers from scripts, the way rivertest serves river's
// users. Hosts use it to test their own setups; Foreman's tests run the
// pinned real CLIs through it.
//
// # The APIs
//
// A Server listens on 127.0.0.1 and serves
//
//   - the Anthropic Messages API, POST /v1/messages (Claude Code adds
//     ?beta=true): a server-sent event stream (message_start, ping,
//     content_block_start/delta/stop with text_delta and tool_use blocks
//     sent as input_json_delta, message_delta with the stop reason and the
//     usage, message_stop) or, when the request does not ask to stream, one
//     JSON message; errors as {"type":"error","error":{...}} with their
//     headers; POST /v1/messages/count_tokens with an estimate;
//   - the OpenAI Responses API, POST /v1/responses, as Codex 0.169 calls it:
//     response.created, response.output_item.added/done for message,
//     function_call and custom_tool_call items, response.output_text.delta,
//     response.completed with the usage;
//   - the Gemini API as Gemini CLI 0.61 calls it, POST
//     /v1beta/models/<model>:generateContent and
//     :streamGenerateContent?alt=sse (data-only events, each a
//     GenerateContentResponse: text parts in chunks, then functionCall parts,
//     finishReason STOP and usageMetadata in the last); errors as
//     {"error":{"code","message","status","details"}} (a 429 with a
//     retry-after above zero carries a google.rpc.RetryInfo detail);
//     :countTokens with an estimate;
//   - 200 to HEAD probes (Claude Code sends HEAD /api/hello unless
//     CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC is set) and GET /; a logged
//     404 to anything else.
//
// Point Claude Code at it with ANTHROPIC_BASE_URL=URL() and any
// ANTHROPIC_API_KEY (CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 keeps it from
// calling anything else); Codex with a model provider whose base_url is
// URL()+"/v1", wire_api "responses" (in CODEX_HOME/config.toml or -c
// options); Gemini CLI with GOOGLE_GEMINI_BASE_URL=URL(), any
// GEMINI_API_KEY and a settings.json selecting API-key authentication
// (security.auth.selectedType "gemini-api-key").
//
// # Scripts
//
// A Script is a conversation: a list of turns. Each agent session (Claude
// Code's X-Claude-Code-Session-Id, Codex's Session-Id, for Gemini CLI,
// which sends no session header, its first user message without the
// <session_context> block it rebuilds on resume; a resumed session goes on
// with its script) gets the first script whose
// Match is in its prompt, so several agents at once each follow their own.
// Each request of the session is answered with the first remaining turn
// whose When is in the request's latest input (the user message or the tool
// results since the model last spoke); turns before it are skipped. A turn
// answers with text, tool calls (several in one response), or an API error
// (RateLimited, Overloaded, Unauthorized, ServerError: each consumes a turn,
// so a retry gets the next one), after an optional Delay (on Config.Clock)
// or Wait. A request no script or turn matches gets a text saying so, and is
// logged and recorded as Unmatched.
//
// Calls are portable between the two CLIs: Shell(cmd) is Claude Code's Bash
// tool and Codex's exec_command (through its exec tool, JavaScript calling
// tools.exec_command, as Codex 0.169's default model gets its tools);
// WriteFile(path, content) is Claude Code's Write tool and a shell command on
// Codex. On the Gemini API they are Gemini CLI's run_shell_command
// {"command"} and write_file {"file_path","content"} (offered only in its
// yolo approval mode, and auto_edit for write_file: a headless run's
// default mode leaves them out), and a Tool named the Claude Code way,
// mcp__server__tool, is called by Gemini CLI's name for it,
// mcp_server_tool. Claude Code 2.x defers some tools (MCP tools among them: the request
// offers ToolSearch, not mcp__foreman__report): a Tool call of a deferred
// tool is preceded by ToolSearch {"query":"select:<name>"}, served on its own
// request, and the call itself answers the next one. LoadTools scripts that
// step explicitly.
//
// Requests offering no tools (title or summary requests, which the CLIs make
// beside the conversation) are side requests: they get Config.SideText and
// consume no turn. A Gemini API side request asking for JSON (Gemini CLI's
// model router, when the model is "auto", and its next-speaker check) gets
// a value of its schema instead: the first of an enum, "modeltest", 1,
// false.
//
// # Records
//
// Requests returns every request with what was served: path, model, tools
// offered, prompt and latest input, session, script and turn, the text and
// calls served and the exact token usage. Usage(session) sums what a session
// was served: what its CLI should report (Claude Code's result usage and
// total_cost_usd; Codex's turn.completed usage, which after a resume counts
// the whole thread; Gemini CLI's result stats, which count the router's
// side request too and, after a resume, only the run's own requests).
//
// Claude Code retries 401, 429, 500 and 529 by itself with delays doubling
// from about half a second, whatever retry-after says, printing a
// {"type":"system","subtype":"api_retry",...} line each time;
// CLAUDE_CODE_MAX_RETRIES caps the retries. Codex retries with "Reconnecting...
// N/M" error lines; its provider's stream_max_retries and request_max_retries
// cap them. Gemini CLI retries 429 and 5xx up to 10 attempts, waiting 5 s
// doubling to 30 s (longer if a RetryInfo says so), and prints the retries
// on stderr only; it does not retry a 401, nor a 429 whose RetryInfo asks
// for more than 300 s (a terminal quota error). It exits with the HTTP
// status modulo 256 (145 for 401, 173 for 429).
package modeltest
