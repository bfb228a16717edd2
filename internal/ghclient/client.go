package ghclient

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-github/v84/github"
	"golang.org/x/oauth2"

	"github.com/agentforeman/foreman"
)

// Options configure a Client; the callers' Configs document the defaults
// they apply first.
type Options struct {
	// Token is sent as a bearer token by golang.org/x/oauth2; empty: no
	// credentials (HTTPClient carries them).
	Token string
	// BaseURL is the REST API's URL, with its trailing slash.
	BaseURL string
	// HTTPClient's Transport sends the requests and its Timeout bounds
	// them; nil: http.DefaultTransport.
	HTTPClient *http.Client
	// WriteGap is the least time between two writes (negative: none);
	// MaxTries bounds the tries of a request a rate limit answers.
	WriteGap time.Duration
	MaxTries int
	// Clock times waits; nil: the wall clock.
	Clock foreman.Clock
	// UserAgent names the caller.
	UserAgent string
}

// Client is go-github over the transport.
type Client struct {
	*github.Client
	tr *transport
	// Plain sends requests outside the API (a log's download URL, which
	// GitHub signs itself) without the token, through the same base
	// transport.
	Plain *http.Client
}

// New builds the Client. It sends no request.
func New(o Options) (*Client, error) {
	base := http.DefaultTransport
	if o.HTTPClient != nil && o.HTTPClient.Transport != nil {
		base = o.HTTPClient.Transport
	}
	clk := o.Clock
	if clk == nil {
		clk = foreman.RealClock()
	}
	if o.MaxTries <= 0 {
		o.MaxTries = 6
	}
	tr := &transport{base: base, clk: clk, gap: o.WriteGap, maxTries: o.MaxTries, cache: map[string]cached{}}
	var rt http.RoundTripper = tr
	if o.Token != "" {
		rt = &oauth2.Transport{Source: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: o.Token, TokenType: "Bearer"}), Base: tr}
	}
	hc := &http.Client{Transport: rt}
	plain := &http.Client{Transport: base}
	if o.HTTPClient != nil {
		hc.Timeout = o.HTTPClient.Timeout
		plain.Timeout = o.HTTPClient.Timeout
	}
	gh := github.NewClient(hc)
	// Rate limits are waited out below go-github, on the clock.
	gh.DisableRateLimitCheck = true
	u, err := url.Parse(o.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("BaseURL: %w", err)
	}
	gh.BaseURL = u
	gh.UserAgent = o.UserAgent
	return &Client{Client: gh, tr: tr, Plain: plain}, nil
}

// Stats counts the requests sent so far.
func (c *Client) Stats() Stats { return c.tr.Stats() }

// CheckBaseURL checks an API URL and returns it with its trailing slash:
// http(s), a host, and no plain http with a token except to a loopback
// host (the token would travel in clear).
func CheckBaseURL(raw string, withToken bool) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("BaseURL %q is not an http(s) URL", raw)
	}
	if u.Scheme == "http" && withToken && !Loopback(u.Hostname()) {
		return "", fmt.Errorf("BaseURL %q is plain http: the token would travel in clear", raw)
	}
	if !strings.HasSuffix(raw, "/") {
		raw += "/"
	}
	return raw, nil
}

// Loopback says whether host is this machine.
func Loopback(host string) bool {
	return host == "localhost" || strings.HasPrefix(host, "127.") || host == "::1"
}
