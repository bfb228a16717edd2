// Package teamnotify tells people what a team of agents (pipeline/team)
// needs from them, without their watching its page: a story waiting for
// a person (an escalation, with its cause and the decisions Resolve
// offers) and the end of a Run (every story merged or waiting, with the
// counts).
//
// Notifier is the one method a destination implements; Webhook is one
// that POSTs JSON; Forward follows a team's events and notifies:
//
//	w, err := teamnotify.NewWebhook(teamnotify.WebhookConfig{URL: url, Secret: secret})
//	go teamnotify.Forward(ctx, t, teamnotify.ForwardConfig{Notifier: w, Logger: log})
//
// Forward reads the team's event stream from its own cursor
// (Team.Subscribe): the team never waits for a notification, and a
// receiver that is slow or down only makes Forward fall behind. The
// stream is kept in the team's store, so a host that records the Seq of
// the last notification it sent (ForwardConfig.OnDone) and passes it as
// ForwardConfig.After after a restart sends nothing twice and misses
// nothing.
//
// # The webhook
//
// Each notification is one POST of the Notification as JSON, with
//
//	Content-Type: application/json
//	X-Foreman-Delivery: escalation-42-3f9a0c1b2d4e5f60  (the same on every attempt)
//	X-Foreman-Signature: t=1795510800,v1=5f2c…  (HMAC-SHA256, hex)
//
// A 2xx answer delivers it. No answer, 408, 429 or a 5xx is tried again
// after a wait that doubles from MinBackoff to MaxBackoff, each drawn
// between half and all of it (jitter), at least the receiver's
// Retry-After; after Attempts tries, or at once on another 4xx, Notify
// returns a *DeliveryError (ErrDeliveryFailed) with the attempts and the
// last status. A redirect (3xx) is never followed, since that would send
// the signed body to an address nobody configured: it fails the delivery
// at once (ErrRedirected), naming where it pointed.
//
// # Verifying a request
//
// The receiver shares the secret. v1 is the hex HMAC-SHA256, keyed with
// the secret, of the timestamp t, a dot, and the raw body exactly as
// received:
//
//	expected = hex(HMAC_SHA256(secret, t + "." + body))
//
// Accept the request only if expected equals v1 (compare in constant
// time) and t is within a few minutes of the receiver's clock: the
// timestamp is signed with the body, so a captured request replayed later
// is refused, and each attempt is signed afresh. Then drop an
// X-Foreman-Delivery already handled (a retry after a lost answer, or a
// host that restarted and sent it again). The ID is the event's kind and
// Seq and the team's key (TeamKey: derived from the team's repository and
// first event, so it lasts as long as the team's state), unique across
// teams and runs: one receiver can hear from many teams. In
// Go, VerifySignature does the first two checks; in a shell:
//
//	printf '%s.%s' "$t" "$body" | openssl dgst -sha256 -hmac "$secret"
package teamnotify
