package teamweb

// ErrSlowClient is how a stream whose client stopped reading ends.
var ErrSlowClient = errSlowClient

// OnStreamEnd has f called with how each event stream ended.
func (h *Handler) OnStreamEnd(f func(error)) {
	h.hookMu.Lock()
	h.onStreamEnd = f
	h.hookMu.Unlock()
}
