package teamweb

import (
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/team"
)

// Defaults for Config's zero fields.
const (
	DefaultWriteTimeout = 10 * time.Second
	DefaultHeartbeat    = 15 * time.Second
	DefaultMaxStreams   = 64
	DefaultStatusMaxAge = 250 * time.Millisecond
	// MinTokenLen is the shortest token New accepts: a token is all that
	// stands between the page's buttons and anyone who can reach it.
	MinTokenLen = 16
	// maxEventsPage bounds one GET of the events endpoint.
	maxEventsPage = 10000
	// maxBody bounds an action's request body.
	maxBody = 64 << 10
)

// ErrInvalidConfig is matched by New's error for a Config it refuses.
var ErrInvalidConfig = errors.New("teamweb: invalid config")

// Config configures the Handler. Token is required; the zero value of
// every other field means its documented default.
type Config struct {
	// Token authorises every read that carries the team's stories (the
	// status, the events, the stream) and every action (a person's
	// decisions). Required: at least MinTokenLen characters; NewToken makes
	// one. A request carries it in the X-Foreman-Token header or as
	// "Authorization: Bearer <token>"; a read may give it as the query's
	// token (a browser's EventSource cannot send headers), an action as
	// the form field "token". The page itself and its script and style
	// need none: the page reads the token from the fragment of its URL
	// (http://host/#token=...; a fragment never reaches a server or a
	// Referer), keeps it in the tab's session storage, and sends it with
	// each request. Required.
	Token string
	// Addr is the address the handler is served on, as the listener has
	// it ("127.0.0.1:8080": net.Listener.Addr, so never port 0). Every
	// request must name it in its Host header, or a loopback name with its
	// port (127.0.0.1, localhost, [::1]); anything else is refused (403):
	// a page of another site whose name was made to resolve to this
	// machine (DNS rebinding) names its own host. A wildcard address
	// (0.0.0.0, ::) adds no name: list the names people use in
	// AllowedHosts. Default: none (a loopback name with any port).
	Addr string
	// AllowedHosts are more Host header values a request may name, for a
	// handler reached under other names (a proxy, the machine's name or
	// address on the network): "host:port" exactly, or "host" with any
	// port. Default: none.
	AllowedHosts []string
	// TrustedOrigins are origins ("https://dash.example.com") besides the
	// page's own whose browser requests may read and act, for a host
	// serving the page behind a proxy under another name. Every other
	// cross-origin request is refused (Origin and Sec-Fetch-Site checks);
	// there is no CORS. Default: none (the page's own origin only).
	TrustedOrigins []string
	// WriteTimeout bounds each write to an event stream: a client that
	// reads slower than that is disconnected, and its browser reconnects
	// from the last event it got. Default: 10 s (DefaultWriteTimeout).
	WriteTimeout time.Duration
	// Heartbeat is how often an idle event stream sends a comment, so
	// proxies keep it open and a dead client is noticed. Default: 15 s
	// (DefaultHeartbeat).
	Heartbeat time.Duration
	// MaxStreams bounds the event streams open at once; one more gets 503.
	// Default: 64 (DefaultMaxStreams).
	MaxStreams int
	// StatusMaxAge is how long one read of the status answers every page
	// that asks, as long as no event was recorded meanwhile; negative
	// reads it for every request. Every open page re-reads the status
	// when an event arrives, and a read costs a store read per story, so
	// without it N pages cost N reads per event. Default: 250 ms
	// (DefaultStatusMaxAge).
	StatusMaxAge time.Duration
	// OfflineHint is what the page tells a person once its server is gone
	// (the host stopped): how to decide about paused stories without it,
	// such as the command that does. Default: a sentence naming
	// team.Team.Resolve.
	OfflineHint string
	// Clock drives the heartbeats and StatusMaxAge. Default: the wall
	// clock.
	Clock foreman.Clock
	// Logger receives refused requests and stream ends. Default: none (nil
	// discards them).
	Logger *slog.Logger
}

// Handler serves a team's live status page, its JSON endpoints, its event
// stream and a person's decisions. Mount it anywhere (under a prefix with
// http.StripPrefix: the page uses relative URLs, so its URL must end with
// a slash).
type Handler struct {
	team  *team.Team
	cfg   Config
	mux   *http.ServeMux
	csrf  *http.CrossOriginProtection
	guard *guard
	clock foreman.Clock
	log   *slog.Logger

	lastSeq atomic.Uint64 // the highest Seq seen: lets lastEvent read only the tail
	streams atomic.Int64  // event streams open now

	statusMu sync.Mutex // one status read at a time; the others wait for it
	cached   cachedStatus

	hookMu      sync.Mutex
	onStreamEnd func(error) // tests: how each event stream ended
}

//go:embed static
var staticFiles embed.FS

// New returns the Handler serving t.
func New(t *team.Team, cfg Config) (*Handler, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	if t == nil {
		return nil, bad("no team")
	}
	if len(cfg.Token) < MinTokenLen {
		return nil, bad("Token is %d characters; at least %d (NewToken makes one)", len(cfg.Token), MinTokenLen)
	}
	if cfg.WriteTimeout < 0 || cfg.Heartbeat < 0 || cfg.MaxStreams < 0 {
		return nil, bad("WriteTimeout, Heartbeat and MaxStreams cannot be negative")
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.MaxStreams == 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.OfflineHint == "" {
		cfg.OfflineHint = "Decide about paused stories through the host program's own way (team.Team.Resolve), then run the team again."
	}
	if cfg.StatusMaxAge == 0 {
		cfg.StatusMaxAge = DefaultStatusMaxAge
	}
	h := &Handler{team: t, cfg: cfg, mux: http.NewServeMux(), csrf: http.NewCrossOriginProtection(),
		clock: cfg.Clock, log: cfg.Logger}
	if h.clock == nil {
		h.clock = foreman.RealClock()
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	for _, o := range cfg.TrustedOrigins {
		if err := h.csrf.AddTrustedOrigin(o); err != nil {
			return nil, bad("TrustedOrigins: %v", err)
		}
	}
	g, err := newGuard(cfg)
	if err != nil {
		return nil, bad("%v", err)
	}
	h.guard = g
	static, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, err
	}
	h.mux.HandleFunc("GET /{$}", h.servePage)
	h.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	h.mux.HandleFunc("/api/status", h.only("GET", h.withToken(h.serveStatus)))
	h.mux.HandleFunc("/api/events", h.only("GET", h.withToken(h.serveEvents)))
	h.mux.HandleFunc("/api/stream", h.only("GET", h.withToken(h.serveStream)))
	h.mux.HandleFunc("/api/resolve", h.only("POST", h.serveResolve))
	h.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.URL.Path)
	})
	return h, nil
}

// NewToken returns a random token of 32 hex digits for Config.Token.
func NewToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// ServeHTTP implements http.Handler. Every request passes the Host and
// Origin checks first (Config.Addr, AllowedHosts, TrustedOrigins).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.secureHeaders(w)
	if h.check(w, r) {
		return
	}
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) secureHeaders(w http.ResponseWriter) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
}

// only answers other methods with a JSON 405.
func (h *Handler) only(method string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method && !(method == "GET" && r.Method == "HEAD") {
			w.Header().Set("Allow", method)
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, method))
			return
		}
		next(w, r)
	}
}

func (h *Handler) servePage(w http.ResponseWriter, r *http.Request) {
	page, err := staticFiles.ReadFile("static/index.html")
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	// Everything the page runs is its own files: no inline script, no
	// other origin, no framing (clickjacking the action buttons).
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; "+
		"connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(page)
}

// StatusResponse is the status endpoint's answer: the team's status and
// the sequence number of the last event recorded before it was read (the
// page follows the event stream from there).
type StatusResponse struct {
	team.Status
	Seq uint64 `json:"seq"`
	// OfflineHint is Config.OfflineHint: the page shows it once its server
	// is gone.
	OfflineHint string `json:"offlineHint"`
}

func (h *Handler) serveStatus(w http.ResponseWriter, r *http.Request) {
	body, err := h.statusJSON(r)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}

// cachedStatus is the last status read, as sent.
type cachedStatus struct {
	seq  uint64
	at   time.Time
	body []byte
}

// statusJSON reads the status, or reuses the last read when no event was
// recorded since and it is younger than StatusMaxAge. Reads are one at a
// time: pages that ask together wait for one read instead of each making
// their own.
func (h *Handler) statusJSON(r *http.Request) ([]byte, error) {
	h.statusMu.Lock()
	defer h.statusMu.Unlock()
	seq := h.lastEvent()
	if c := h.cached; c.body != nil && c.seq == seq && h.clock.Since(c.at) < h.cfg.StatusMaxAge {
		return c.body, nil
	}
	st, err := h.team.Status(r.Context())
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(StatusResponse{Status: st, Seq: seq, OfflineHint: h.cfg.OfflineHint})
	if err != nil {
		return nil, err
	}
	body = append(body, '\n')
	h.cached = cachedStatus{seq: seq, at: h.clock.Now(), body: body}
	return body, nil
}

// EventsResponse is the events endpoint's answer: the events after the
// requested sequence number (at most limit of them) and the last one
// recorded.
type EventsResponse struct {
	Events []team.Event `json:"events"`
	Last   uint64       `json:"last"`
}

func (h *Handler) serveEvents(w http.ResponseWriter, r *http.Request) {
	after, ok := h.replayFrom(w, r, r.URL.Query().Get("after"), "after")
	if !ok {
		return
	}
	limit := maxEventsPage
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxEventsPage {
			writeError(w, http.StatusBadRequest, "bad_limit", fmt.Sprintf("limit %q: want 1 to %d", s, maxEventsPage))
			return
		}
		limit = n
	}
	evs := h.team.Events(after)
	if len(evs) > 0 {
		h.noteSeq(evs[len(evs)-1].Seq)
	}
	if len(evs) > limit {
		evs = evs[:limit]
	}
	if evs == nil {
		evs = []team.Event{}
	}
	writeJSON(w, http.StatusOK, EventsResponse{Events: evs, Last: h.lastEvent()})
}

// replayFrom parses a sequence number to replay after; an empty one is 0.
// A number past the last event is refused: it comes from another team (a
// host that restarted) or is made up, and following it would silently
// skip every event up to it.
func (h *Handler) replayFrom(w http.ResponseWriter, r *http.Request, s, name string) (uint64, bool) {
	if s == "" {
		return 0, true
	}
	after, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_sequence", fmt.Sprintf("%s %q is not a sequence number", name, s))
		return 0, false
	}
	if last := h.lastEvent(); after > last {
		h.log.Info("teamweb: replay from the future refused", "from", after, "last", last, "remote", r.RemoteAddr)
		writeError(w, http.StatusBadRequest, "future_sequence",
			fmt.Sprintf("%s %d is past the last event (%d): reload the status and follow from its seq", name, after, last))
		return 0, false
	}
	return after, true
}

// lastEvent returns the sequence number of the last event recorded. It
// reads only the events after the last one it saw, so a long history is
// not copied on every call.
func (h *Handler) lastEvent() uint64 {
	for {
		seen := h.lastSeq.Load()
		evs := h.team.Events(seen)
		if len(evs) == 0 {
			return seen
		}
		h.noteSeq(evs[len(evs)-1].Seq)
	}
}

func (h *Handler) noteSeq(seq uint64) {
	for {
		seen := h.lastSeq.Load()
		if seq <= seen || h.lastSeq.CompareAndSwap(seen, seq) {
			return
		}
	}
}

func (h *Handler) internal(w http.ResponseWriter, r *http.Request, err error) {
	h.log.Error("teamweb: request failed", "path", r.URL.Path, "err", err)
	if errors.Is(err, team.ErrClosed) {
		writeError(w, http.StatusServiceUnavailable, "closed", err.Error())
		return
	}
	writeError(w, http.StatusInternalServerError, "internal", err.Error())
}

// ErrorResponse is every error's body: what went wrong, in words, and a
// code a program can branch on.
type ErrorResponse struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, ErrorResponse{Error: msg, Code: code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
