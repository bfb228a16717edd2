package main

import (
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teamweb"
)

// servePage serves the team's live status page at addr while the team
// runs, and prints its URL with a fresh access token (the page's actions
// need it; reading does not). It returns a function that stops the server.
func servePage(tm *team.Team, addr string, out *printer) (stop func(), err error) {
	token := teamweb.NewToken()
	h, err := teamweb.New(tm, teamweb.Config{Token: token})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			out.printf("the status page stopped: %v\n", err)
		}
	}()
	out.printf("status page: http://%s/#token=%s\n", ln.Addr(), token)
	// Open event streams never end on their own: the page goes with the
	// run, at once.
	return func() { _ = srv.Close() }, nil
}
