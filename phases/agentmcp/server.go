package agentmcp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentforeman/foreman"
)

// The names an agent sees: the server's, its tools', and the environment
// variables a host gives its agents.
const (
	// ServerName is the server's name in agents' MCP configurations; Claude
	// Code calls its tools mcp__foreman__report and mcp__foreman__status.
	ServerName = "foreman"
	ToolReport = "report"
	ToolStatus = "status"
	// EnvURL names the endpoint (http://127.0.0.1:<port>/mcp), EnvToken the
	// bearer token of the agent's own assignment (Server.Begin).
	EnvURL   = "FOREMAN_MCP_URL"
	EnvToken = "FOREMAN_MCP_TOKEN"
	// DefaultAddr listens on a free port of the loopback interface.
	DefaultAddr = "127.0.0.1:0"
	// Path is where the endpoint is served.
	Path = "/mcp"
)

// Config configures a Server; the zero value of every field means its
// documented default.
type Config struct {
	// Addr is where Start listens. The server has no TLS: keep it on the
	// loopback interface. Default: "127.0.0.1:0" (DefaultAddr, a free
	// loopback port).
	Addr string
	// Check judges a report from a current assignment: well formed for its
	// stage, and backed by the workspace's evidence (see Check). An error
	// fails the tool call (the agent may try again). Default: none (nil
	// accepts every report of a current assignment).
	Check func(context.Context, Assignment, Report) (Check, error)
	// OnStale, when set, is called for each stale report, after it was
	// counted: a host counts it where it counts stale worker messages.
	// Default: none (nil: counted only).
	OnStale func(context.Context, Assignment, Report)
	// OnRefused, when set, is called for each request refused because its
	// bearer token does not prove the assignment it acts for (a report or
	// status query naming another assignment, a token whose assignment
	// ended), after it was counted: a host records it against the agent
	// the token was issued to. It must not block for long: the agent's
	// call waits for it. Default: none (nil: counted only).
	OnRefused func(context.Context, Refusal)
	// Logger receives one record per report. Default: none (nil discards
	// them).
	Logger *slog.Logger
}

// Assignment is what the server knows of one attempt by one worker at one
// stage of one item (foreman.AssignmentID is its fence).
type Assignment struct {
	ID     foreman.AssignmentID `json:"assignment"`
	Item   foreman.ItemID       `json:"item"`
	Worker foreman.WorkerID     `json:"worker,omitempty"`
	Stage  int                  `json:"stage"`
	Role   string               `json:"role,omitempty"`
	// Outcomes are the outcomes the stage accepts; Expect says in a few
	// sentences what the team expects of the agent (the status tool
	// shows both).
	Outcomes []string `json:"outcomes,omitempty"`
	Expect   string   `json:"expect,omitempty"`
}

// Report is what an agent sends with the report tool.
type Report struct {
	Assignment foreman.AssignmentID `json:"assignment" jsonschema:"your assignment id (FOREMAN_ASSIGNMENT); it must be the one your bearer token was issued for"`
	Outcome    string               `json:"outcome" jsonschema:"the stage's outcome: complete or error (plan, build), go, no-go or error (validation), pass, concerns, waived, fail or error (quality)"`
	Summary    string               `json:"summary,omitempty" jsonschema:"what you did, or why not (one paragraph)"`
	Score      *int                 `json:"score,omitempty" jsonschema:"the stage's score when it has one (plan 0-4, readiness 0-10, quality 0-100)"`
	Tasks      int                  `json:"tasks,omitempty" jsonschema:"a plan's number of tasks"`
}

// Stats counts the reports by verdict, and the requests refused before
// any verdict because their bearer token proves nothing.
type Stats struct {
	Accepted, Stale, Invalid, Unproven int64
	// Forged counts the reports and status queries that named an
	// assignment other than the one their bearer token was issued for.
	Forged int64
	// Expired counts the requests that carried the token of an assignment
	// that had ended (Server.End).
	Expired int64
	// Unauthorized counts the requests with no bearer token or one the
	// server never issued.
	Unauthorized int64
}

// RefusalReason says why a request was refused (Refusal).
type RefusalReason string

const (
	// RefusedForeign: the request named an assignment other than its
	// token's (Named); counted in Stats.Forged.
	RefusedForeign RefusalReason = "foreign assignment"
	// RefusedEnded: the token's assignment had ended; counted in
	// Stats.Expired.
	RefusedEnded RefusalReason = "assignment ended"
)

// Refusal is a request the server refused because its bearer token does
// not prove the assignment it acts for (Config.OnRefused).
type Refusal struct {
	Reason RefusalReason
	// By is the assignment the token was issued for: whose agent (or
	// whoever it gave the token to) sent the request.
	By Assignment
	// Named is the assignment the request named (RefusedForeign).
	Named foreman.AssignmentID
	// Tool is the tool called (report or status); "" when the request was
	// refused before it reached one.
	Tool string
}

func (r Refusal) String() string {
	switch {
	case r.Reason == RefusedEnded:
		return fmt.Sprintf("the MCP token of assignment %s was used after its stage ended", r.By.ID)
	case r.Tool != "":
		return fmt.Sprintf("MCP %s for assignment %q, not its own %s", r.Tool, r.Named, r.By.ID)
	}
	return fmt.Sprintf("MCP request for assignment %q, not its own %s", r.Named, r.By.ID)
}

// Server is the MCP server a team starts for its agents. Begin tells it an
// assignment started (and replaces the item's previous one) and returns the
// bearer token of that assignment's agent; End, when the agent's stage
// ends, returns the report it accepted and ends the token. Safe for
// concurrent use.
type Server struct {
	cfg  Config
	log  *slog.Logger
	mcp  *mcp.Server
	http http.Handler

	mu sync.Mutex
	// entries holds the assignments begun and not ended yet; an ended
	// one is forgotten but for its tokens' tombstones (issued.who).
	entries map[foreman.AssignmentID]*entry
	current map[foreman.ItemID]foreman.AssignmentID
	// tokens maps the SHA-256 of each token issued to its assignment: a
	// lookup by digest takes no time that depends on how much of a
	// guessed token is right.
	tokens map[[sha256.Size]byte]*issued
	stats  Stats
	srv    *http.Server
	url    string
}

type entry struct {
	a      Assignment
	report *Report
	token  *issued // the token Begin issued last
}

// issued is one token: the assignment it proves, until ended. Once ended
// it is a tombstone: who keeps who the assignment was (not what its stage
// expected), so that a request with the token is still refused as
// Expired and reported against its agent. One is kept per token issued:
// it is small (80 bytes).
type issued struct {
	ended bool
	who   identity
}

// identity is who an assignment is: an Assignment without what its
// stage expects.
type identity struct {
	id     foreman.AssignmentID
	item   foreman.ItemID
	worker foreman.WorkerID
	role   string
	stage  int
}

func identityOf(a Assignment) identity {
	return identity{id: a.ID, item: a.Item, worker: a.Worker, role: a.Role, stage: a.Stage}
}

func (i identity) assignment() Assignment {
	return Assignment{ID: i.id, Item: i.item, Worker: i.worker, Stage: i.stage, Role: i.role}
}

// end ends the token.
func (t *issued) end() { t.ended = true }

// New returns a Server; Start serves it, or mount Handler yourself.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg, log: cfg.Logger, entries: map[foreman.AssignmentID]*entry{},
		current: map[foreman.ItemID]foreman.AssignmentID{}, tokens: map[[sha256.Size]byte]*issued{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: ServerName, Title: "Foreman", Version: "1"}, &mcp.ServerOptions{
		Instructions: "Report your stage's outcome with the report tool, passing your assignment id " +
			"(FOREMAN_ASSIGNMENT); the status tool says what your assignment is and what the team expects. " +
			"Your bearer token is your assignment's own: it works for that assignment only, until its stage ends.",
		Capabilities: &mcp.ServerCapabilities{},
	})
	s.addTools()
	// Stateless, JSON responses: every tool call is one POST answered at
	// once, so no session or stream outlives a call (and Close never waits
	// on one). The tools need nothing from the client in between.
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: cfg.Logger})
	s.http = s.requireToken(h)
	return s
}

// newToken returns a fresh random token: 128 bits from crypto/rand.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// bearerOf returns the token of an Authorization header ("" when there
// is none).
func bearerOf(header string) string {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// authenticate finds the assignment a request's token was issued for. A
// request without a token, or with one never issued, is counted
// Unauthorized; one with an ended token Expired (and reported to
// OnRefused).
func (s *Server) authenticate(ctx context.Context, header string) (caller, error) {
	token := bearerOf(header)
	s.mu.Lock()
	var tok *issued
	if token != "" {
		tok = s.tokens[sha256.Sum256([]byte(token))]
	}
	switch {
	case tok == nil:
		s.stats.Unauthorized++
		s.mu.Unlock()
		return caller{}, errUnauthorized
	case tok.ended:
		s.stats.Expired++
		a := tok.who.assignment()
		s.mu.Unlock()
		s.log.Warn("agentmcp: a request with the token of an ended assignment", "assignment", a.ID, "item", a.Item)
		if s.cfg.OnRefused != nil {
			s.cfg.OnRefused(ctx, Refusal{Reason: RefusedEnded, By: a})
		}
		return caller{a: a, tok: tok}, &endedError{id: a.ID}
	}
	a := s.entries[tok.who.id].a
	s.mu.Unlock()
	return caller{a: a, tok: tok}, nil
}

// caller is who sent a request: the assignment its token proves.
type caller struct {
	a   Assignment
	tok *issued
}

var errUnauthorized = fmt.Errorf("agentmcp: missing or unknown bearer token")

type endedError struct{ id foreman.AssignmentID }

func (e *endedError) Error() string {
	return fmt.Sprintf("agentmcp: the token of assignment %s, whose stage has ended; stop working on it", e.id)
}

// requireToken refuses a request whose bearer token proves no assignment
// that is still going (the tools then check which one it proves).
func (s *Server) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.authenticate(r.Context(), r.Header.Get("Authorization")); err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="foreman"`)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Handler serves the MCP endpoint (streamable HTTP, an assignment's
// bearer token required), for a host that mounts it on a server of its
// own.
func (s *Server) Handler() http.Handler { return s.http }

// Start listens on Config.Addr and serves the endpoint at Path until
// Close. ctx bounds the listening only.
func (s *Server) Start(ctx context.Context) error {
	addr := s.cfg.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("agentmcp: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, s.http)
	srv := &http.Server{Handler: mux, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	s.mu.Lock()
	s.srv, s.url = srv, "http://"+ln.Addr().String()+Path
	s.mu.Unlock()
	go func() { _ = srv.Serve(ln) }() // ends with Close
	return nil
}

// URL is the endpoint's address once started ("" before).
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Env returns the KEY=VALUE entries that tell an agent where the server is
// and how to authenticate (EnvURL, EnvToken: token, which Begin issued for
// its assignment); nil before Start.
func (s *Server) Env(token string) []string {
	u := s.URL()
	if u == "" {
		return nil
	}
	return []string{EnvURL + "=" + u, EnvToken + "=" + token}
}

// Close stops serving: at once for idle connections, after ctx for a
// call in progress. It is safe to call twice, and before Start.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	if err := srv.Shutdown(ctx); err != nil {
		return srv.Close()
	}
	return nil
}

// Begin records that assignment a started: it becomes its item's current
// assignment, and the one it replaces, if any, is stale from now on. It
// returns the bearer token a's agent must send: a fresh random secret
// that proves a and no other assignment, and stops working when a ends
// (End). Begun again, a gets a new token and its earlier one ends.
func (s *Server) Begin(a Assignment) string {
	token := newToken()
	tok := &issued{who: identityOf(a)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.entries[a.ID]; old != nil && old.token != nil {
		old.token.end()
	}
	s.entries[a.ID] = &entry{a: a, token: tok}
	s.current[a.Item] = a.ID
	s.tokens[sha256.Sum256([]byte(token))] = tok
	return token
}

// End records that assignment id's stage ended: its token stops working
// (a request with it is refused and counted, Stats.Expired), and a report
// it sent meanwhile would be stale. It returns the last report the server
// accepted from it. The assignment is forgotten then, but for its tokens'
// tombstones (who it was, not what its stage expected): a second End
// returns nothing.
func (s *Server) End(id foreman.AssignmentID) (Report, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[id]
	if !ok {
		return Report{}, false
	}
	if e.token != nil {
		e.token.end()
	}
	if s.current[e.a.Item] == id {
		delete(s.current, e.a.Item)
	}
	delete(s.entries, id)
	rep := e.report
	if rep == nil {
		return Report{}, false
	}
	return *rep, true
}

// Stats returns the reports and refusals counted so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// fence places a request that the token of assignment by sent naming
// assignment named (empty: by's own).
func (s *Server) fence(by caller, named foreman.AssignmentID) Fence {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case named != "" && named != by.a.ID:
		return FenceForeign
	case s.current[by.a.Item] != by.a.ID || by.tok.ended:
		return FenceStale
	}
	return FenceCurrent
}

// refuse counts a request naming another assignment than its token's and
// tells OnRefused.
func (s *Server) refuse(ctx context.Context, by Assignment, named foreman.AssignmentID, tool string) {
	r := Refusal{Reason: RefusedForeign, By: by, Named: named, Tool: tool}
	s.log.Warn("agentmcp: "+r.String(), "item", by.Item)
	if s.cfg.OnRefused != nil {
		s.cfg.OnRefused(ctx, r)
	}
}

// record counts a verdict and keeps an accepted report, if its assignment
// is still current and the caller's token is still its assignment's (either
// may have changed while the host checked the report).
func (s *Server) record(by caller, r Report, v Verdict) Verdict {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := by.a
	if v == Accepted {
		e := s.entries[a.ID]
		if s.current[a.Item] != a.ID || e == nil || e.token != by.tok || by.tok.ended {
			v = Stale
		} else {
			rep := r
			rep.Assignment = a.ID
			e.report = &rep
		}
	}
	switch v {
	case Accepted:
		s.stats.Accepted++
	case Stale:
		s.stats.Stale++
	case Forged:
		s.stats.Forged++
	case Invalid:
		s.stats.Invalid++
	case Unproven:
		s.stats.Unproven++
	}
	return v
}
