package teamnotify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/clock"
)

// Defaults for WebhookConfig's zero fields.
const (
	DefaultAttempts    = 5
	DefaultMinBackoff  = time.Second
	DefaultMaxBackoff  = time.Minute
	DefaultHTTPTimeout = 10 * time.Second
	// MinSecretLen is the shortest secret NewWebhook accepts.
	MinSecretLen = 16
)

// ErrDeliveryFailed is matched by *DeliveryError.
var ErrDeliveryFailed = errors.New("teamnotify: delivery failed")

// ErrRedirected is a *DeliveryError's cause when the receiver answered
// with a redirect (3xx): a webhook never follows one, since following
// would send the signed body to an address nobody configured.
var ErrRedirected = errors.New("teamnotify: the receiver redirected; a signed notification goes to WebhookConfig.URL only")

// DeliveryError says why a webhook gave a notification up: after
// Attempts tries, or at once on an answer that a retry cannot change (a
// redirect, a 4xx other than 408 and 429).
type DeliveryError struct {
	URL      string
	ID       string
	Attempts int
	// Status is the last HTTP status (0: no answer, see Err).
	Status int
	Err    error
}

func (e *DeliveryError) Error() string {
	what := fmt.Sprintf("HTTP %d", e.Status)
	switch {
	case e.Status == 0 && e.Err != nil:
		what = e.Err.Error()
	case e.Err != nil:
		what += ": " + e.Err.Error()
	}
	return fmt.Sprintf("teamnotify: notification %s to %s not delivered after %d attempt(s): %s", e.ID, e.URL, e.Attempts, what)
}

// Is matches ErrDeliveryFailed.
func (e *DeliveryError) Is(target error) bool { return target == ErrDeliveryFailed }

// Unwrap returns the last transport error, if any.
func (e *DeliveryError) Unwrap() error { return e.Err }

// WebhookConfig configures a Webhook. URL and Secret are required; the
// zero value of every other field means its documented default.
type WebhookConfig struct {
	// URL receives a POST of each notification as JSON (http or https).
	// Required.
	URL string
	// Secret signs every request (SignatureHeader): at least MinSecretLen
	// (16) bytes, shared with the receiver only. Required.
	Secret []byte
	// Attempts is how many times a notification is tried before it is
	// given up; negative is an error. Default: 5 (DefaultAttempts).
	Attempts int
	// MinBackoff and MaxBackoff bound the wait before a retry: it doubles
	// from MinBackoff up to MaxBackoff, and each wait is drawn between
	// half and all of it (jitter, so that many hosts do not retry in
	// step). A Retry-After the receiver sends is honoured up to
	// MaxBackoff. Negative, or a MaxBackoff below MinBackoff, is an error.
	// Default: 1 s (DefaultMinBackoff) and 1 min (DefaultMaxBackoff, or
	// MinBackoff when that is longer).
	MinBackoff, MaxBackoff time.Duration
	// Client sends the requests. Its CheckRedirect is not used: the
	// webhook never follows a redirect (ErrRedirected). Default: an
	// http.Client with a timeout of 10 s (DefaultHTTPTimeout).
	Client *http.Client
	// Header is added to every request (an Authorization the receiver
	// wants, say). Default: none.
	Header http.Header
	// Clock drives the backoff and the signature's timestamp. Default: the
	// wall clock.
	Clock foreman.Clock
}

// Webhook is a Notifier that POSTs each notification as JSON to a URL,
// signed with an HMAC-SHA256 header (SignatureHeader, DeliveryHeader),
// and retries a failed delivery (no answer, 408, 429, 5xx) with backoff
// and jitter up to Attempts times. It never follows a redirect: a 3xx
// fails the delivery at once (ErrRedirected), naming where it pointed.
type Webhook struct {
	cfg    WebhookConfig
	clock  foreman.Clock
	client *http.Client
}

// NewWebhook checks cfg and returns the Webhook.
func NewWebhook(cfg WebhookConfig) (*Webhook, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, bad("URL %q is not an http(s) URL", cfg.URL)
	}
	if len(cfg.Secret) < MinSecretLen {
		return nil, bad("Secret is %d bytes; at least %d", len(cfg.Secret), MinSecretLen)
	}
	if cfg.Attempts < 0 || cfg.MinBackoff < 0 || cfg.MaxBackoff < 0 {
		return nil, bad("Attempts, MinBackoff and MaxBackoff cannot be negative")
	}
	if cfg.Attempts == 0 {
		cfg.Attempts = DefaultAttempts
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = max(DefaultMaxBackoff, cfg.MinBackoff)
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		return nil, bad("MaxBackoff %s is below MinBackoff %s", cfg.MaxBackoff, cfg.MinBackoff)
	}
	w := &Webhook{cfg: cfg, clock: clock.OrReal(cfg.Clock)}
	if cfg.Client != nil {
		c := *cfg.Client // the host's client, left as it is
		w.client = &c
	} else {
		w.client = &http.Client{Timeout: DefaultHTTPTimeout}
	}
	// A redirect would resend the signed body (307, 308) to an address
	// nobody configured: the 3xx is the answer.
	w.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return w, nil
}

// Notify delivers n: a *DeliveryError (ErrDeliveryFailed) when it gave
// up, ctx's error when ctx ended first.
func (w *Webhook) Notify(ctx context.Context, n Notification) error {
	body, err := json.Marshal(n)
	if err != nil {
		return err
	}
	derr := &DeliveryError{URL: w.cfg.URL, ID: n.ID}
	for attempt := 1; ; attempt++ {
		derr.Attempts = attempt
		status, retryAfter, location, err := w.post(ctx, n.ID, body)
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		derr.Status, derr.Err = status, err
		if err == nil && status/100 == 2 {
			return nil
		}
		if err == nil && status/100 == 3 {
			switch {
			case location == "":
				location = "nowhere (no Location)"
			case len(location) > 200:
				location = location[:200] + "..." // the receiver's words, in a log line
			}
			derr.Err = fmt.Errorf("%w: it pointed to %s; set the URL to the receiver's own address", ErrRedirected, location)
			return derr
		}
		if !retryable(status, err) || attempt >= w.cfg.Attempts {
			return derr
		}
		if err := clock.Sleep(ctx, w.clock, w.backoff(attempt, retryAfter)); err != nil {
			return context.Cause(ctx)
		}
	}
}

// post sends one attempt, signed at the time of sending; location is a
// redirect's Location.
func (w *Webhook) post(ctx context.Context, id string, body []byte) (status int, retryAfter time.Duration, location string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return 0, 0, "", err
	}
	for k, vs := range w.cfg.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "foreman-teamnotify")
	req.Header.Set(DeliveryHeader, id)
	req.Header.Set(SignatureHeader, Sign(w.cfg.Secret, body, w.clock.Now()))
	resp, err := w.client.Do(req)
	if err != nil {
		return 0, 0, "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		retryAfter = time.Duration(s) * time.Second
	}
	return resp.StatusCode, retryAfter, resp.Header.Get("Location"), nil
}

// retryable: no answer, a timeout, too many requests, a server error.
func retryable(status int, err error) bool {
	return err != nil || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
}

// backoff is the wait after the attempt-th failure: MinBackoff doubled
// per attempt up to MaxBackoff, drawn between half and all of it, at
// least the receiver's Retry-After (within MaxBackoff).
func (w *Webhook) backoff(attempt int, retryAfter time.Duration) time.Duration {
	d := w.cfg.MinBackoff
	for i := 1; i < attempt && d < w.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, w.cfg.MaxBackoff)
	d = d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
	return min(max(d, retryAfter), w.cfg.MaxBackoff)
}
