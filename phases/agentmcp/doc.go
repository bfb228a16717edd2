// Package agentmcp is the MCP server a team of agents reports to: a
// structured completion that cannot be lost in an agent's output or
// forged by another worker.
//
// An agent CLI that speaks MCP (Claude Code, Codex) calls two tools on it,
// over streamable HTTP on the loopback interface:
//
//   - report: the stage's outcome, a summary, a score, and the agent's
//     assignment id (FOREMAN_ASSIGNMENT).
//   - status: what the assignment is, whether it is still current, the
//     outcomes its stage accepts and what the team expects.
//
// # Per-assignment credentials
//
// There is no token shared by all agents. The host (pipeline/team starts
// one server per Run) tells the Server when an assignment begins (Begin),
// and Begin returns that assignment's bearer token: 128 random bits from
// crypto/rand, which prove that one assignment and no other. Every
// request must carry a token Begin issued; the server looks it up by its
// SHA-256 digest, so that how long a lookup takes says nothing about how
// much of a guess is right. The token stops working when the assignment's
// stage ends (End). The host hands each agent its own token, in its
// environment (Env: FOREMAN_MCP_URL, FOREMAN_MCP_TOKEN) and, for agent
// CLIs, in their MCP configuration (phases.AgentRequest.MCPServers, whose
// BearerToken agentcmd turns into Claude Code's --mcp-config and Codex's
// mcp_servers settings). A Go agent can use Dial.
//
// A request is refused, counted in Stats and told to Config.OnRefused
// (with the assignment whose token it carried, so that the host can hold
// that agent to account) when:
//
//   - it carries no token, or one never issued: HTTP 401, Stats.Unauthorized
//     (no assignment to blame, so no Refusal);
//   - it carries the token of an assignment that has ended: HTTP 401 (a
//     tool error when it ended during the call), Stats.Expired,
//     RefusedEnded;
//   - its report or status query names an assignment other than its
//     token's (a worker acting for another story's stage, whose id is easy
//     to guess): a tool error, Stats.Forged, RefusedForeign. Nothing of
//     the other assignment is applied or shown.
//
// # Reports
//
// A report its token proves is decided by Decide, a pure function of where
// the assignment stands and of the host's Check:
//
//   - an assignment that is no longer current is stale: counted
//     (Stats.Stale, Config.OnStale) and ignored, exactly as a message from
//     a replaced worker is, and the agent is told to stop (not who
//     replaced it);
//   - a current one's report is checked by the host: a malformed one is a
//     tool error saying why, and a completion of work that must change the
//     workspace (a build) is not taken when the workspace shows no commit
//     or change since the assignment's base; otherwise it is accepted, and
//     the last accepted report is what End returns.
package agentmcp
