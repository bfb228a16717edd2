//go:build linux

package agentcmd

import (
	"errors"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// accessWatch is the inotify instance of one execution.
type accessWatch struct {
	fd   int
	dirs map[int32]watchedDir
	// opens says who opened what in the decoys; nil without fanotify,
	// and then the files opened are inotify's (not told apart from the
	// host's own opens) and no directory opened is counted.
	opens *openWatch
}

// watchedDir is a watched directory: its place, and its path relative to
// the place's root.
type watchedDir struct {
	place int
	rel   string
}

// accessMask is what the watch records: made, written, renamed into,
// removed; and opened. Not a change of attributes alone: a mode the
// agent leaves changed is in the comparison after it, one it put back
// changed nothing, and the kernel also says so of a link count or a time
// that changed for no act of the agent's (a loaded run of the kill -9
// chaos test saw a sample hook of the copy of the git directory reported
// "put back" by a cooperative agent that never wrote there; an
// attribute-only event is the likeliest cause, not proven).
const accessMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_MOVED_TO | unix.IN_CLOSE_WRITE |
	unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_OPEN | unix.IN_EXCL_UNLINK

// newAccessWatch makes an inotify instance, and with opens an openWatch
// where one is to be had; nil where no inotify instance is.
func newAccessWatch(opens bool) *accessWatch {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil
	}
	w := &accessWatch{fd: fd, dirs: map[int32]watchedDir{}}
	if opens {
		w.opens = newOpenWatch()
	}
	return w
}

// add watches directory root/rel as part of place.
func (w *accessWatch) add(place int, root, rel string) {
	if w == nil {
		return
	}
	mask := uint32(accessMask)
	if w.opens != nil {
		// Opens are the open watch's: the host's own walks of the state
		// directory then fill no queue here.
		mask &^= unix.IN_OPEN
	}
	wd, err := unix.InotifyAddWatch(w.fd, filepath.Join(root, rel), mask|unix.IN_ONLYDIR|unix.IN_DONT_FOLLOW)
	if err == nil {
		w.dirs[int32(wd)] = watchedDir{place: place, rel: rel}
	}
	if place != shadowPlace {
		w.opens.add(place, root, rel) // git reads its copy all the time: not counted
	}
}

// collect reads what the watch queued and ends it. ignore(place, rel)
// says which paths are not the agent's (the mount points bwrap made).
func (w *accessWatch) collect(ignore func(place int, rel string) bool) *accessWatches {
	if w == nil {
		return nil
	}
	// Closing an inotify instance waits for the kernel's grace period
	// (6-19 ms measured here): the close is not waited for.
	defer func() { go func(fd int) { _ = unix.Close(fd) }(w.fd) }()
	a := &accessWatches{places: map[int]*placeAccess{}}
	opened := w.opens.stop()
	for place, rels := range opened {
		a.at(place).opened = rels
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(w.fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n <= 0 {
			return a
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameBytes := buf[off+unix.SizeofInotifyEvent : min(n, off+unix.SizeofInotifyEvent+int(ev.Len))]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				a.overflow = true
				continue
			}
			dir, ok := w.dirs[ev.Wd]
			if !ok {
				continue
			}
			name := cString(nameBytes)
			p := a.at(dir.place)
			switch {
			case ev.Mask&unix.IN_OPEN != 0:
				// What was opened is the openWatch's, which tells the
				// agent's opens from the host's. Without one nothing
				// opened is counted: CI saw every canary directory of
				// every decoy opened while cooperative agents ran, and a
				// new user's trial a host's grep of the state directory
				// read every canary file, by the host.
			case name == "" || ev.Mask&(unix.IN_OPEN|unix.IN_DELETE|unix.IN_MOVED_FROM) != 0:
				// The directory's own events, a subdirectory opened, a
				// removal: what is left, or was made first, is what counts.
			default:
				rel := filepath.Join(dir.rel, name)
				if !ignore(dir.place, rel) {
					p.touched[rel] = true
				}
			}
		}
	}
}

// cString is b up to its first NUL.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
