//go:build linux

package agentcmd

import (
	"errors"
	"maps"
	"os"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// An openWatch says who opened what in the decoys: a fanotify group whose
// permission events hold the opener until the driver has looked at it, so
// the opener's PID namespace can be read while it is still alive. An open
// from another PID namespace than the driver's is the agent's (the decoys
// are under the lease directory, hidden from every agent but the one each
// is bound for); an open from the driver's namespace is the host's own (a
// walk of the state directory, a backup, the driver itself) and is not
// counted. inotify alone cannot tell these apart, so without an openWatch
// nothing opened (a listing, a canary read) is counted at all.
//
// fanotify needs CAP_SYS_ADMIN: a driver running as an ordinary user has
// no openWatch (newOpenWatch returns nil); its writes are still seen.
type openWatch struct {
	fd int
	// wake's read end ends the reader once a byte is written to its
	// write end.
	wake   [2]int
	hostNS string
	done   chan struct{}

	mu sync.Mutex
	// known are the watched directories and the files in them when they
	// were watched (the canaries), by device and inode: a name can be
	// renamed, an inode is what the agent opened.
	known  map[fileKey]watchedDir
	opened map[int]map[string]bool
}

type fileKey struct{ dev, ino uint64 }

// eventMetadataSize is the size of a fanotify event's fixed part.
const eventMetadataSize = int(unsafe.Sizeof(unix.FanotifyEventMetadata{}))

// openMask is what the group asks to hold: a watched directory opened,
// and a file (or directory) in one.
const openMask = unix.FAN_OPEN_PERM | unix.FAN_ONDIR | unix.FAN_EVENT_ON_CHILD

// newOpenWatch makes a fanotify group and starts its reader; nil where
// the driver may not (no CAP_SYS_ADMIN, another kernel).
func newOpenWatch() *openWatch {
	hostNS, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return nil
	}
	fd, err := unix.FanotifyInit(unix.FAN_CLASS_CONTENT|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK,
		unix.O_RDONLY|unix.O_CLOEXEC|unix.O_LARGEFILE)
	if err != nil {
		return nil
	}
	o := &openWatch{fd: fd, hostNS: hostNS, done: make(chan struct{}),
		known: map[fileKey]watchedDir{}, opened: map[int]map[string]bool{}}
	if err := unix.Pipe2(o.wake[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		_ = unix.Close(fd)
		return nil
	}
	go o.read()
	return o
}

// add watches directory root/rel of place: its opens, and those of the
// files in it now.
func (o *openWatch) add(place int, root, rel string) {
	if o == nil {
		return
	}
	dir := root + "/" + rel
	// Looked at before the mark: an open of a marked directory waits for
	// the reader, which waits for mu.
	k, ok := keyOf(dir)
	if !ok {
		return
	}
	known := map[fileKey]watchedDir{k: {place: place, rel: rel}}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Type().IsRegular() {
			if k, ok := keyOf(dir + "/" + e.Name()); ok {
				known[k] = watchedDir{place: place, rel: joinRel(rel, e.Name())}
			}
		}
	}
	o.mu.Lock()
	maps.Copy(o.known, known)
	o.mu.Unlock()
	_ = unix.FanotifyMark(o.fd, unix.FAN_MARK_ADD|unix.FAN_MARK_DONT_FOLLOW|unix.FAN_MARK_ONLYDIR,
		openMask, unix.AT_FDCWD, dir)
}

// stop ends the watch and returns what the agent opened, by place. The
// marks go first, so nothing opened from then on waits for the reader.
func (o *openWatch) stop() map[int]map[string]bool {
	if o == nil {
		return nil
	}
	_ = unix.FanotifyMark(o.fd, unix.FAN_MARK_FLUSH, 0, unix.AT_FDCWD, "/")
	_, _ = unix.Write(o.wake[1], []byte{0})
	<-o.done
	// Closing a fanotify group, like an inotify instance, waits for the
	// kernel's grace period: not waited for.
	go func(fds ...int) {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
	}(o.fd, o.wake[0], o.wake[1])
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.opened
}

// read answers every event, allowing it, until stop: an open waits for
// the answer, so the reader never stops before the marks are gone.
func (o *openWatch) read() {
	defer close(o.done)
	buf := make([]byte, 16<<10)
	for {
		fds := []unix.PollFd{{Fd: int32(o.fd), Events: unix.POLLIN}, {Fd: int32(o.wake[0]), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil && !errors.Is(err, unix.EINTR) {
			// No reader from now on: no open may wait for one.
			_ = unix.FanotifyMark(o.fd, unix.FAN_MARK_FLUSH, 0, unix.AT_FDCWD, "/")
			o.drain(buf)
			return
		}
		o.drain(buf)
		if fds[1].Revents != 0 {
			return
		}
	}
}

// drain handles what the group has queued.
func (o *openWatch) drain(buf []byte) {
	for {
		n, err := unix.Read(o.fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n <= 0 {
			return
		}
		for off := 0; off+eventMetadataSize <= n; {
			ev := (*unix.FanotifyEventMetadata)(unsafe.Pointer(&buf[off]))
			if int(ev.Event_len) < eventMetadataSize {
				return
			}
			off += int(ev.Event_len)
			if ev.Fd < 0 {
				continue
			}
			o.note(int(ev.Fd), int(ev.Pid))
			if ev.Mask&unix.FAN_OPEN_PERM != 0 {
				resp := unix.FanotifyResponse{Fd: ev.Fd, Response: unix.FAN_ALLOW}
				_, _ = unix.Write(o.fd, (*[unsafe.Sizeof(resp)]byte)(unsafe.Pointer(&resp))[:])
			}
			_ = unix.Close(int(ev.Fd))
		}
	}
}

// note records what event file fd is, when the agent opened it.
func (o *openWatch) note(fd, pid int) {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return
	}
	o.mu.Lock()
	w, ok := o.known[fileKey{uint64(st.Dev), st.Ino}]
	o.mu.Unlock()
	if !ok {
		return
	}
	// The opener waits for the answer, so it is there to be looked at.
	ns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	if err != nil || ns == o.hostNS {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.opened[w.place] == nil {
		o.opened[w.place] = map[string]bool{}
	}
	o.opened[w.place][w.rel] = true
}

// keyOf is the device and inode of path, not following a link.
func keyOf(path string) (fileKey, bool) {
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil {
		return fileKey{}, false
	}
	return fileKey{uint64(st.Dev), st.Ino}, true
}

// joinRel is name in directory rel of a place ("." its root).
func joinRel(rel, name string) string {
	if rel == "." || rel == "" {
		return name
	}
	return rel + "/" + name
}
