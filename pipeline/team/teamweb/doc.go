// Package teamweb is a live status page for a team of agents
// (pipeline/team), as an http.Handler any host can mount: the people
// watching the team see its dependency graph with each story's state and
// stage, the workers at work and for how long, every story's attempts,
// last result and merge commit, and the escalations waiting for a person,
// each with the decisions Resolve offers (retry, resume, skip, abandon).
//
// What the team refused of its agents (and of their gate checks), beyond
// their own assignments (team.StoryStatus.Refused), shows at a glance: the
// team's total in the header, a badge with the count in each such story's
// row and on its node of the graph. The badge opens the story's refusals
// under its row (each kind of attempt with its count, when it was first
// and last refused and the last one's detail, then the last refusal), and
// a paused story's escalation card lists them too.
//
//	h, err := teamweb.New(t, teamweb.Config{Token: token, Addr: ln.Addr().String()})
//	http.Handle("/team/", http.StripPrefix("/team", h))
//	// a person opens http://127.0.0.1:8080/team/#token=<token>
//
// # What it serves
//
//   - GET /: the page (HTML, CSS and plain JavaScript embedded in the
//     binary: nothing is fetched from anywhere else, and its
//     Content-Security-Policy says so);
//   - GET api/status: the team's status as JSON (StatusResponse), with
//     the sequence number of the last event it reflects; a story's
//     refused, refusedLast and refusedKinds and the team's refused are
//     left out when there are none;
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
// # Who gets an answer
//
// The team's stories are what its agents read and write: titles, bodies,
// gate output, agent summaries, escalations. So:
//
//   - Every request must name the handler in its Host header: Config.Addr
//     (the listener's address), a loopback name with its port (127.0.0.1,
//     localhost, [::1]), or one of Config.AllowedHosts; anything else is a
//     403 (bad_host). A page of another site whose name was made to
//     resolve to this machine (DNS rebinding) names its own host, so it
//     reaches nothing, not even the page.
//   - A browser's request from another site is a 403 (cross_origin): an
//     Origin other than the page's own or one of Config.TrustedOrigins
//     ("null" included), or, without an Origin, Sec-Fetch-Site cross-site
//     or same-site (another port of localhost is the same site), except a
//     navigation (a link to the page). There is no CORS.
//   - Every read that carries the team (status, events, stream) needs the
//     token (Config.Token): no token is a 401 (no_token), a wrong one a
//     403 (bad_token). A stream without the token is refused before it
//     counts against MaxStreams, so nobody without it holds the slots.
//     The page itself and its script and style need none (they hold no
//     story): the page takes the token from its URL's fragment and sends
//     it with every request.
//   - A decision needs the token too, is checked for another site once
//     more (http.CrossOriginProtection), and is idempotent: the same
//     decision twice decides once.
//
// A host serving more beside the page wraps it in Handler.Guard to put it
// behind the same Host and Origin checks (the reference binary's
// Prometheus /metrics, which holds counts and no story, so it asks for no
// token). A bad request changes nothing and gets a 4xx with a JSON
// ErrorResponse naming the cause: the refusals above, an unknown story
// (404), an unknown action (400), a story that is not paused or a
// decision about a pause that was already decided otherwise (409). A
// replay from a sequence number past the last event (a page that outlived
// its host) is a 400, and the page starts over from the status.
//
// The page shows what agents wrote (titles, results, feedback,
// escalations, refusals and events) as text, never as markup: it builds
// every element itself and puts their words in text nodes and attributes,
// and its Content-Security-Policy runs no inline script besides. A
// refusal's detail is what its agent chose to name (files, commands,
// tools, URLs): the team bounds it (240 bytes a kind, 600 the last) and
// the page shows at most 300 characters of it.
//
// Serve it on 127.0.0.1 (the reference binary's default): over plain HTTP
// the token travels in clear, so a handler reached from other machines
// belongs behind TLS and the host's own authentication.
//
// # Slow clients
//
// Following the event stream never holds up the team: each stream reads
// the team's events from its own cursor (Team.Subscribe), buffers at most
// one batch, and a client that does not take a write within
// Config.WriteTimeout is disconnected; its browser reconnects from the
// last event it got. At most Config.MaxStreams streams are open at once.
package teamweb
