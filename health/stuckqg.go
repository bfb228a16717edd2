package health

import (
	"crypto/sha256"
	"sync"
)

// Defaults of StuckQGConfig: 3 identical outputs within the last 10, the
// figures of the stuck quality-gate detector this package is modelled on.
const (
	DefaultStuckIdentical = 3
	DefaultStuckWindow    = 10
)

// StuckQGConfig configures a StuckQG detector; zero values mean defaults.
//
// The rule: an output is stuck when at least Identical of the last Window
// outputs recorded for its subject, this one included, are identical to it.
// Identical outputs in a row are therefore always stuck once there are
// Identical of them; a larger Window also catches a worker that alternates
// between a few failures (x y x y x is stuck with the defaults: three x
// within the last five). Window == Identical is the strictly consecutive
// rule: Identical identical outputs in a row, nothing else.
type StuckQGConfig struct {
	// Identical is how many identical outputs within the window mean stuck.
	// Default: 3 (DefaultStuckIdentical).
	Identical int
	// Window is how many of a subject's most recent outputs are compared
	// and kept, never fewer than Identical. Default: 10 (DefaultStuckWindow).
	Window int
}

// QGVerdict is what StuckQG concludes from one more quality-gate output.
type QGVerdict struct {
	// Stuck: at least Identical of the last Window outputs were this one:
	// the worker keeps making the same mistake, and another retry will not
	// help.
	Stuck bool
	// Repeats is how many of the last Window outputs, this one included,
	// were identical to this one.
	Repeats int
	// Streak is how many outputs in a row, ending with this one, were
	// identical (at most Window).
	Streak int
	// Seen is how many outputs the window holds now.
	Seen int
}

// StuckQG detects a worker that keeps producing the same quality-gate
// output. It keeps a SHA-256 of each of a subject's last Window outputs
// (32 bytes each, about 400 bytes per subject with the defaults) until
// Reset: callers must Reset a subject when its work ends (completed,
// abandoned, escalated) as well as when it starts afresh, or the detector
// keeps every subject it has ever seen. Len tells how many it holds.
// It is safe for concurrent use.
type StuckQG struct {
	identical, window int
	mu                sync.Mutex
	hist              map[string]*qgHistory
}

type qgHistory struct {
	hashes [][sha256.Size]byte // oldest first, at most window
	streak int
}

// NewStuckQG returns a detector.
func NewStuckQG(cfg StuckQGConfig) *StuckQG {
	if cfg.Identical <= 0 {
		cfg.Identical = DefaultStuckIdentical
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultStuckWindow
	}
	cfg.Window = max(cfg.Window, cfg.Identical)
	return &StuckQG{identical: cfg.Identical, window: cfg.Window, hist: make(map[string]*qgHistory)}
}

// Config returns the configuration in effect, defaults filled in.
func (d *StuckQG) Config() StuckQGConfig {
	return StuckQGConfig{Identical: d.identical, Window: d.window}
}

// Record adds one quality-gate output for subject (an item or assignment id,
// as the caller keys its retries) and says whether it is stuck.
func (d *StuckQG) Record(subject string, output []byte) QGVerdict {
	sum := sha256.Sum256(output)
	d.mu.Lock()
	defer d.mu.Unlock()
	h, ok := d.hist[subject]
	if !ok {
		h = &qgHistory{hashes: make([][sha256.Size]byte, 0, d.window)}
		d.hist[subject] = h
	}
	if n := len(h.hashes); n > 0 && h.hashes[n-1] == sum {
		h.streak = min(h.streak+1, d.window)
	} else {
		h.streak = 1
	}
	if len(h.hashes) == d.window {
		// Window is small (10 by default): shifting is cheaper to read
		// than a ring and costs a few hundred bytes of copying.
		copy(h.hashes, h.hashes[1:])
		h.hashes = h.hashes[:d.window-1]
	}
	h.hashes = append(h.hashes, sum)
	repeats := 0
	for _, s := range h.hashes {
		if s == sum {
			repeats++
		}
	}
	return QGVerdict{Stuck: repeats >= d.identical, Repeats: repeats, Streak: h.streak, Seen: len(h.hashes)}
}

// Reset forgets subject's history and frees its memory: call it for a fresh
// attempt with new instructions and when the subject's work ends.
func (d *StuckQG) Reset(subject string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.hist, subject)
}

// Len reports how many subjects have a history (were recorded and not
// Reset since).
func (d *StuckQG) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.hist)
}
