package teamweb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/agentforeman/foreman/pipeline/team"
)

// streamBatch bounds what one flush of an event stream carries: the
// events already recorded are sent in batches of at most this many bytes
// (plus one event), so a client's buffer on this side stays small however
// far behind it is.
const streamBatch = 32 << 10

// errSlowClient ends a stream whose client did not take a write within
// WriteTimeout.
var errSlowClient = errors.New("teamweb: the client reads too slowly")

// serveStream is the event stream (server-sent events): every event after
// Last-Event-ID (what a browser sends when it reconnects) or the query's
// after, then every later one as it is recorded. Each event's SSE id is
// its Seq, so a reconnecting client misses nothing.
//
// It never holds up the team: Team.Subscribe reads the team's events from
// its own cursor, and this side buffers at most one batch; a client that
// does not take a write within WriteTimeout is disconnected (it
// reconnects from its last event).
func (h *Handler) serveStream(w http.ResponseWriter, r *http.Request) {
	from, name := r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	if from == "" {
		from, name = r.URL.Query().Get("after"), "after"
	}
	after, ok := h.replayFrom(w, r, from, name)
	if !ok {
		return
	}
	if n := h.streams.Add(1); n > int64(h.cfg.MaxStreams) {
		h.streams.Add(-1)
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "too_many_streams", fmt.Sprintf("%d event streams are open; at most %d", n-1, h.cfg.MaxStreams))
		return
	}
	defer h.streams.Add(-1)
	err := h.stream(w, r, after)
	h.log.Debug("teamweb: event stream ended", "after", after, "remote", r.RemoteAddr, "err", err)
	h.hookMu.Lock()
	hook := h.onStreamEnd
	h.hookMu.Unlock()
	if hook != nil {
		hook(err)
	}
}

func (h *Handler) stream(w http.ResponseWriter, r *http.Request, after uint64) error {
	ctx := r.Context()
	rc := http.NewResponseController(w)
	write := func(b []byte) error {
		// A socket deadline is wall-clock time by nature (the injectable
		// clock drives the heartbeats, not the network).
		if err := rc.SetWriteDeadline(time.Now().Add(h.cfg.WriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		if _, err := w.Write(b); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return fmt.Errorf("%w: %v", errSlowClient, err)
			}
			return err
		}
		if err := rc.Flush(); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return fmt.Errorf("%w: %v", errSlowClient, err)
			}
			return err
		}
		return nil
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no") // a proxy must not hold events back
	w.WriteHeader(http.StatusOK)
	if err := write([]byte("retry: 2000\n\n")); err != nil {
		return err
	}
	heartbeat := h.clock.NewTicker(h.cfg.Heartbeat)
	defer heartbeat.Stop()
	events := h.team.Subscribe(ctx, after)
	var buf bytes.Buffer
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-heartbeat.C():
			if err := write([]byte(": heartbeat\n\n")); err != nil {
				return err
			}
		case e, ok := <-events:
			if !ok {
				return ctx.Err()
			}
			buf.Reset()
			if err := appendEvent(&buf, e); err != nil {
				return err
			}
			last := e.Seq
			// Take what is already recorded, up to a batch, in one write.
		drain:
			for buf.Len() < streamBatch {
				select {
				case e, ok = <-events:
					if !ok {
						break drain
					}
					if err := appendEvent(&buf, e); err != nil {
						return err
					}
					last = e.Seq
				default:
					break drain
				}
			}
			h.noteSeq(last)
			if err := write(buf.Bytes()); err != nil {
				return err
			}
			heartbeat.Reset(h.cfg.Heartbeat)
		}
	}
}

// appendEvent writes one server-sent event: its Seq as the id, its JSON
// as the data (JSON has no raw line breaks, so one data line).
func appendEvent(buf *bytes.Buffer, e team.Event) error {
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	buf.WriteString("id: ")
	buf.WriteString(strconv.FormatUint(e.Seq, 10))
	buf.WriteString("\ndata: ")
	buf.Write(data)
	buf.WriteString("\n\n")
	return nil
}
