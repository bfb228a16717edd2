package modeltest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// choose picks the answer to request i and records which script and turn it
// came from.
func (s *Server) choose(p parsed, h http.Header, i int) *answer {
	key := sessionKey(h, p)
	s.mu.Lock()
	rec := &s.reqs[i]
	rec.API, rec.Model, rec.Stream, rec.Tools = p.api, p.model, p.stream, p.tools
	rec.Prompt, rec.Latest, rec.Session, rec.Side = p.prompt, p.latest, key, p.side
	if p.side {
		s.mu.Unlock()
		if p.schema != nil {
			return s.answer(p, Turn{Text: schemaExample(p.schema)})
		}
		return s.answer(p, Turn{Text: s.cfg.SideText})
	}
	sess := s.sessions[key]
	if sess == nil {
		sess = &session{script: -1, loaded: map[string]bool{}}
		s.sessions[key] = sess
	}
	if sess.script < 0 {
		for j, sc := range s.cfg.Scripts {
			if strings.Contains(p.prompt, sc.Match) {
				sess.script = j
				break
			}
		}
	}
	if sess.script < 0 {
		rec.Unmatched = true
		s.mu.Unlock()
		return s.fallback(p, "no script's Match is in the prompt")
	}
	sc := s.cfg.Scripts[sess.script]
	rec.Script = sc.Name
	for j := sess.next; j < len(sc.Turns); j++ {
		t := sc.Turns[j]
		if t.When != "" && !strings.Contains(p.latest, t.When) {
			continue
		}
		rec.Turn = j
		sess.next = j + 1
		if t.Reply != nil {
			t = t.replied(Input{Prompt: p.prompt, Latest: p.latest})
		}
		if p.api == Anthropic && p.offered["ToolSearch"] {
			var deferred []string
			for _, c := range t.Calls {
				if c.Name != "ToolSearch" && !p.offered[c.Name] && !sess.loaded[c.Name] {
					sess.loaded[c.Name] = true
					deferred = append(deferred, c.Name)
				}
			}
			if len(deferred) > 0 {
				// Load the deferred tools first; the turn itself answers
				// the next request.
				sess.next = j
				load := LoadTools(deferred...)
				load.Usage, load.Delay, load.Wait = t.Usage, t.Delay, t.Wait
				t = load
			}
		}
		s.mu.Unlock()
		return s.answer(p, t)
	}
	rec.Unmatched = true
	s.mu.Unlock()
	return s.fallback(p, fmt.Sprintf("script %q has no turn left whose When is in the latest input", sc.Name))
}

// fallback is the answer to a request no script or turn matched.
func (s *Server) fallback(p parsed, why string) *answer {
	s.logf("modeltest: %s (prompt %.120q; latest %.120q)", why, p.prompt, p.latest)
	return s.answer(p, Turn{Text: "modeltest: no script matched this request: " + why + "."})
}

// answer turns a Turn into what will be served, in the request's API.
func (s *Server) answer(p parsed, t Turn) *answer {
	a := &answer{text: t.Text, err: t.Error, usage: s.cfg.Usage, turn: t}
	if t.Usage != nil {
		a.usage = *t.Usage
	}
	if t.Error != nil {
		a.usage = Usage{}
		return a
	}
	for _, c := range t.Calls {
		var sc servedCall
		switch p.api {
		case Anthropic:
			name, input := anthropicCall(c)
			raw, err := json.Marshal(input)
			if err != nil {
				raw = []byte(`{}`)
			}
			sc = servedCall{ServedCall: ServedCall{ID: s.nextID("toolu"), Name: name, Input: raw}}
		case Gemini:
			name, input := geminiCall(p, c)
			raw, err := json.Marshal(input)
			if err != nil {
				raw = []byte(`{}`)
			}
			sc = servedCall{ServedCall: ServedCall{ID: s.nextID("call"), Name: name, Input: raw}}
		default:
			kind, name, input := responsesCall(p, c)
			raw := json.RawMessage(input)
			if kind == "custom_tool_call" || !json.Valid(raw) {
				raw, _ = json.Marshal(input)
			}
			sc = servedCall{ServedCall: ServedCall{ID: s.nextID("call"), Name: name, Input: raw}, kind: kind, text: input}
		}
		a.calls = append(a.calls, sc)
	}
	return a
}

// chunks splits text into the deltas a stream sends, at rune boundaries.
func chunks(text string) []string {
	const size = 48
	var out []string
	for len(text) > size {
		n := size
		for n > 0 && !utf8.RuneStart(text[n]) {
			n--
		}
		if n == 0 {
			n = size
		}
		out = append(out, text[:n])
		text = text[n:]
	}
	if text != "" {
		out = append(out, text)
	}
	return out
}

// sseWriter writes server-sent events, flushing each.
type sseWriter struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) *sseWriter {
	f, _ := w.(http.Flusher)
	return &sseWriter{w: w, f: f}
}

func (e *sseWriter) start() {
	e.w.Header().Set("content-type", "text/event-stream")
	e.w.Header().Set("cache-control", "no-cache")
	e.w.WriteHeader(http.StatusOK)
}

func (e *sseWriter) event(name string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		return
	}
	_, _ = fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", name, b)
	if e.f != nil {
		e.f.Flush()
	}
}

// data writes an event with no name, only data (the Gemini API's stream).
func (e *sseWriter) data(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	_, _ = fmt.Fprintf(e.w, "data: %s\r\n\r\n", b)
	if e.f != nil {
		e.f.Flush()
	}
}

// replied is t with its Reply's answer in place of its own.
func (t Turn) replied(in Input) Turn {
	r := t.Reply(in)
	t.Text, t.Calls, t.Error = r.Text, r.Calls, r.Error
	if r.Usage != nil {
		t.Usage = r.Usage
	}
	if r.Delay != 0 {
		t.Delay = r.Delay
	}
	if r.Wait != nil {
		t.Wait = r.Wait
	}
	t.Reply = nil
	return t
}
