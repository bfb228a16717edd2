package agentmcp_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases/agentmcp"
)

// host plays the team's side: it knows whether the workspace changed and
// records the stale reports it is told about.
type host struct {
	mu       sync.Mutex
	changed  bool
	stale    []foreman.AssignmentID
	refusals []agentmcp.Refusal
}

func (h *host) check(_ context.Context, a agentmcp.Assignment, r agentmcp.Report) (agentmcp.Check, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := agentmcp.Check{ClaimsCompletion: r.Outcome == "complete", NeedsChange: a.Stage == 2, Changed: h.changed}
	if r.Outcome != "complete" && r.Outcome != "error" {
		c.Problem = "outcome " + r.Outcome + " is not one of this stage's"
	}
	if !h.changed {
		c.Evidence = "no commits since the assignment's base"
	}
	return c, nil
}

func (h *host) onStale(_ context.Context, a agentmcp.Assignment, _ agentmcp.Report) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stale = append(h.stale, a.ID)
}

func (h *host) onRefused(_ context.Context, r agentmcp.Refusal) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refusals = append(h.refusals, r)
}

func (h *host) refused() []agentmcp.Refusal {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]agentmcp.Refusal(nil), h.refusals...)
}

func start(t *testing.T, h *host) *agentmcp.Server {
	t.Helper()
	s := agentmcp.New(agentmcp.Config{Check: h.check, OnStale: h.onStale, OnRefused: h.onRefused})
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(func() { assert.NoError(t, s.Close(context.Background())) })
	return s
}

func dial(t *testing.T, s *agentmcp.Server, token string) *agentmcp.Client {
	t.Helper()
	c, err := agentmcp.Dial(context.Background(), s.URL(), token)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func build(id foreman.AssignmentID) agentmcp.Assignment {
	return buildOf("US-001", id)
}

func buildOf(item foreman.ItemID, id foreman.AssignmentID) agentmcp.Assignment {
	return agentmcp.Assignment{ID: id, Item: item, Worker: "w1", Stage: 2, Role: "builder",
		Outcomes: []string{"complete", "error"}, Expect: "commit your work"}
}

// The SDK's own client, as any MCP client speaks to the endpoint: the
// bearer token in a header, the arguments as JSON.
func TestAFencedReportIsAcceptedAndTakenWhenTheStageEnds(t *testing.T) {
	t.Parallel()
	h := &host{changed: true}
	s := start(t, h)
	token := s.Begin(build("US-001-a3"))

	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil)
	hc := &http.Client{Transport: headerTransport{"Authorization": "Bearer " + token}}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.URL(), HTTPClient: hc}, nil)
	require.NoError(t, err)
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: agentmcp.ToolReport, Arguments: map[string]any{
		"assignment": "US-001-a3", "outcome": "Complete", "summary": "wrote the parser", "score": 7}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res.Content)
	assert.Contains(t, res.Content[0].(*mcp.TextContent).Text, "accepted")
	assert.Equal(t, "accepted", res.StructuredContent.(map[string]any)["verdict"])

	rep, ok := s.End("US-001-a3")
	require.True(t, ok)
	seven := 7
	assert.Equal(t, agentmcp.Report{Assignment: "US-001-a3", Outcome: "complete", Summary: "wrote the parser", Score: &seven}, rep)
	_, ok = s.End("US-001-a3")
	assert.False(t, ok, "a report is taken once")
	assert.Equal(t, agentmcp.Stats{Accepted: 1}, s.Stats())
}

type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestAReportFromAReplacedOrEndedAssignmentIsStale(t *testing.T) {
	t.Parallel()
	h := &host{changed: true}
	s := start(t, h)
	ctx := context.Background()
	c := dial(t, s, s.Begin(build("US-001-a3")))
	c4 := dial(t, s, s.Begin(build("US-001-a4"))) // a new worker replaced a3
	res, err := c.Report(ctx, agentmcp.Report{Assignment: "US-001-a3", Outcome: "complete"})
	require.NoError(t, err)
	assert.Equal(t, "stale", res.Verdict)
	assert.Contains(t, res.Message, "stop working")
	assert.NotContains(t, res.Message, "a4", "a stale worker is not told the current assignment")

	_, ok := s.End("US-001-a4")
	assert.False(t, ok, "the stale report is not the current assignment's")
	// After its stage ended, a4's token proves nothing any more.
	_, err = c4.Report(ctx, agentmcp.Report{Assignment: "US-001-a4", Outcome: "complete"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Unauthorized")
	assert.Equal(t, agentmcp.Stats{Stale: 1, Expired: 1}, s.Stats())
	assert.Equal(t, []foreman.AssignmentID{"US-001-a3"}, h.stale)
	require.Len(t, h.refused(), 1)
	assert.Equal(t, agentmcp.RefusedEnded, h.refused()[0].Reason)
	assert.Equal(t, foreman.AssignmentID("US-001-a4"), h.refused()[0].By.ID)
}

// Story A's agent, with its own token, reports for story V's current
// assignment (whose id is easy to guess), asks about it, and names an id
// never issued: each is refused, counted, told to the host as A's, and V
// takes only its own agent's report.
func TestAReportForAnotherAssignmentIsRefused(t *testing.T) {
	t.Parallel()
	h := &host{changed: true}
	s := start(t, h)
	ctx := context.Background()
	attacker := dial(t, s, s.Begin(buildOf("US-A", "US-A-a3")))
	victim := dial(t, s, s.Begin(buildOf("US-V", "US-V-a3")))

	var te *agentmcp.ToolError
	_, err := attacker.Report(ctx, agentmcp.Report{Assignment: "US-V-a3", Outcome: "error", Summary: "give up"})
	require.ErrorAs(t, err, &te)
	assert.Contains(t, te.Message, "refused: your token is for assignment US-A-a3")
	_, err = attacker.Status(ctx, "US-V-a3")
	require.ErrorAs(t, err, &te)
	assert.NotContains(t, te.Message, "builder", "nothing of the other assignment is shown")
	_, err = attacker.Report(ctx, agentmcp.Report{Assignment: "US-V-a999", Outcome: "complete"})
	require.ErrorAs(t, err, &te)

	res, err := victim.Report(ctx, agentmcp.Report{Assignment: "US-V-a3", Outcome: "complete", Summary: "mine"})
	require.NoError(t, err)
	assert.Equal(t, "accepted", res.Verdict)
	rep, ok := s.End("US-V-a3")
	require.True(t, ok)
	assert.Equal(t, "mine", rep.Summary)
	_, ok = s.End("US-A-a3")
	assert.False(t, ok, "the attacker's own assignment has no report either")
	assert.Equal(t, agentmcp.Stats{Accepted: 1, Forged: 3}, s.Stats())
	got := h.refused()
	require.Len(t, got, 3)
	for i, want := range []struct {
		named foreman.AssignmentID
		tool  string
	}{{"US-V-a3", agentmcp.ToolReport}, {"US-V-a3", agentmcp.ToolStatus}, {"US-V-a999", agentmcp.ToolReport}} {
		assert.Equal(t, agentmcp.RefusedForeign, got[i].Reason)
		assert.Equal(t, foreman.AssignmentID("US-A-a3"), got[i].By.ID)
		assert.Equal(t, want.named, got[i].Named)
		assert.Equal(t, want.tool, got[i].Tool)
	}
	assert.Equal(t, `MCP report for assignment "US-V-a3", not its own US-A-a3`, got[0].String())
}

// An assignment begun again (its stage re-run) gets a new token; the old
// one, and a token used after End, are refused. A token missing or never
// issued is refused before any tool.
func TestATokenWorksOnlyWhileItsAssignmentDoes(t *testing.T) {
	t.Parallel()
	h := &host{changed: true}
	s := start(t, h)
	ctx := context.Background()
	first := s.Begin(build("US-001-a3"))
	second := s.Begin(build("US-001-a3"))
	require.NotEqual(t, first, second)
	assert.Len(t, second, 32, "128 bits, hex")
	_, err := agentmcp.Dial(ctx, s.URL(), first)
	require.Error(t, err, "the first token ended when the assignment was begun again")
	c := dial(t, s, second)
	_, err = c.Report(ctx, agentmcp.Report{Assignment: "US-001-a3", Outcome: "complete"})
	require.NoError(t, err)
	_, ok := s.End("US-001-a3")
	require.True(t, ok)
	_, err = c.Status(ctx, "US-001-a3")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Unauthorized")
	expired := s.Stats().Expired

	for _, header := range []string{"", "Bearer ", "Bearer " + newHex(), "Basic " + second} {
		req, err := http.NewRequest(http.MethodPost, s.URL(), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, header)
	}
	st := s.Stats()
	assert.Equal(t, int64(4), st.Unauthorized)
	assert.Equal(t, expired, st.Expired, "a token never issued is not an expired one")
	assert.GreaterOrEqual(t, expired, int64(2), "the replaced first token (Dial's requests) and the second after End")
	assert.Len(t, h.refused(), int(expired), "each told to the host")
	for _, r := range h.refused() {
		assert.Equal(t, agentmcp.RefusedEnded, r.Reason)
		assert.Equal(t, foreman.AssignmentID("US-001-a3"), r.By.ID)
	}
}

func newHex() string { return strings.Repeat("ab", 16) }

func TestACompletionWithoutAChangeIsNotTaken(t *testing.T) {
	t.Parallel()
	h := &host{}
	s := start(t, h)
	c := dial(t, s, s.Begin(build("US-001-a3")))
	ctx := context.Background()
	_, err := c.Report(ctx, agentmcp.Report{Assignment: "US-001-a3", Outcome: "complete"})
	var te *agentmcp.ToolError
	require.ErrorAs(t, err, &te)
	assert.Contains(t, te.Message, "not taken as completion: no commits since the assignment's base")

	// An error report needs no change; a malformed one is refused.
	_, err = c.Report(ctx, agentmcp.Report{Assignment: "US-001-a3", Outcome: "go"})
	require.ErrorAs(t, err, &te)
	assert.Contains(t, te.Message, "outcomes of this stage: complete, error")
	// Once the work is committed, the completion is taken.
	h.mu.Lock()
	h.changed = true
	h.mu.Unlock()
	res, err := c.Report(ctx, agentmcp.Report{Assignment: "US-001-a3", Outcome: "complete"})
	require.NoError(t, err)
	assert.Equal(t, "accepted", res.Verdict)
	assert.Equal(t, agentmcp.Stats{Accepted: 1, Invalid: 1, Unproven: 1}, s.Stats())
}

func TestStatusSaysWhatIsExpected(t *testing.T) {
	t.Parallel()
	s := start(t, &host{changed: true})
	c := dial(t, s, s.Begin(build("US-001-a3")))
	ctx := context.Background()
	st, err := c.Status(ctx, "US-001-a3")
	require.NoError(t, err)
	assert.Equal(t, "current", st.State)
	assert.Equal(t, build("US-001-a3"), st.Assignment)
	assert.Nil(t, st.Reported)
	_, err = c.Report(ctx, agentmcp.Report{Assignment: "US-001-a3", Outcome: "complete", Summary: "done"})
	require.NoError(t, err)
	st, err = c.Status(ctx, "US-001-a3")
	require.NoError(t, err)
	require.NotNil(t, st.Reported)
	assert.Equal(t, "done", st.Reported.Summary)

	s.Begin(build("US-001-a4"))
	st, err = c.Status(ctx, "US-001-a3")
	require.NoError(t, err)
	assert.Equal(t, "stale", st.State)
	assert.Empty(t, st.Expect)
	_, err = c.Status(ctx, "nobody")
	var te *agentmcp.ToolError
	assert.ErrorAs(t, err, &te)
	assert.Equal(t, int64(1), s.Stats().Forged)
}

func TestTheBearerTokenIsRequired(t *testing.T) {
	t.Parallel()
	s := start(t, &host{})
	_, err := agentmcp.Dial(context.Background(), s.URL(), "wrong")
	require.Error(t, err)
	assert.Positive(t, s.Stats().Unauthorized)
	token := s.Begin(build("US-001-a3"))
	assert.Equal(t, []string{agentmcp.EnvURL + "=" + s.URL(), agentmcp.EnvToken + "=" + token}, s.Env(token))
}

func TestTheToolsDeclareTheirArguments(t *testing.T) {
	t.Parallel()
	s := start(t, &host{})
	c := dial(t, s, s.Begin(build("US-001-a3")))
	tools := map[string]*mcp.Tool{}
	for tool, err := range c.Session().Tools(context.Background(), nil) {
		require.NoError(t, err)
		tools[tool.Name] = tool
	}
	require.Contains(t, tools, agentmcp.ToolReport)
	require.Contains(t, tools, agentmcp.ToolStatus)
	schema := tools[agentmcp.ToolReport].InputSchema.(map[string]any)
	assert.ElementsMatch(t, []any{"assignment", "outcome"}, schema["required"])
	assert.True(t, tools[agentmcp.ToolStatus].Annotations.ReadOnlyHint)
}

func TestCloseIsSafeTwiceAndBeforeStart(t *testing.T) {
	t.Parallel()
	s := agentmcp.New(agentmcp.Config{})
	require.NoError(t, s.Close(context.Background()))
	assert.Empty(t, s.URL())
	assert.Nil(t, s.Env("x"))
	require.NoError(t, s.Start(context.Background()))
	require.NoError(t, s.Close(context.Background()))
	require.NoError(t, s.Close(context.Background()))
	_, err := agentmcp.Dial(context.Background(), "", "")
	assert.True(t, err != nil && !errors.Is(err, context.Canceled))
}
