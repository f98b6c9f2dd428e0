package shmport

import (
	"sync"

	"golang.org/x/sys/unix"
)

// In-process wake-ups. When the dialler and the acceptor of a ring pair
// are one process (the embedded rack of `hinic bench rdma`, a switch that
// links two of its own ports), a kick through an eventfd costs a write,
// the netpoller's epoll_wait and the sleeper's read, each a system call,
// and often the wake of another OS thread. Between goroutines of one
// process a channel does the same: the producer's kick readies the
// sleeping goroutine on its own P, with no system call.
//
// The dialler registers its region (by the memfd's device and inode)
// before it passes the descriptors; an acceptor that maps a region
// registered here claims the entry, once, and both sides then kick and
// sleep on the entry's channels instead of the eventfds. The ring memory
// and its checks are unchanged: each side still treats the other's
// indices and descriptors as untrusted. A region that came from another
// process is never registered here, so it always uses the eventfds.
type localWake struct {
	ch      [NumFds]chan struct{} // indexed like the eventfds; FdRegion unused
	claimed bool                  // guarded by localRegions.mu
}

type regionID struct{ dev, ino uint64 }

var localRegions struct {
	mu sync.Mutex
	m  map[regionID]*localWake
}

// regionOf returns the identity of the memfd fd.
func regionOf(fd int) (regionID, bool) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return regionID{}, false
	}
	return regionID{dev: uint64(st.Dev), ino: st.Ino}, true
}

// registerLocal offers the region of memfd fd to an acceptor in this
// process; the caller must call settleLocal once the setup ended.
func registerLocal(fd int) (regionID, *localWake) {
	id, ok := regionOf(fd)
	if !ok {
		return regionID{}, nil
	}
	w := &localWake{}
	for i := FdRegion + 1; i < NumFds; i++ {
		w.ch[i] = make(chan struct{}, 1)
	}
	localRegions.mu.Lock()
	defer localRegions.mu.Unlock()
	if localRegions.m == nil {
		localRegions.m = make(map[regionID]*localWake)
	}
	localRegions.m[id] = w
	return id, w
}

// settleLocal withdraws the dialler's offer and returns w when an
// acceptor in this process claimed it, nil when the peer is elsewhere
// (or the setup failed).
func settleLocal(id regionID, w *localWake) *localWake {
	if w == nil {
		return nil
	}
	localRegions.mu.Lock()
	defer localRegions.mu.Unlock()
	if localRegions.m[id] == w {
		delete(localRegions.m, id)
	}
	if w.claimed {
		return w
	}
	return nil
}

// claimLocal returns the wake-ups a dialler of this process registered
// for the memfd fd, at most once per registration.
func claimLocal(fd int) *localWake {
	id, ok := regionOf(fd)
	if !ok {
		return nil
	}
	localRegions.mu.Lock()
	defer localRegions.mu.Unlock()
	w := localRegions.m[id]
	if w == nil || w.claimed {
		return nil
	}
	w.claimed = true
	delete(localRegions.m, id)
	return w
}

// useLocal switches c's kicks and sleeps to w's channels.
func (c *Conn) useLocal(w *localWake, dialler bool) {
	if dialler {
		c.txDataCh, c.txSpaceCh, c.rxDataCh, c.rxSpaceCh = w.ch[FdUpData], w.ch[FdUpSpace], w.ch[FdDownData], w.ch[FdDownSpace]
	} else {
		c.txDataCh, c.txSpaceCh, c.rxDataCh, c.rxSpaceCh = w.ch[FdDownData], w.ch[FdDownSpace], w.ch[FdUpData], w.ch[FdUpSpace]
	}
}

// Local reports whether c's peer is in this process and kicks go through
// channels rather than eventfds.
func (c *Conn) Local() bool { return c.txDataCh != nil }

// kick wakes the sleeper of ch, or of the eventfd f when c is not local.
func (c *Conn) kick(f interface{ Write([]byte) (int, error) }, ch chan struct{}, one []byte) {
	if ch == nil {
		f.Write(one)
		return
	}
	select {
	case ch <- struct{}{}:
	default: // a kick is pending already
	}
}
