package agentcmd

// An accessWatch keeps, while the agent runs, an inotify watch on the
// places that are the agent's decoys (decoy.go) and on its private copy of
// the repository's git directory (gitshadow.go): once the agent is gone,
// the driver compares what is left there with what was there, which misses
// what the agent made and removed again, or put back as it was, before it
// exited, and a listing of an empty decoy. The watch's queue has them:
// what was made, written or renamed in each watched directory, and whether
// the directory itself was opened (listed). It is read once, after the
// agent; a queue that overflowed says so. Where inotify is not to be had
// (another system, the user's instances used up) there is no watch, and
// the comparison alone is what the driver reports.

// placeAccess is what the watch saw in one place.
type placeAccess struct {
	// touched are the paths, relative to the place, that were made,
	// written or renamed into; opened those opened: a watched directory
	// (listed; "." is the place's own) or a file in one.
	touched, opened map[string]bool
}

// accessWatches are what the watch saw, by place: a decoy's index in
// sandboxRun.decoys, or shadowPlace.
type accessWatches struct {
	places map[int]*placeAccess
	// overflow: the queue overflowed, so not everything is in places.
	overflow bool
}

// shadowPlace is the place key of the private copy of the git directory.
const shadowPlace = -1

// mapsKeys is the keys of m (nil for a nil m).
func mapsKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// at is place i's, made if need be.
func (a *accessWatches) at(i int) *placeAccess {
	p := a.places[i]
	if p == nil {
		p = &placeAccess{touched: map[string]bool{}, opened: map[string]bool{}}
		a.places[i] = p
	}
	return p
}

func (a *accessWatches) place(i int) *placeAccess {
	if a == nil {
		return &placeAccess{}
	}
	p := a.places[i]
	if p == nil {
		return &placeAccess{}
	}
	return p
}
