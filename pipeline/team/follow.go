package team

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/pipeline/store"
)

// FollowConfig configures a Follower. Every field is optional.
type FollowConfig struct {
	// Name keys, in the team's store, how far the Follower has reported
	// the team's events to its source: two Followers of one team need
	// names of their own. Default: "source".
	Name string
	// Interval is the time between two polls of the source, and before a
	// report the source refused is tried again. Default: 1 min.
	Interval time.Duration
	// Clock times the polls. Default: the team's (Config.Clock).
	Clock foreman.Clock
	// Logger receives what the Follower could not do (a poll that failed,
	// a story it could not take). Default: the team's.
	Logger *slog.Logger
}

// Follower keeps a team in step with a Source: Sync adds the stories the
// source lists and drops those it withdraws; Flush tells the source (when
// it is a Reporter) what became of its stories, from the team's events;
// Run does both until its context ends. What it has reported is kept in
// the team's store, so a host killed at any point and started again
// reports every event once more at most, which the Reporter's keys make
// harmless, and none less.
type Follower struct {
	t   *Team
	src Source
	rep Reporter
	cfg FollowConfig
	clk foreman.Clock
	log *slog.Logger

	mu      sync.Mutex
	warned  map[foreman.ItemID]string
	cursor  uint64
	version int64
	loaded  bool
}

// Follow returns a Follower of src for the team. It does nothing until
// Sync, Flush or Run is called.
func (t *Team) Follow(src Source, cfg FollowConfig) *Follower {
	if cfg.Name == "" {
		cfg.Name = "source"
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	clk := cfg.Clock
	if clk == nil {
		clk = t.clk
	}
	log := cfg.Logger
	if log == nil {
		log = t.log
	}
	rep, _ := src.(Reporter)
	return &Follower{t: t, src: src, rep: rep, cfg: cfg, clk: clock.OrReal(clk), log: log, warned: map[foreman.ItemID]string{}}
}

// SyncResult is what one Sync did.
type SyncResult struct {
	// Added are the stories new to the team; Dropped those withdrawn.
	Added, Dropped []foreman.ItemID
	// Ignored are listed stories the team did not take, with the reason:
	// a story whose definition changed at the source after it was added,
	// an invalid one, one that comes after a story the team does not have.
	Ignored []IgnoredStory
}

// IgnoredStory is a listed story the team did not take, and why.
type IgnoredStory struct {
	Story  foreman.ItemID
	Reason string
}

// kindSourceCursor records, per Follower name, the last event reported.
const kindSourceCursor = "team.sourcecursor"

// Sync polls the source once: the stories it lists that the team does not
// have are added (with their dependencies; a story whose After names one
// neither listed nor in the team waits for it), and those it withdraws
// are dropped (Team.Drop; a story that started meanwhile is kept).
func (f *Follower) Sync(ctx context.Context) (SyncResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var res SyncResult
	t := f.t
	if err := t.view.fresh(ctx); err != nil {
		return res, err
	}
	var notStarted []foreman.ItemID
	for _, s := range t.view.statuses(&t.retries) {
		if (s.State == StoryPending || s.State == StoryBlocked) && s.Started.IsZero() && s.Decision == "" {
			notStarted = append(notStarted, s.ID)
		}
	}
	lst, err := f.src.List(ctx, notStarted)
	if err != nil {
		return res, err
	}
	for _, d := range lst.Dropped {
		err := t.Drop(ctx, d)
		switch {
		case err == nil:
			res.Dropped = append(res.Dropped, d.Story)
		case errors.Is(err, ErrStarted), errors.Is(err, ErrUnknownStory):
			f.log.Debug("team: a withdrawn story is kept", "story", d.Story, "why", err)
		default:
			return res, err
		}
	}
	fresh := map[foreman.ItemID]Story{}
	var order []foreman.ItemID
	for _, s := range lst.Stories {
		if old, ok := t.story(s.ID); ok {
			if !old.same(s) {
				res.Ignored = append(res.Ignored, IgnoredStory{s.ID, "changed at the source after it was added; the team keeps it as it was"})
			}
			continue
		}
		if _, dup := fresh[s.ID]; !dup {
			fresh[s.ID] = s
			order = append(order, s.ID)
		}
	}
	for len(fresh) > 0 {
		f.prune(fresh, &res)
		batch := make([]Story, 0, len(fresh))
		for _, id := range order {
			if s, ok := fresh[id]; ok {
				batch = append(batch, s)
			}
		}
		if len(batch) == 0 {
			break
		}
		err := t.Add(ctx, batch...)
		var se *StoryError
		if errors.As(err, &se) {
			if _, ok := fresh[se.ID]; ok {
				delete(fresh, se.ID)
				res.Ignored = append(res.Ignored, IgnoredStory{se.ID, se.Reason})
				continue
			}
		}
		if err != nil {
			return res, err
		}
		for _, s := range batch {
			res.Added = append(res.Added, s.ID)
		}
		break
	}
	for _, ig := range res.Ignored {
		if f.warned[ig.Story] != ig.Reason {
			f.warned[ig.Story] = ig.Reason
			f.log.Warn("team: a story of the source is not taken", "story", ig.Story, "why", ig.Reason)
		}
	}
	return res, nil
}

// prune removes from fresh the stories that come after one neither in the
// team nor in fresh, until none does.
func (f *Follower) prune(fresh map[foreman.ItemID]Story, res *SyncResult) {
	for changed := true; changed; {
		changed = false
		for id, s := range fresh {
			for _, a := range s.After {
				if _, ok := fresh[a]; ok {
					continue
				}
				if _, ok := f.t.story(a); ok {
					continue
				}
				delete(fresh, id)
				res.Ignored = append(res.Ignored, IgnoredStory{id, fmt.Sprintf("comes after %s, which the team does not have", a)})
				changed = true
				break
			}
		}
	}
	slices.SortFunc(res.Ignored, func(a, b IgnoredStory) int {
		if a.Story < b.Story {
			return -1
		}
		if a.Story > b.Story {
			return 1
		}
		return 0
	})
}

// reportFor is the StoryReport an event makes, if any.
func reportFor(e Event) (StoryReport, bool) {
	r := StoryReport{Story: e.Story, At: e.At}
	switch {
	case e.Story == "":
		return r, false
	case e.Kind == EventStageStarted && e.Stage == 0:
		r.Kind, r.Key = ReportStarted, string(ReportStarted)
	case e.Kind == EventStoryPaused:
		r.Kind, r.Key, r.Cause = ReportPaused, "paused-"+strconv.FormatUint(e.Seq, 10), e.Detail
		if e.Escalation != nil && e.Escalation.Message != "" {
			r.Cause = e.Escalation.Message
		}
	case e.Kind == EventStoryMerged:
		r.Kind, r.Key, r.Commit = ReportMerged, string(ReportMerged), e.Commit
	default:
		return r, false
	}
	return r, true
}

// Flush reports to the source every event recorded so far that it has
// not been told (nothing when the source is not a Reporter), in order,
// recording how far it got; it stops at the first report the source
// refuses, returning its error, and the next Flush starts there.
func (f *Follower) Flush(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.loadCursor(ctx); err != nil {
		return err
	}
	evs := f.t.Events(f.cursor)
	if len(evs) == 0 || f.rep == nil {
		return nil
	}
	done := f.cursor
	for _, e := range evs {
		if r, ok := reportFor(e); ok {
			if err := f.rep.Report(ctx, r); err != nil {
				if serr := f.saveCursor(ctx, done); serr != nil {
					return errors.Join(err, serr)
				}
				return fmt.Errorf("team: reporting %s %s to the source: %w", r.Story, r.Kind, err)
			}
			done = e.Seq
			if err := f.saveCursor(ctx, done); err != nil {
				return err
			}
			continue
		}
		done = e.Seq
	}
	return f.saveCursor(ctx, done)
}

func (f *Follower) loadCursor(ctx context.Context) error {
	if f.loaded {
		return nil
	}
	rec, err := f.t.db.Get(ctx, kindSourceCursor, f.cfg.Name)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return err
	default:
		n, perr := strconv.ParseUint(string(rec.Data), 10, 64)
		if perr != nil {
			return fmt.Errorf("team: corrupt source cursor %q: %w", rec.Data, perr)
		}
		f.cursor, f.version = n, rec.Version
	}
	f.loaded = true
	return nil
}

func (f *Follower) saveCursor(ctx context.Context, seq uint64) error {
	if seq == f.cursor {
		return nil
	}
	recs, err := f.t.db.Apply(ctx, store.Op{Kind: kindSourceCursor, ID: f.cfg.Name, ExpectVersion: f.version,
		Data: strconv.AppendUint(nil, seq, 10)})
	if err != nil {
		f.loaded = false // another writer: read it again next time
		return err
	}
	f.cursor, f.version = seq, recs[0].Version
	return nil
}

// Run polls the source every Interval (Sync) and reports the team's
// events to it as they are recorded (Flush), until ctx ends; it returns
// ctx's cause. A poll or report that fails is logged and tried again at
// the next interval.
func (f *Follower) Run(ctx context.Context) error {
	tick := f.clk.NewTicker(f.cfg.Interval)
	defer tick.Stop()
	poll := true
	for {
		// The wake-up is taken first: an event recorded during the poll
		// or the flush below is not missed.
		var wake <-chan struct{}
		if f.rep != nil {
			_, wake = f.t.events.since(f.t.events.last())
		}
		if poll {
			if _, err := f.Sync(ctx); err != nil && ctx.Err() == nil {
				f.log.Warn("team: polling the source", "err", err)
			}
		}
		if f.rep != nil {
			if err := f.Flush(ctx); err != nil && ctx.Err() == nil {
				f.log.Warn("team: reporting to the source", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tick.C():
			poll = true
		case <-wake:
			poll = false
		}
	}
}
