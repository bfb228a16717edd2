package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teammetrics"
	"github.com/agentforeman/foreman/pipeline/team/teamweb"
)

// newMetrics makes the registry /metrics serves: the team's metrics (fed
// by cfg's event hooks, which it sets) and the process's own.
func newMetrics(cfg *team.Config) (*prometheus.Registry, *teammetrics.Metrics, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := teammetrics.New(teammetrics.Config{Registerer: reg})
	if err != nil {
		return nil, nil, err
	}
	m.Instrument(cfg)
	return reg, m, nil
}

// servePage serves the team's live status page at addr while the team
// runs, with its Prometheus metrics at /metrics, and prints its URL with a
// fresh access token (every read of the team and every action needs it;
// the URL carries it in its fragment, which no request sends). The page
// answers only requests that name it (127.0.0.1, localhost or [::1] with
// its port, or addr's own host), from no other site; /metrics too, without
// the token: it holds counts, no story. An address beyond this machine
// gets a warning on stderr. It returns a function that stops the server.
func servePage(tm *team.Team, reg *prometheus.Registry, addr string, out *printer, stderr io.Writer) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	bound := ln.Addr().(*net.TCPAddr)
	cfg := teamweb.Config{Token: teamweb.NewToken(), Addr: bound.String(),
		OfflineHint: "Decide from a terminal: foreman -repo " + shellQuote(tm.Repo()) +
			" -resolve ID=retry|resume|skip|abandon [-note '...'], then run the same foreman command again."}
	urlHost := bound.String()
	if !bound.IP.IsLoopback() {
		names := pageNames(addr, bound)
		cfg.AllowedHosts = names
		if bound.IP.IsUnspecified() {
			urlHost = net.JoinHostPort("127.0.0.1", strconv.Itoa(bound.Port))
		} else {
			names = append([]string{bound.String()}, names...)
		}
		also := ""
		if len(names) > 0 {
			also = ", or " + strings.Join(names, ", ")
		}
		fmt.Fprintf(stderr, "foreman: warning: -http %s serves the status page beyond this machine, over plain HTTP: whoever\n"+
			"  can reach it and learns the token (it travels in clear) reads every story and decides escalations.\n"+
			"  It answers only requests naming 127.0.0.1, localhost or [::1] with the port%s.\n"+
			"  Prefer -http 127.0.0.1:PORT and an SSH tunnel, or a proxy with its own authentication.\n",
			addr, also)
	}
	h, err := teamweb.New(tm, cfg)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/", h)
	// No story is in the metrics (counts by state, kind, role, outcome,
	// reason; durations; the process's own), and a Prometheus server is set
	// up once while the token is new every run: no token. The Host and
	// Origin checks keep a DNS-rebinding page from making it read the
	// team's status (every scrape does) over and over.
	mux.Handle("GET /metrics", h.Guard(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			out.printf("the status page stopped: %v\n", err)
		}
	}()
	out.printf("status page: http://%s/#token=%s (metrics: http://%s/metrics)\n", urlHost, cfg.Token, urlHost)
	// Open event streams never end on their own: the page goes with the
	// run, at once.
	return func() { _ = srv.Close() }, nil
}

// pageNames are the Host values, beside the bound address itself, that a
// browser elsewhere uses for a page bound beyond loopback, each with the
// port: the name -http gave (-http foreman.lan:8080), and for a wildcard
// (0.0.0.0, ::) every address of this machine's interfaces. A
// DNS-rebinding page can only ever name its own host, never these.
func pageNames(addr string, bound *net.TCPAddr) []string {
	port := strconv.Itoa(bound.Port)
	var names []string
	if host, _, err := net.SplitHostPort(addr); err == nil && host != "" && net.ParseIP(host) == nil {
		names = append(names, net.JoinHostPort(host, port))
	}
	if !bound.IP.IsUnspecified() {
		return names
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return names
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() {
			names = append(names, net.JoinHostPort(n.IP.String(), port))
		}
	}
	return names
}
