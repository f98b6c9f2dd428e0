// Package rdmatest holds test doubles for package rdma: an in-memory wire
// between devices with seeded fault injection, and Settle, which waits
// until a set of devices and wires has nothing left to do. The fake clock
// tests drive the engine's timers with is clocktest.Fake. It imports only
// the standard library and package rdma.
package rdmatest

import (
	"encoding/binary"
	"math/rand"
	"sync"

	"github.com/PacketFive/hinic/internal/rdma"
)

// Receiver is what a Link delivers frames to; *rdma.Device is one.
type Receiver interface {
	Deliver(frame []byte)
}

// Faults are per-frame probabilities of the impairments a Link injects.
// For each frame at most one applies, tried in this order: drop, duplicate,
// reorder (the frame is held back and delivered after the next one), corrupt
// (one bit flipped after the BTH, where only the ICRC can catch it).
type Faults struct {
	Drop, Duplicate, Reorder, Corrupt float64
}

// LinkStats counts what one direction of a Link did.
type LinkStats struct {
	Frames     uint64 // frames sent into the link
	Delivered  uint64 // deliveries (a duplicate counts twice)
	Dropped    uint64
	Duplicated uint64
	Reordered  uint64
	Corrupted  uint64
}

// Link is an in-memory wire between two ports, A and B: frames sent on A
// are delivered to the receiver connected at B and the reverse.
// Delivery is synchronous (inside Send), which suits rdma.Device because
// Deliver only enqueues (waiting at most its RxWait when the queue is
// full, which is the wire's back-pressure). Faults come from a math/rand source seeded per
// direction, so a run is reproducible given the order of sends. Safe for
// concurrent use.
type Link struct {
	ab, ba direction
}

type direction struct {
	mu      sync.Mutex
	rng     *rand.Rand
	faults  Faults
	to      Receiver
	held    []byte
	hasHeld bool
	scratch []byte
	stats   LinkStats
}

// NewLink returns an unconnected link with the given faults.
func NewLink(seed int64, f Faults) *Link {
	l := &Link{}
	l.ab.rng = rand.New(rand.NewSource(seed))
	l.ba.rng = rand.New(rand.NewSource(seed ^ 0x5DEECE66D))
	l.ab.faults, l.ba.faults = f, f
	return l
}

// A is the port of the device at end A (its frames go to B).
func (l *Link) A() rdma.Port { return &l.ab }

// B is the port of the device at end B.
func (l *Link) B() rdma.Port { return &l.ba }

// Connect attaches the receivers at both ends.
func (l *Link) Connect(a, b Receiver) {
	l.ab.mu.Lock()
	l.ab.to = b
	l.ab.mu.Unlock()
	l.ba.mu.Lock()
	l.ba.to = a
	l.ba.mu.Unlock()
}

// SetFaults changes the impairments of both directions.
func (l *Link) SetFaults(f Faults) {
	for _, d := range []*direction{&l.ab, &l.ba} {
		d.mu.Lock()
		d.faults = f
		d.mu.Unlock()
	}
}

// Flush delivers frames held back for reordering.
func (l *Link) Flush() {
	for _, d := range []*direction{&l.ab, &l.ba} {
		d.mu.Lock()
		d.releaseHeld()
		d.mu.Unlock()
	}
}

// Stats returns the counts of the A-to-B and B-to-A directions.
func (l *Link) Stats() (ab, ba LinkStats) {
	l.ab.mu.Lock()
	ab = l.ab.stats
	l.ab.mu.Unlock()
	l.ba.mu.Lock()
	ba = l.ba.stats
	l.ba.mu.Unlock()
	return ab, ba
}

func (d *direction) deliver(f []byte) {
	if d.to != nil {
		d.stats.Delivered++
		d.to.Deliver(f)
	}
}

func (d *direction) releaseHeld() {
	if d.hasHeld {
		d.hasHeld = false
		d.deliver(d.held)
	}
}

// Send implements rdma.Port.
func (d *direction) Send(frame []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats.Frames++
	f := d.faults
	x := d.rng.Float64()
	switch {
	case x < f.Drop:
		d.stats.Dropped++
		return nil
	case x < f.Drop+f.Duplicate:
		d.stats.Duplicated++
		d.deliver(frame)
		d.deliver(frame)
	case x < f.Drop+f.Duplicate+f.Reorder && !d.hasHeld:
		d.stats.Reordered++
		d.held = append(d.held[:0], frame...)
		d.hasHeld = true
		return nil
	case x < f.Drop+f.Duplicate+f.Reorder+f.Corrupt:
		d.stats.Corrupted++
		d.scratch = append(d.scratch[:0], frame...)
		start := transportStart(frame)
		i := start + d.rng.Intn(len(frame)-start)
		d.scratch[i] ^= 1 << d.rng.Intn(8)
		d.deliver(d.scratch)
	default:
		d.deliver(frame)
	}
	d.releaseHeld()
	return nil
}

// transportStart is the offset just past the BTH of a RoCEv2 frame: every
// bit from there to the end is covered by the ICRC and by nothing else.
// For other frames it is 0.
func transportStart(f []byte) int {
	if len(f) < 14 {
		return 0
	}
	n := 0
	switch binary.BigEndian.Uint16(f[12:]) {
	case 0x0800:
		n = 14 + int(f[14]&0x0F)*4 + 8 + 12
	case 0x86DD:
		n = 14 + 40 + 8 + 12
	}
	if n >= len(f) {
		return 0
	}
	return n
}

// Settle waits until the devices and links are quiescent: no frame queued
// or held anywhere, no engine with work. Timers may be pending; advance a
// clocktest.Fake to fire them. It works by waiting for each engine to go idle
// until a round passes in which no device transmitted anything.
func Settle(devs []*rdma.Device, links ...*Link) {
	sent := func() uint64 {
		var n uint64
		for _, d := range devs {
			n += d.Counters().TxPackets
		}
		return n
	}
	for {
		for _, l := range links {
			l.Flush()
		}
		before := sent()
		for _, d := range devs {
			d.WaitIdle()
		}
		if sent() == before {
			return
		}
	}
}
