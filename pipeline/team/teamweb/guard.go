package teamweb

import (
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// loopbackNames are the names a browser on the host's machine uses for it.
var loopbackNames = []string{"127.0.0.1", "localhost", "::1"}

// guard decides which requests reach the handler at all: the Host header
// must name the handler (a DNS-rebinding page names its own host, which
// resolves to this machine), and a browser's Origin, when sent, must be
// the page's own or a trusted one.
type guard struct {
	hosts      map[string]bool // exact Host values, lowercase ("127.0.0.1:8080")
	anyPort    map[string]bool // names allowed with any port, or none ("localhost")
	trusted    map[string]bool // TrustedOrigins, normalised ("https://dash.example.com")
	allowedMsg string          // the allowed Host values, for a refusal
}

// newGuard builds the Host allowlist from Config.Addr and AllowedHosts.
func newGuard(cfg Config) (*guard, error) {
	g := &guard{hosts: map[string]bool{}, anyPort: map[string]bool{}, trusted: map[string]bool{}}
	var shown []string
	if cfg.Addr == "" {
		for _, n := range loopbackNames {
			g.anyPort[n] = true
		}
		shown = append(shown, "127.0.0.1, localhost or [::1] with any port")
	} else {
		host, port, err := net.SplitHostPort(cfg.Addr)
		if err != nil {
			return nil, fmt.Errorf("address %q (Addr): %v (want host:port, the listener's address)", cfg.Addr, err)
		}
		if port == "" || port == "0" {
			return nil, fmt.Errorf("address %q (Addr) has no port: give the listener's address (net.Listener.Addr), not what was asked for", cfg.Addr)
		}
		names := slices.Clone(loopbackNames)
		if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
			names = append(names, host) // 0.0.0.0 and :: are no name a browser sends
		}
		for _, n := range names {
			hp := strings.ToLower(net.JoinHostPort(n, port))
			if !g.hosts[hp] {
				g.hosts[hp] = true
				shown = append(shown, hp)
			}
			if port == "80" {
				g.hosts[strings.ToLower(bracket(n))] = true // a browser leaves the default port out
			}
		}
	}
	for _, h := range cfg.AllowedHosts {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" || strings.ContainsAny(h, "/@?# ") {
			return nil, fmt.Errorf("AllowedHosts: %q is not a host or host:port", h)
		}
		if name, _, err := net.SplitHostPort(h); err == nil && name != "" {
			g.hosts[h] = true
		} else {
			g.anyPort[strings.Trim(h, "[]")] = true
		}
		shown = append(shown, h)
	}
	g.allowedMsg = strings.Join(shown, ", ")
	for _, o := range cfg.TrustedOrigins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("TrustedOrigins: %q is not an origin (scheme://host[:port])", o)
		}
		g.trusted[strings.ToLower(u.Scheme+"://"+u.Host)] = true
	}
	return g, nil
}

func bracket(name string) string {
	if strings.Contains(name, ":") {
		return "[" + name + "]"
	}
	return name
}

// hostAllowed reports whether a Host header names the handler.
func (g *guard) hostAllowed(host string) bool {
	host = strings.ToLower(host)
	if host == "" {
		return false
	}
	if g.hosts[host] {
		return true
	}
	name := host
	if n, _, err := net.SplitHostPort(host); err == nil {
		name = n
	}
	return g.anyPort[strings.Trim(name, "[]")]
}

// check refuses what must not reach the handler, and reports whether it
// wrote the refusal:
//   - a Host header that does not name the handler (DNS rebinding: a page
//     of another site whose name now resolves to this machine);
//   - an Origin other than the page's own or a trusted one (another site's
//     script, or "null" from a sandboxed frame or a file);
//   - without an Origin, a request that the browser says comes from
//     another site (Sec-Fetch-Site cross-site or same-site: another port
//     of localhost is the same site), unless it is a navigation, which the
//     browser shows to the person and never to the other site.
func (h *Handler) check(w http.ResponseWriter, r *http.Request) bool {
	g := h.guard
	if !g.hostAllowed(r.Host) {
		h.refuse(w, r, http.StatusForbidden, "bad_host",
			fmt.Sprintf("Host %q is not a name this page is served as (%s): a page of another site whose name resolves to this machine (DNS rebinding) is refused", r.Host, g.allowedMsg))
		return true
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		if !g.originAllowed(origin, r.Host) {
			h.refuse(w, r, http.StatusForbidden, "cross_origin",
				fmt.Sprintf("Origin %q is not this page's (http://%s): a request from another site is refused (Config.TrustedOrigins lists others)", origin, r.Host))
			return true
		}
		return false
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		if r.Header.Get("Sec-Fetch-Mode") != "navigate" {
			h.refuse(w, r, http.StatusForbidden, "cross_origin",
				fmt.Sprintf("a request from another site (Sec-Fetch-Site %s) is refused; only a navigation to the page may come from one", r.Header.Get("Sec-Fetch-Site")))
			return true
		}
	}
	return false
}

func (g *guard) originAllowed(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // "null" among others
	}
	if g.trusted[strings.ToLower(u.Scheme+"://"+u.Host)] {
		return true
	}
	return strings.EqualFold(u.Host, host)
}

// Guard returns next behind the same Host and Origin checks as the page's
// own endpoints, for a host that serves more beside the page (the
// reference binary's Prometheus /metrics): a DNS-rebinding page or
// another site's script cannot reach it either. It asks for no token.
func (h *Handler) Guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.secureHeaders(w)
		if h.check(w, r) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// withToken serves next only to a request carrying the token: every read
// that carries the team's stories (status, events, stream). A browser's
// EventSource cannot send a header, so the token may come as the query's
// token too.
func (h *Handler) withToken(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok := readToken(r)
		if tok == "" {
			tok = r.URL.Query().Get("token")
		}
		switch {
		case tok == "":
			h.refuse(w, r, http.StatusUnauthorized, "no_token",
				"reading the team needs the token: header X-Foreman-Token, Authorization: Bearer, or ?token= (the page takes it from its URL's #token=)")
		case subtle.ConstantTimeCompare([]byte(tok), []byte(h.cfg.Token)) != 1:
			h.refuse(w, r, http.StatusForbidden, "bad_token", "the token is wrong")
		default:
			next(w, r)
		}
	}
}

// readToken is the token of a request's headers.
func readToken(r *http.Request) string {
	if t := r.Header.Get("X-Foreman-Token"); t != "" {
		return t
	}
	if a, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(a)
	}
	return ""
}
