package main

import (
	"errors"
	"net"
	"net/http"
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
// fresh access token (the page's actions need it; reading does not). It
// returns a function that stops the server.
func servePage(tm *team.Team, reg *prometheus.Registry, addr string, out *printer) (stop func(), err error) {
	token := teamweb.NewToken()
	h, err := teamweb.New(tm, teamweb.Config{Token: token})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			out.printf("the status page stopped: %v\n", err)
		}
	}()
	out.printf("status page: http://%s/#token=%s (metrics: http://%s/metrics)\n", ln.Addr(), token, ln.Addr())
	// Open event streams never end on their own: the page goes with the
	// run, at once.
	return func() { _ = srv.Close() }, nil
}
