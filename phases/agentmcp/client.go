package agentmcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentforeman/foreman"
)

// ToolError is a tool call the server answered with a tool error (a
// refused, malformed or unproven report): Message says why.
type ToolError struct {
	Tool    string
	Message string
}

func (e *ToolError) Error() string { return "agentmcp: " + e.Tool + ": " + e.Message }

// Client is a Go agent's connection to the server, through the SDK's MCP
// client over streamable HTTP. Agent CLIs (Claude Code, Codex) use their
// own MCP clients instead (agentcmd wires them).
type Client struct {
	session *mcp.ClientSession
}

// Dial connects to the endpoint url with the bearer token (the values of
// EnvURL and EnvToken).
func Dial(ctx context.Context, url, token string) (*Client, error) {
	if url == "" {
		return nil, errors.New("agentmcp: no endpoint URL (is " + EnvURL + " set?)")
	}
	hc := &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
	c := mcp.NewClient(&mcp.Implementation{Name: "foreman-agent", Version: "1"}, nil)
	// The server is stateless and sends nothing unasked: no standing
	// stream to open.
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		return nil, fmt.Errorf("agentmcp: connecting to %s: %w", url, err)
	}
	return &Client{session: cs}, nil
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// Session is the underlying MCP client session, for other calls.
func (c *Client) Session() *mcp.ClientSession { return c.session }

// Report calls the report tool. A refused, malformed or unproven report is
// a *ToolError; a stale one is a ReportResult with Verdict "stale".
func (c *Client) Report(ctx context.Context, r Report) (ReportResult, error) {
	var out ReportResult
	err := c.call(ctx, ToolReport, r, &out)
	return out, err
}

// Status calls the status tool for assignment id.
func (c *Client) Status(ctx context.Context, id foreman.AssignmentID) (StatusResult, error) {
	var out StatusResult
	err := c.call(ctx, ToolStatus, StatusQuery{Assignment: id}, &out)
	return out, err
}

func (c *Client) call(ctx context.Context, tool string, args, out any) error {
	res, err := c.session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return fmt.Errorf("agentmcp: %s: %w", tool, err)
	}
	if res.IsError {
		return &ToolError{Tool: tool, Message: contentText(res)}
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

func contentText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, " ")
}

// Close ends the session.
func (c *Client) Close() error { return c.session.Close() }
