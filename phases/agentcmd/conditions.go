package agentcmd

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agentforeman/foreman/phases"
)

// What an agent's output says about why it could not go on by itself: a
// rate limit, an API error, a refused permission, a question for a person.
// The parsers fill these into the Summary; the Driver copies them into the
// AgentResult and, where the provider named the reset of a rate limit only
// in words, reads the time from them (resolveReset).

// conditions is the part of a Summary the parsers share.
type conditions struct {
	rateLimit   *phases.AgentRateLimit
	apiError    *phases.AgentAPIError
	denials     []phases.AgentPermissionDenial
	questions   []phases.AgentQuestion
	askedOrder  []string
	asked       map[string]phases.AgentQuestion // question tool calls by id
	answered    map[string]bool
	denialSeen  map[string]bool
	questionSet map[string]bool
}

func (c *conditions) ask(id string, q phases.AgentQuestion) {
	if c.asked == nil {
		c.asked, c.answered = map[string]phases.AgentQuestion{}, map[string]bool{}
	}
	if _, ok := c.asked[id]; !ok {
		c.askedOrder = append(c.askedOrder, id)
	}
	c.asked[id] = q
}

func (c *conditions) answer(id string) {
	if c.answered != nil {
		c.answered[id] = true
	}
}

func (c *conditions) addQuestion(q phases.AgentQuestion) {
	if c.questionSet == nil {
		c.questionSet = map[string]bool{}
	}
	key := q.Tool + "\x00" + q.Text
	if !c.questionSet[key] {
		c.questionSet[key] = true
		c.questions = append(c.questions, q)
	}
}

func (c *conditions) deny(d phases.AgentPermissionDenial) {
	if c.denialSeen == nil {
		c.denialSeen = map[string]bool{}
	}
	key := d.Tool + "\x00" + d.Input
	if !c.denialSeen[key] {
		c.denialSeen[key] = true
		c.denials = append(c.denials, d)
	}
}

// fill copies the conditions into s: questions asked and never answered
// come first, then those reported otherwise.
func (c *conditions) fill(s *Summary) {
	s.RateLimit, s.APIError = c.rateLimit, c.apiError
	s.PermissionDenials = append([]phases.AgentPermissionDenial(nil), c.denials...)
	var qs []phases.AgentQuestion
	seen := map[string]bool{}
	for _, id := range c.askedOrder {
		if q := c.asked[id]; !c.answered[id] {
			seen[q.Tool+"\x00"+q.Text] = true
			qs = append(qs, q)
		}
	}
	for _, q := range c.questions {
		if !seen[q.Tool+"\x00"+q.Text] {
			qs = append(qs, q)
		}
	}
	s.Questions = qs
}

// questionText renders the input of a question tool (Claude Code's
// AskUserQuestion, Codex's request_user_input): each question with its
// options, one per line. It reports false when input holds no question.
func questionText(input json.RawMessage) (string, bool) {
	var in struct {
		Questions []struct {
			Question string `json:"question"`
			Header   string `json:"header"`
			Options  []struct {
				Label string `json:"label"`
			} `json:"options"`
		} `json:"questions"`
	}
	if json.Unmarshal(input, &in) != nil {
		return "", false
	}
	var lines []string
	for _, q := range in.Questions {
		text := strings.TrimSpace(q.Question)
		if text == "" {
			text = strings.TrimSpace(q.Header)
		}
		if text == "" {
			continue
		}
		var labels []string
		for _, o := range q.Options {
			if o.Label != "" {
				labels = append(labels, o.Label)
			}
		}
		if len(labels) > 0 {
			text += " (" + strings.Join(labels, " / ") + ")"
		}
		lines = append(lines, text)
	}
	if len(lines) == 0 {
		return "", false
	}
	return clip(strings.Join(lines, "\n"), maxEventText), true
}

// Codex reports every failure of a turn as text only (ThreadErrorEvent has
// a message and nothing else), so its rate limits and API errors are told
// apart by the texts codex-rs/core/src/error.rs prints.
var (
	codexUsageLimit = regexp.MustCompile(`(?i)you've hit your usage limit|exceeded retry limit, last status: 429|too many requests`)
	codexStatus     = regexp.MustCompile(`(?i)(?:unexpected status|last status:?) (\d{3})`)
)

// classifyCodexError sorts a Codex turn failure into a rate limit or an API
// error. Every unrecovered turn failure is a provider failure: Codex hands
// tool and command errors back to the model, so what ends a turn is the
// model's API (or the connection to it).
func classifyCodexError(msg string) (*phases.AgentRateLimit, *phases.AgentAPIError) {
	if codexUsageLimit.MatchString(msg) {
		return &phases.AgentRateLimit{Message: msg}, nil
	}
	e := &phases.AgentAPIError{Message: msg}
	if m := codexStatus.FindStringSubmatch(msg); m != nil {
		e.Status, _ = strconv.Atoi(m[1])
	}
	lower := strings.ToLower(msg)
	switch {
	case strings.Contains(lower, "quota exceeded"), strings.Contains(lower, "purchase more credits"):
		e.Code = "billing_error"
	case strings.Contains(lower, "high demand"), e.Status >= 500:
		e.Code = "server_error"
	case e.Status == 401, e.Status == 403, strings.Contains(lower, "refresh token"), strings.Contains(lower, "log in"):
		e.Code = "authentication_failed"
	case strings.Contains(lower, "context window"):
		e.Code = "context_window_exceeded"
	case strings.Contains(lower, "stream disconnected"), strings.Contains(lower, "connection failed"):
		e.Code = "connection_error"
	}
	return nil, e
}

// Reset times given in words.
var (
	// Claude Code: "You've hit your limit · resets 12pm (America/Chicago)",
	// "resets 5:30pm", "resets Oct 9, 10am (Europe/London)".
	claudeResets = regexp.MustCompile(`(?i)resets (?:([a-z]{3}) (\d{1,2}),? (?:at )?)?(\d{1,2})(?::(\d{2}))? ?(am|pm)(?: \(([^)]+)\))?`)
	// Codex (error.rs format_retry_timestamp, in the machine's local time):
	// "try again at 3:28 PM." today, "try again at Aug 8th, 2026 12:30 PM."
	codexTryAt = regexp.MustCompile(`(?i)try again at (?:([a-z]{3}) (\d{1,2})(?:st|nd|rd|th)?, (\d{4}) )?(\d{1,2}):(\d{2}) ?(am|pm)`)
	// Older Codex: "try again in 3 days 6 hours 57 minutes".
	codexTryIn = regexp.MustCompile(`(?i)try again in ((?:\d+ (?:days?|hours?|minutes?|seconds?),? ?(?:and )?)+)`)
	durPart    = regexp.MustCompile(`(\d+) (day|hour|minute|second)`)
	// Gemini CLI (a quota's google.rpc.RetryInfo): "Suggested retry after
	// 3600s.".
	geminiRetryAfter = regexp.MustCompile(`(?i)suggested retry after (\d+(?:\.\d+)?)(ms|s)\b`)
)

// resolveReset reads the reset time a rate-limit message names in words,
// relative to now; a wall-clock time without a zone is read in now's
// location (Codex prints the machine's local time, and the real clock's
// Now is local). It reports false when the message names none it can read.
func resolveReset(msg string, now time.Time) (time.Time, bool) {
	if m := claudeResets.FindStringSubmatch(msg); m != nil {
		loc := now.Location()
		if m[6] != "" {
			l, err := time.LoadLocation(m[6])
			if err != nil {
				return time.Time{}, false
			}
			loc = l
		}
		return wallClock(now.In(loc), m[1], m[2], "", m[3], m[4], m[5])
	}
	if m := codexTryAt.FindStringSubmatch(msg); m != nil {
		return wallClock(now, m[1], m[2], m[3], m[4], m[5], m[6])
	}
	if m := geminiRetryAfter.FindStringSubmatch(msg); m != nil {
		if d, err := time.ParseDuration(m[1] + m[2]); err == nil && d > 0 {
			return now.Add(d), true
		}
	}
	if m := codexTryIn.FindStringSubmatch(msg); m != nil {
		var d time.Duration
		for _, p := range durPart.FindAllStringSubmatch(m[1], -1) {
			n, _ := strconv.Atoi(p[1])
			unit := map[string]time.Duration{"day": 24 * time.Hour, "hour": time.Hour, "minute": time.Minute, "second": time.Second}[strings.ToLower(p[2])]
			d += time.Duration(n) * unit
		}
		if d > 0 {
			return now.Add(d), true
		}
	}
	return time.Time{}, false
}

// wallClock is the time hour:minute am/pm on the given day (month name and
// day, and year if given) in now's location; without a date, the next such
// time at or after now; with a date but no year, the next such date.
func wallClock(now time.Time, month, day, year, hour, minute, ampm string) (time.Time, bool) {
	h, _ := strconv.Atoi(hour)
	mi, _ := strconv.Atoi(minute)
	if h < 1 || h > 12 || mi > 59 {
		return time.Time{}, false
	}
	h %= 12
	if strings.EqualFold(ampm, "pm") {
		h += 12
	}
	loc := now.Location()
	if month == "" {
		t := time.Date(now.Year(), now.Month(), now.Day(), h, mi, 0, 0, loc)
		if t.Before(now) {
			t = t.AddDate(0, 0, 1)
		}
		return t, true
	}
	mon, err := time.Parse("Jan", strings.ToUpper(month[:1])+strings.ToLower(month[1:]))
	if err != nil {
		return time.Time{}, false
	}
	d, _ := strconv.Atoi(day)
	y := now.Year()
	if year != "" {
		y, _ = strconv.Atoi(year)
	}
	t := time.Date(y, mon.Month(), d, h, mi, 0, 0, loc)
	if year == "" && t.Before(now.Add(-24*time.Hour)) {
		t = t.AddDate(1, 0, 0)
	}
	return t, true
}
