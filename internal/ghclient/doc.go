// Package ghclient is the GitHub REST client Foreman's GitHub code shares
// (pipeline/team/ghsource, pipeline/team/ghland): go-github with
// golang.org/x/oauth2 over one transport that makes every GET conditional
// (the last answer's ETag in If-None-Match; a 304, which GitHub does not
// charge, is answered from that answer) and waits out GitHub's primary and
// secondary rate limits on an injectable clock (x-ratelimit-remaining 0
// until x-ratelimit-reset; Retry-After; a minute, doubling, for a
// secondary limit naming no time), with a gap between two writes.
package ghclient
