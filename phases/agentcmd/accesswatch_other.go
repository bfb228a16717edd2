//go:build !linux

package agentcmd

// accessWatch is no watch where inotify is not to be had: the driver
// reports what it finds once the agent is gone.
type accessWatch struct{}

func newAccessWatch(opens bool) *accessWatch { return nil }

func (w *accessWatch) add(place int, root, rel string) {}

func (w *accessWatch) collect(ignore func(place int, rel string) bool) *accessWatches { return nil }
