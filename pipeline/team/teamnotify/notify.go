package teamnotify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team"
)

// Notifier tells someone what a person watching a team should know.
// Notify returns when the notification was delivered or will not be (its
// error says why); it honours ctx.
type Notifier interface {
	Notify(ctx context.Context, n Notification) error
}

// NotifierFunc adapts a function to Notifier.
type NotifierFunc func(ctx context.Context, n Notification) error

// Notify calls f.
func (f NotifierFunc) Notify(ctx context.Context, n Notification) error { return f(ctx, n) }

// Kind is what a notification is about.
type Kind string

const (
	// KindEscalation: a story waits for a person (Escalation says why and
	// what to do; Actions are the decisions Resolve offers).
	KindEscalation Kind = "escalation"
	// KindRunFinished: a Run of the team ended: every story merged or
	// waits for a person, or it stopped (Detail says which, with counts).
	KindRunFinished Kind = "run_finished"
)

// Notification is one thing to tell. ID is stable for a team's event and
// unique across teams and runs: the event's kind and Seq (unique within
// the team, over all its runs) and the team's key (TeamKey). A webhook
// sends it on every attempt, and a host that restarts re-sends an event
// under the same ID, so a receiver drops repeats by ID alone.
type Notification struct {
	ID   string    `json:"id"`
	Kind Kind      `json:"kind"`
	At   time.Time `json:"at"`
	// Seq is the team event's sequence number; Team the team's key
	// (TeamKey); Repo the team's repository.
	Seq        uint64               `json:"seq"`
	Team       string               `json:"team"`
	Repo       string               `json:"repo"`
	Story      foreman.ItemID       `json:"story,omitempty"`
	Stage      int                  `json:"stage"`
	Role       string               `json:"role,omitempty"`
	Escalation *pipeline.Escalation `json:"escalation,omitempty"`
	Actions    []team.Action        `json:"actions,omitempty"`
	Detail     string               `json:"detail,omitempty"`
}

// Of returns the notification an event of the team with key teamKey
// (TeamKey) at repo calls for, and false for events nobody is notified of.
// Its ID is "<kind>-<seq>-<teamKey>".
func Of(teamKey, repo string, e team.Event) (Notification, bool) {
	n := Notification{At: e.At, Seq: e.Seq, Team: teamKey, Repo: repo, Story: e.Story, Stage: e.Stage,
		Role: e.Role, Detail: e.Detail}
	switch e.Kind {
	case team.EventStoryPaused:
		n.Kind, n.Escalation, n.Actions = KindEscalation, e.Escalation, team.Actions()
	case team.EventRunFinished:
		n.Kind = KindRunFinished
	default:
		return Notification{}, false
	}
	n.ID = fmt.Sprintf("%s-%d-%s", n.Kind, n.Seq, teamKey)
	return n, true
}

// TeamKey returns a key that tells t's notifications apart from any other
// team's: 16 hex digits of SHA-256 over t's repository and its first
// event (its time to the nanosecond, kind and story). It lasts as long as
// the team's state does (the events are durable): a host that restarts
// re-sends a notification under the same ID, while another team, or the
// same repository started over (its state removed), has another key. ""
// while t has recorded no event. A host that keeps an identity of its own
// for the team (a UUID in its config) passes it as ForwardConfig.Team
// instead.
func TeamKey(t *team.Team) string {
	evs := t.Events(0)
	if len(evs) == 0 {
		return ""
	}
	first := evs[0]
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%d\x00%s\x00%s", t.Repo(), first.Seq, first.At.UnixNano(), first.Kind, first.Story)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// ErrInvalidConfig is matched by the error of a Config refused.
var ErrInvalidConfig = errors.New("teamnotify: invalid config")

// ForwardConfig configures Forward.
type ForwardConfig struct {
	// Notifier receives the notifications. Required.
	Notifier Notifier
	// After is the sequence number of the last event already handled. A
	// host that keeps the Seq of the last notification it sent passes it
	// here after a restart. Default: 0 (from the team's first event).
	After uint64
	// OnDone, when set, is called after each notification with its
	// outcome (nil: delivered), for a host that records progress.
	// Default: none (nil: not called).
	OnDone func(Notification, error)
	// Team is the team's key in every notification's ID and Team field.
	// Default: TeamKey(t), taken at the first notification.
	Team string
	// Logger receives failed deliveries. Default: none (nil discards
	// them).
	Logger *slog.Logger
}

// Forward follows t's events from cfg.After (Team.Subscribe) and sends a
// notification for every escalation and every end of a Run, in order,
// one at a time, until ctx ends; then it returns ctx's cause. A failed
// delivery is logged (and given to OnDone) and the next one goes on. The
// team never waits for Forward: a notifier that is slow or down only
// makes Forward fall behind. Run it on a goroutine of its own.
func Forward(ctx context.Context, t *team.Team, cfg ForwardConfig) error {
	if t == nil || cfg.Notifier == nil {
		return fmt.Errorf("%w: Forward needs a team and a Notifier", ErrInvalidConfig)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	repo, key := t.Repo(), cfg.Team
	for e := range t.Subscribe(ctx, cfg.After) {
		if key == "" {
			key = TeamKey(t) // the team has an event now: the one in hand
		}
		n, ok := Of(key, repo, e)
		if !ok {
			continue
		}
		err := cfg.Notifier.Notify(ctx, n)
		if err != nil && ctx.Err() == nil {
			log.Warn("teamnotify: a notification was not delivered", "id", n.ID, "kind", n.Kind, "story", n.Story, "err", err)
		}
		if cfg.OnDone != nil && ctx.Err() == nil {
			cfg.OnDone(n, err)
		}
	}
	return context.Cause(ctx)
}
