package ghclient

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentforeman/foreman"
)

// transport sits under go-github: it makes every GET conditional (the
// ETag of the last answer to the same URL; a 304 is answered from what
// that answer said, marked X-From-Cache as an HTTP cache does), and it
// waits out GitHub's rate limits on the clock instead of failing: the
// primary limit's reset when x-ratelimit-remaining says 0, a secondary
// limit's Retry-After (at least a minute, doubling, when GitHub names no
// time), and a gap between two writes, as GitHub asks of integrations.
type transport struct {
	base     http.RoundTripper
	clk      foreman.Clock
	gap      time.Duration
	maxTries int

	mu        sync.Mutex
	cache     map[string]cached
	until     time.Time // no request before: a rate limit's reset
	lastWrite time.Time
	stats     Stats
}

type cached struct {
	etag   string
	body   []byte
	header http.Header
}

// Stats counts what the source asked of GitHub.
type Stats struct {
	// Requests is every request sent (retries included); NotModified the
	// 304s among them (conditional requests that cost no rate limit);
	// Limited the answers of a rate limit (403 or 429) it waited out.
	Requests, NotModified, Limited int
	// Waited is how long it waited for rate limits and write gaps.
	Waited time.Duration
}

// Stats returns the counts so far.
func (tr *transport) Stats() Stats {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.stats
}

// sleep waits d on the clock, or until ctx ends.
func sleep(ctx context.Context, clk foreman.Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	write := req.Method != http.MethodGet && req.Method != http.MethodHead
	key := req.URL.String()
	backoff := time.Minute
	for attempt := 1; ; attempt++ {
		tr.mu.Lock()
		now := tr.clk.Now()
		wait := tr.until.Sub(now)
		if write && !tr.lastWrite.IsZero() {
			wait = max(wait, tr.lastWrite.Add(tr.gap).Sub(now))
		}
		tr.mu.Unlock()
		if err := sleep(ctx, tr.clk, wait); err != nil {
			return nil, err
		}
		out := req.Clone(ctx)
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			out.Body = body
		}
		tr.mu.Lock()
		if wait > 0 {
			tr.stats.Waited += wait
		}
		c, hit := tr.cache[key]
		if !write && hit {
			out.Header.Set("If-None-Match", c.etag)
		}
		if write {
			tr.lastWrite = tr.clk.Now()
		}
		tr.stats.Requests++
		tr.mu.Unlock()
		resp, err := tr.base.RoundTrip(out)
		if err != nil {
			return nil, err
		}
		if d, limited := tr.limited(resp, backoff); limited && attempt < tr.maxTries {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			tr.mu.Lock()
			tr.stats.Limited++
			tr.until = tr.clk.Now().Add(d)
			tr.mu.Unlock()
			if d == backoff {
				backoff *= 2
			}
			continue
		}
		tr.note(resp)
		switch {
		case resp.StatusCode == http.StatusNotModified && hit:
			resp.Body.Close()
			tr.mu.Lock()
			tr.stats.NotModified++
			tr.mu.Unlock()
			h := c.header.Clone()
			for k, v := range resp.Header { // the rate headers are the 304's
				if strings.HasPrefix(strings.ToLower(k), "x-ratelimit") {
					h[k] = v
				}
			}
			h.Set("X-From-Cache", "1")
			return &http.Response{Status: "200 OK", StatusCode: http.StatusOK, Proto: resp.Proto, ProtoMajor: resp.ProtoMajor,
				ProtoMinor: resp.ProtoMinor, Header: h, Body: io.NopCloser(bytes.NewReader(c.body)), Request: req,
				ContentLength: int64(len(c.body))}, nil
		case !write && resp.StatusCode == http.StatusOK && resp.Header.Get("ETag") != "":
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return nil, err
			}
			tr.mu.Lock()
			tr.cache[key] = cached{etag: resp.Header.Get("ETag"), body: body, header: resp.Header.Clone()}
			tr.mu.Unlock()
			resp.Body = io.NopCloser(bytes.NewReader(body))
		}
		return resp, nil
	}
}

// note remembers an exhausted primary rate limit: no request before its
// reset.
func (tr *transport) note(resp *http.Response) {
	if resp.Header.Get("x-ratelimit-remaining") != "0" {
		return
	}
	if reset, ok := resetOf(resp); ok {
		tr.mu.Lock()
		if reset.After(tr.until) {
			tr.until = reset
		}
		tr.mu.Unlock()
	}
}

func resetOf(resp *http.Response) (time.Time, bool) {
	n, err := strconv.ParseInt(resp.Header.Get("x-ratelimit-reset"), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(n, 0), true
}

// limited says whether resp is a rate limit's answer and how long to wait
// before the next try, as GitHub documents it: Retry-After when given;
// else the reset when x-ratelimit-remaining is 0; else (a secondary
// limit naming no time) backoff, a minute at first, doubling.
func (tr *transport) limited(resp *http.Response, backoff time.Duration) (time.Duration, bool) {
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests {
		return 0, false
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		if secs, err := strconv.Atoi(ra); err == nil {
			return time.Duration(secs) * time.Second, true
		}
	}
	if resp.Header.Get("x-ratelimit-remaining") == "0" {
		if reset, ok := resetOf(resp); ok {
			return max(reset.Sub(tr.clk.Now()), time.Second), true
		}
	}
	// A 403 is also a plain refusal (no permission): only the secondary
	// limit's message or documentation makes it one to wait out.
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return 0, false
	}
	var e struct {
		Message string `json:"message"`
		Doc     string `json:"documentation_url"`
	}
	_ = json.Unmarshal(body, &e)
	if resp.StatusCode == http.StatusTooManyRequests || strings.Contains(e.Doc, "secondary-rate-limits") ||
		strings.Contains(strings.ToLower(e.Message), "secondary rate limit") {
		return backoff, true
	}
	return 0, false
}
