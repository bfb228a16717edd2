package health

import (
	"crypto/sha256"
	"sync"
)

// Defaults of StuckQGConfig, from the seeds (004, oro's qg_stuck.go).
const (
	DefaultStuckIdentical = 3
	DefaultStuckWindow    = 10
)

// StuckQGConfig configures a StuckQG detector; zero values mean defaults.
type StuckQGConfig struct {
	// Identical is how many identical outputs in a row mean stuck (default 3).
	Identical int
	// Window is how many recent outputs are kept per subject (default 10,
	// and never fewer than Identical).
	Window int
}

// QGVerdict is what StuckQG concludes from one more quality-gate output.
type QGVerdict struct {
	// Stuck: the last Identical outputs were the same: the worker is
	// repeating the same mistake, and another retry will not help.
	Stuck bool
	// Streak is how many outputs in a row, ending with this one, were identical.
	Streak int
	// Seen is how many outputs the window holds now.
	Seen int
}

// StuckQG detects a worker that keeps producing the same quality-gate
// output. It keeps a SHA-256 per output, the last Window per subject.
// It is safe for concurrent use.
type StuckQG struct {
	identical, window int
	mu                sync.Mutex
	hist              map[string]*qgHistory
}

type qgHistory struct {
	hashes [][sha256.Size]byte // ring, oldest first once full
	next   int
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
		h = &qgHistory{}
		d.hist[subject] = h
	}
	if n := len(h.hashes); n > 0 && h.last(d.window) == sum {
		h.streak++
	} else {
		h.streak = 1
	}
	if len(h.hashes) < d.window {
		h.hashes = append(h.hashes, sum)
	} else {
		h.hashes[h.next] = sum
		h.next = (h.next + 1) % d.window
	}
	streak := min(h.streak, d.window)
	return QGVerdict{Stuck: streak >= d.identical, Streak: streak, Seen: len(h.hashes)}
}

// Reset forgets subject's history, for a fresh attempt with new instructions.
func (d *StuckQG) Reset(subject string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.hist, subject)
}

func (h *qgHistory) last(window int) [sha256.Size]byte {
	if len(h.hashes) < window {
		return h.hashes[len(h.hashes)-1]
	}
	return h.hashes[(h.next+window-1)%window]
}
