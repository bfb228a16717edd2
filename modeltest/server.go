package modeltest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agentforeman/foreman"
)

// ErrConfig is matched (with errors.Is) by every error New returns for a bad
// Config.
var ErrConfig = errors.New("modeltest: bad config")

// maxBody caps a request body the server reads.
const maxBody = 64 << 20

// Config configures a Server.
type Config struct {
	// Scripts are the conversations the server plays, tried in order for
	// each new session. Default: none (every request gets the fallback
	// answer).
	Scripts []Script
	// Usage is the token usage served with a turn that sets none, and with
	// side requests. Default: 100 input tokens, 20 output tokens.
	Usage Usage
	// SideText answers side requests (requests offering no tools, such as
	// Claude Code's title requests). Default: "modeltest".
	SideText string
	// Clock measures Turn.Delay and stamps Request.At. Default: the wall
	// clock.
	Clock foreman.Clock
	// Logf logs what the server does not expect: requests no script
	// matched, unknown paths. Default: discard.
	Logf func(format string, args ...any)
}

// Server is a scripted model server on 127.0.0.1. It answers the Anthropic
// Messages API (POST /v1/messages, and /v1/messages/count_tokens), the
// OpenAI Responses API (POST /v1/responses) and the Gemini API (POST
// /v1beta/models/<model>:generateContent, :streamGenerateContent) from its
// scripts, records every
// request with what it served, and answers any other path with a 404 it
// logs. Its methods are safe for concurrent use.
type Server struct {
	cfg   Config
	clock foreman.Clock
	url   string
	srv   *http.Server
	done  chan struct{}
	wg    sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	ids      int
	reqs     []Request
	sessions map[string]*session
}

// session is the state of one conversation: its script and the next turn.
type session struct {
	script int // index in Config.Scripts; -1 until one matches
	next   int
	loaded map[string]bool // deferred tools ToolSearch was called for
}

// parsed is what the server read from an API request.
type parsed struct {
	api            API
	model          string
	stream         bool
	tools          []string
	offered        map[string]bool
	kinds          map[string]string // Responses API: the tool's type (function, custom)
	prompt, latest string
	side           bool
	// schema is the JSON schema a Gemini API request wants its answer to
	// follow (responseMimeType application/json); nil for a text answer.
	schema json.RawMessage
	// keyText, when set, is what the session key is derived from in place
	// of the prompt (Gemini: the prompt without the session context Gemini
	// CLI rebuilds on resume).
	keyText string
}

// answer is what the server will serve to one request.
type answer struct {
	text  string
	calls []servedCall
	usage Usage
	err   *APIError
	turn  Turn // for Delay and Wait
}

type servedCall struct {
	ServedCall
	kind string // Responses API: function_call or custom_tool_call
	text string // Responses API: the arguments or the custom input
}

// New starts a server on a free port of 127.0.0.1. Close it when done.
func New(cfg Config) (*Server, error) {
	for i, sc := range cfg.Scripts {
		if len(sc.Turns) == 0 {
			return nil, fmt.Errorf("%w: script %d (%q) has no turns", ErrConfig, i+1, sc.Name)
		}
		for j, t := range sc.Turns {
			if t.Error != nil && (t.Error.Status < 400 || t.Error.Status > 599) {
				return nil, fmt.Errorf("%w: script %d (%q) turn %d: error status %d is not 4xx or 5xx", ErrConfig, i+1, sc.Name, j, t.Error.Status)
			}
			if t.Delay < 0 {
				return nil, fmt.Errorf("%w: script %d (%q) turn %d: negative delay %v", ErrConfig, i+1, sc.Name, j, t.Delay)
			}
		}
		if sc.Name == "" {
			cfg.Scripts[i].Name = fmt.Sprintf("script %d", i+1)
		}
	}
	if cfg.Usage == (Usage{}) {
		cfg.Usage = Usage{InputTokens: 100, OutputTokens: 20}
	}
	if cfg.SideText == "" {
		cfg.SideText = "modeltest"
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("modeltest: listen on 127.0.0.1: %w", err)
	}
	s := &Server{
		cfg:      cfg,
		clock:    cfg.Clock,
		url:      "http://" + ln.Addr().String(),
		done:     make(chan struct{}),
		sessions: map[string]*session{},
	}
	if s.clock == nil {
		s.clock = foreman.RealClock()
	}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.handle)}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Start starts a server playing the scripts for the test, logging to
// tb.Logf, and closes it when the test ends. It fails the test if the
// server cannot start.
func Start(tb testing.TB, scripts ...Script) *Server {
	tb.Helper()
	s, err := New(Config{Scripts: scripts, Logf: tb.Logf})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// URL is the server's base URL, http://127.0.0.1:PORT: Claude Code's
// ANTHROPIC_BASE_URL and Gemini CLI's GOOGLE_GEMINI_BASE_URL; Codex's
// provider base_url is URL()+"/v1".
func (s *Server) URL() string { return s.url }

// Close stops the server: requests held by a Delay or Wait end unanswered,
// connections are closed, and Close returns once every handler has.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.done)
	s.mu.Unlock()
	_ = s.srv.Close()
	s.wg.Wait()
}

// Requests returns the records of every request so far, in order of
// arrival; a request still being answered has no Served yet.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.reqs))
	copy(out, s.reqs)
	return out
}

// Usage is the token usage served to the session's requests (all requests
// when session is ""): what the CLI of that session should report.
func (s *Server) Usage(session string) Usage {
	var u Usage
	for _, r := range s.Requests() {
		if session == "" || r.Session == session {
			u = u.Add(r.Served.Usage)
		}
	}
	return u
}

// Unmatched returns the requests that got the fallback answer.
func (s *Server) Unmatched() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Unmatched {
			out = append(out, r)
		}
	}
	return out
}

func (s *Server) logf(format string, args ...any) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if !closed {
		s.cfg.Logf(format, args...)
	}
}

func (s *Server) nextID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids++
	return fmt.Sprintf("%s_modeltest_%06d", prefix, s.ids)
}

// record appends a request's record and returns its index.
func (s *Server) record(r *http.Request, body []byte) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, Request{Seq: len(s.reqs) + 1, At: s.clock.Now(), Method: r.Method,
		Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body, Turn: -1})
	return len(s.reqs) - 1
}

func (s *Server) update(i int, f func(*Request)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.reqs[i])
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		http.Error(w, "modeltest: closed", http.StatusServiceUnavailable)
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()

	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		http.Error(w, "modeltest: read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	i := s.record(r, body)
	path := r.URL.Path
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/messages/count_tokens"):
		s.update(i, func(rec *Request) { rec.API, rec.Side, rec.Served.Status = Anthropic, true, http.StatusOK })
		countTokens(w, body)
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/messages"):
		s.serveAPI(w, r, i, body, parseAnthropic, s.serveAnthropic)
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/responses"):
		s.serveAPI(w, r, i, body, parseResponses, s.serveResponses)
	case r.Method == http.MethodPost && geminiPath(path) == "countTokens":
		s.update(i, func(rec *Request) { rec.API, rec.Side, rec.Served.Status = Gemini, true, http.StatusOK })
		w.Header().Set("content-type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"totalTokens": max(1, len(body)/4)})
	case r.Method == http.MethodPost && geminiPath(path) != "":
		method, model := geminiMethod(path)
		s.serveAPI(w, r, i, body, func(b []byte) (parsed, error) {
			return parseGemini(model, method == "streamGenerateContent", b)
		}, s.serveGemini)
	case r.Method == http.MethodHead || (r.Method == http.MethodGet && (path == "/" || path == "/v1")):
		s.update(i, func(rec *Request) { rec.Served.Status = http.StatusOK })
		w.WriteHeader(http.StatusOK)
	default:
		s.logf("modeltest: unknown request %s %s", r.Method, r.URL.RequestURI())
		s.update(i, func(rec *Request) { rec.Served.Status = http.StatusNotFound; rec.Unmatched = true })
		w.Header().Set("content-type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{
			"type": "not_found_error", "message": "modeltest: no such endpoint: " + r.Method + " " + path}})
	}
}

// serveAPI answers one model request: parse, choose the turn, hold it for its
// Delay or Wait, serve it, record what was served.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, i int, body []byte,
	parse func([]byte) (parsed, error), serve func(http.ResponseWriter, parsed, *answer)) {
	p, err := parse(body)
	if err != nil {
		s.logf("%v", err)
		e := &APIError{Status: http.StatusBadRequest, Message: err.Error()}
		s.update(i, func(rec *Request) { rec.Served = Served{Status: e.Status, Error: e} })
		switch {
		case strings.HasSuffix(r.URL.Path, "/responses"):
			writeOpenAIError(w, e)
		case geminiPath(r.URL.Path) != "":
			writeGeminiError(w, e)
		default:
			writeAnthropicError(w, e, s.nextID("req"))
		}
		return
	}
	a := s.choose(p, r.Header, i)
	if !s.hold(r.Context(), a.turn) {
		s.update(i, func(rec *Request) { rec.Served.Cancelled = true })
		return
	}
	served := Served{Status: http.StatusOK, Text: a.text, Usage: a.usage}
	if a.err != nil {
		served = Served{Status: a.err.Status, Error: a.err}
	}
	for _, c := range a.calls {
		served.Calls = append(served.Calls, c.ServedCall)
	}
	s.update(i, func(rec *Request) { rec.Served = served })
	serve(w, p, a)
}

// hold waits out a turn's Delay and Wait; false if the request or the server
// ended first.
func (s *Server) hold(ctx context.Context, t Turn) bool {
	if t.Delay > 0 {
		timer := s.clock.NewTimer(t.Delay)
		defer timer.Stop()
		select {
		case <-timer.C():
		case <-ctx.Done():
			return false
		case <-s.done:
			return false
		}
	}
	if t.Wait != nil {
		select {
		case <-t.Wait:
		case <-ctx.Done():
			return false
		case <-s.done:
			return false
		}
	}
	return true
}

func sessionKey(h http.Header, p parsed) string {
	for _, k := range []string{"X-Claude-Code-Session-Id", "Session-Id", "Thread-Id"} {
		if v := h.Get(k); v != "" {
			return v
		}
	}
	text := p.prompt
	if p.keyText != "" {
		text = p.keyText
	}
	sum := sha256.Sum256([]byte(text))
	return "prompt-" + hex.EncodeToString(sum[:8])
}
