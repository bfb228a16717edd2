// Package teamweb is a live status page for a team of agents
// (pipeline/team), as an http.Handler any host can mount: the people
// watching the team see its dependency graph with each story's state and
// stage, the workers at work and for how long, every story's attempts,
// last result and merge commit, and the escalations waiting for a person,
// each with the decisions Resolve offers (retry, resume, skip, abandon).
//
//	h, err := teamweb.New(t, teamweb.Config{Token: token})
//	http.Handle("/team/", http.StripPrefix("/team", h))
//	// a person opens http://127.0.0.1:8080/team/#token=<token>
//
// # What it serves
//
//   - GET /: the page (HTML, CSS and plain JavaScript embedded in the
//     binary: nothing is fetched from anywhere else, and its
//     Content-Security-Policy says so);
//   - GET api/status: the team's status as JSON (StatusResponse), with
//     the sequence number of the last event it reflects;
//   - GET api/events?after=N&limit=L: the events after N as JSON
//     (EventsResponse), at most L of them (1 to 10,000, the default);
//     EventsResponse.Last says where the log ends, so a client pages on
//     from its last event's Seq;
//   - GET api/stream: the event stream, as server-sent events whose id is
//     the event's Seq; a client that reconnects with Last-Event-ID (every
//     browser does) misses nothing. The page re-reads the status when an
//     event arrives, so it changes without a reload;
//   - POST api/resolve: a person's decision (ResolveRequest).
//
// # Safe actions
//
// Reading needs no token: whoever reaches the handler sees the page, the
// status and the events, stories' titles, feedback and escalations
// included. Serve it where only the team's people reach it (the reference
// binary binds 127.0.0.1), or put it behind the host's own
// authentication. A decision needs the token (Config.Token), is refused when a browser
// sends it from another site (Sec-Fetch-Site and Origin checks; there is
// no CORS), and is idempotent: the same decision twice decides once. A
// bad request changes nothing and gets a 4xx with a JSON ErrorResponse
// naming the cause: no token (401), a wrong token or another site (403),
// an unknown story (404), an unknown action (400), a story that is not
// paused or a decision about a pause that was already decided otherwise
// (409). A replay from a sequence number past the last event (a page that
// outlived its host) is a 400, and the page starts over from the status.
//
// # Slow clients
//
// Following the event stream never holds up the team: each stream reads
// the team's events from its own cursor (Team.Subscribe), buffers at most
// one batch, and a client that does not take a write within
// Config.WriteTimeout is disconnected; its browser reconnects from the
// last event it got. At most Config.MaxStreams streams are open at once.
package teamweb
