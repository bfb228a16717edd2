package teamnotify

import (
	"context"
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
// unique within the team (a webhook sends it on every attempt, so a
// receiver can drop repeats; one that hears from several teams keys by
// Repo and ID).
type Notification struct {
	ID   string    `json:"id"`
	Kind Kind      `json:"kind"`
	At   time.Time `json:"at"`
	// Seq is the team event's sequence number; Repo the team's repository.
	Seq        uint64               `json:"seq"`
	Repo       string               `json:"repo"`
	Story      foreman.ItemID       `json:"story,omitempty"`
	Stage      int                  `json:"stage"`
	Role       string               `json:"role,omitempty"`
	Escalation *pipeline.Escalation `json:"escalation,omitempty"`
	Actions    []team.Action        `json:"actions,omitempty"`
	Detail     string               `json:"detail,omitempty"`
}

// Of returns the notification an event of the team at repo calls for,
// and false for events nobody is notified of.
func Of(repo string, e team.Event) (Notification, bool) {
	n := Notification{ID: fmt.Sprintf("%d", e.Seq), At: e.At, Seq: e.Seq, Repo: repo, Story: e.Story, Stage: e.Stage,
		Role: e.Role, Detail: e.Detail}
	switch e.Kind {
	case team.EventStoryPaused:
		n.Kind, n.Escalation, n.Actions = KindEscalation, e.Escalation, team.Actions()
	case team.EventRunFinished:
		n.Kind = KindRunFinished
	default:
		return Notification{}, false
	}
	n.ID = string(n.Kind) + "-" + n.ID
	return n, true
}

// ErrInvalidConfig is matched by the error of a Config refused.
var ErrInvalidConfig = errors.New("teamnotify: invalid config")

// ForwardConfig configures Forward.
type ForwardConfig struct {
	// Notifier receives the notifications. Required.
	Notifier Notifier
	// After is the sequence number of the last event already handled (0:
	// from the team's first event). A host that keeps the Seq of the last
	// notification it sent passes it here after a restart.
	After uint64
	// OnDone, when set, is called after each notification with its
	// outcome (nil: delivered), for a host that records progress.
	OnDone func(Notification, error)
	// Logger receives failed deliveries; nil discards.
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
	repo := t.Repo()
	for e := range t.Subscribe(ctx, cfg.After) {
		n, ok := Of(repo, e)
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
