// Package agentmcp is the MCP server a team of agents reports to: a
// structured completion that cannot be lost in an agent's output or
// forged by another worker.
//
// An agent CLI that speaks MCP (Claude Code, Codex) calls two tools on it,
// over streamable HTTP on the loopback interface:
//
//   - report: the stage's outcome, a summary, a score, and the agent's
//     assignment id (FOREMAN_ASSIGNMENT) as the fence.
//   - status: what the assignment is, whether it is still current, the
//     outcomes its stage accepts and what the team expects.
//
// The host (pipeline/team starts one per Run) tells the Server when an
// assignment begins (Begin: it becomes its item's current one, and the
// assignment it replaces becomes stale) and when its stage ends (End:
// the report it accepted, if any). Each report is decided by Decide, a
// pure function of where its assignment id stands and of the host's Check:
//
//   - an id the server never saw is refused with a tool error (forged or
//     mistyped);
//   - an id that is no longer current is stale: counted (Stats.Stale,
//     Config.OnStale) and ignored, exactly as a message from a replaced
//     worker is, and the agent is told to stop (not who replaced it);
//   - a current one's report is checked by the host: a malformed one is a
//     tool error saying why, and a completion of work that must change the
//     workspace (a build) is not taken when the workspace shows no commit
//     or change since the assignment's base; otherwise it is accepted, and
//     the last accepted report is what End returns.
//
// Every request must carry the server's bearer token (Config.Token, or a
// random one), so that only the agents the host gave it can report. The
// host passes the endpoint and the token to its agents in the environment
// (Server.Env: FOREMAN_MCP_URL, FOREMAN_MCP_TOKEN) and, for agent CLIs,
// in their MCP configuration (phases.AgentRequest.MCPServers, which
// agentcmd turns into Claude Code's --mcp-config and Codex's
// mcp_servers settings). A Go agent can use Dial.
package agentmcp
