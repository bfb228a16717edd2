package agentmcp

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
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
	// bearer token every request must carry.
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
	// Addr is where Start listens; default DefaultAddr. The server has no
	// TLS: keep it on the loopback interface.
	Addr string
	// Token is the bearer token every request must carry (Authorization:
	// Bearer <token>), so that only the agents given it can report; default
	// a random one (Server.Token).
	Token string
	// Check judges a report from a current assignment: well formed for its
	// stage, and backed by the workspace's evidence (see Check). Nil
	// accepts every report of a current assignment. An error fails the
	// tool call (the agent may try again).
	Check func(context.Context, Assignment, Report) (Check, error)
	// OnStale, when set, is called for each stale report, after it was
	// counted: a host counts it where it counts stale worker messages.
	OnStale func(context.Context, Assignment, Report)
	// Logger receives one record per report; nil discards.
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
	Assignment foreman.AssignmentID `json:"assignment" jsonschema:"your assignment id (FOREMAN_ASSIGNMENT), the fence of your report"`
	Outcome    string               `json:"outcome" jsonschema:"the stage's outcome: complete or error (plan, build), go, no-go or error (validation), pass, concerns, waived, fail or error (quality)"`
	Summary    string               `json:"summary,omitempty" jsonschema:"what you did, or why not (one paragraph)"`
	Score      *int                 `json:"score,omitempty" jsonschema:"the stage's score when it has one (plan 0-4, readiness 0-10, quality 0-100)"`
	Tasks      int                  `json:"tasks,omitempty" jsonschema:"a plan's number of tasks"`
}

// Stats counts the reports by verdict.
type Stats struct {
	Accepted, Stale, Refused, Invalid, Unproven int64
}

// Server is the MCP server a team starts for its agents. Begin tells it an
// assignment started (and replaces the item's previous one); End, when the
// agent's stage ends, returns the report it accepted. Safe for concurrent
// use.
type Server struct {
	cfg   Config
	log   *slog.Logger
	token string
	mcp   *mcp.Server
	http  http.Handler

	mu      sync.Mutex
	entries map[foreman.AssignmentID]*entry
	current map[foreman.ItemID]foreman.AssignmentID
	stats   Stats
	srv     *http.Server
	url     string
}

type entry struct {
	a      Assignment
	report *Report
}

// New returns a Server; Start serves it, or mount Handler yourself.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg, log: cfg.Logger, token: cfg.Token,
		entries: map[foreman.AssignmentID]*entry{}, current: map[foreman.ItemID]foreman.AssignmentID{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.token == "" {
		var b [16]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
		s.token = hex.EncodeToString(b[:])
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: ServerName, Title: "Foreman", Version: "1"}, &mcp.ServerOptions{
		Instructions: "Report your stage's outcome with the report tool, passing your assignment id " +
			"(FOREMAN_ASSIGNMENT); the status tool says what your assignment is and what the team expects.",
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

// requireToken refuses a request without the server's bearer token.
func (s *Server) requireToken(next http.Handler) http.Handler {
	want := []byte("Bearer " + s.token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="foreman"`)
			http.Error(w, "agentmcp: missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Handler serves the MCP endpoint (streamable HTTP, bearer token
// required), for a host that mounts it on a server of its own.
func (s *Server) Handler() http.Handler { return s.http }

// Token is the bearer token requests must carry.
func (s *Server) Token() string { return s.token }

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
// and how to authenticate (EnvURL, EnvToken); nil before Start.
func (s *Server) Env() []string {
	u := s.URL()
	if u == "" {
		return nil
	}
	return []string{EnvURL + "=" + u, EnvToken + "=" + s.token}
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
// assignment, and the one it replaces, if any, is stale from now on.
func (s *Server) Begin(a Assignment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries[a.ID] = &entry{a: a}
	s.current[a.Item] = a.ID
}

// End records that assignment id's stage ended: later reports with it are
// stale. It returns the last report the server accepted from it.
func (s *Server) End(id foreman.AssignmentID) (Report, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[id]
	if !ok {
		return Report{}, false
	}
	if s.current[e.a.Item] == id {
		delete(s.current, e.a.Item)
	}
	rep := e.report
	e.report = nil
	if rep == nil {
		return Report{}, false
	}
	return *rep, true
}

// Stats returns the reports counted so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// fence looks an assignment id up.
func (s *Server) fence(id foreman.AssignmentID) (Assignment, Fence) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[id]
	switch {
	case !ok:
		return Assignment{}, FenceUnknown
	case s.current[e.a.Item] != id:
		return e.a, FenceStale
	}
	return e.a, FenceCurrent
}

// record counts a verdict and keeps an accepted report, if its assignment
// is still current (it may have ended while the host checked it).
func (s *Server) record(a Assignment, r Report, v Verdict) Verdict {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v == Accepted {
		if s.current[a.Item] != a.ID {
			v = Stale
		} else {
			rep := r
			s.entries[a.ID].report = &rep
		}
	}
	switch v {
	case Accepted:
		s.stats.Accepted++
	case Stale:
		s.stats.Stale++
	case Refused:
		s.stats.Refused++
	case Invalid:
		s.stats.Invalid++
	case Unproven:
		s.stats.Unproven++
	}
	return v
}
