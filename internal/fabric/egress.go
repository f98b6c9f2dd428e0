package fabric

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/PacketFive/hinic/internal/proto"
)

// ctrlQueueFrames bounds the queue of frames the switch itself sends on
// a port (PFC). A full one drops the newest: a later XOFF or XON refresh
// repairs the state.
const ctrlQueueFrames = 64

// enqResult is what became of a frame handed to an egress port.
type enqResult uint8

const (
	enqOK       enqResult = iota
	enqMarked             // queued, CE-marked
	enqFull               // lossy class, queue full: tail drop
	enqLinkDown           // the port is down or the switch is stopping
	enqAborted            // a lossless wait was cut short by the ingress session ending
)

// egress is a port's transmit side: one bounded queue per traffic class,
// a queue for the switch's own control frames, the scheduler (strict
// priority, then ETS by deficit round robin), the PFC pause state the
// peer asked for, and the ECN marker.
//
// mu guards everything below it. Any rx goroutine enqueues; only the
// port's tx goroutine dequeues.
type egress struct {
	mu    sync.Mutex
	space sync.Cond // signalled when frames leave, the port goes down or the switch stops

	up       bool
	stopping bool
	waiters  int // rx goroutines waiting for space (lossless)

	ctrl      ring
	q         [NumTC]ring
	byteLimit int64

	// scheduler
	strict  *[NumTC]bool
	quantum [NumTC]int64
	deficit [NumTC]int64
	rr      int  // the ETS class being visited
	visited bool // rr has had its quantum on this visit

	// PFC pause state, per traffic class.
	paused      uint8 // bit tc: a pause is in force
	pausedUntil [NumTC]time.Time

	// ECN marking.
	ecnOn      bool
	kmin, kmax int64
	pmax       float64
	rng        *rand.Rand

	// notify wakes the tx goroutine; capacity 1, sends never block.
	notify chan struct{}

	// Cut-through. cut, while the port has a session that can take a
	// frame without waiting, writes one frame to the peer and reports
	// whether it did (set and cleared by the tx goroutine). busy says
	// the port's writer is in use: by the tx goroutine from a dequeue
	// until txDone, or by an rx goroutine cutting a frame through. The
	// writer has one user at a time, and a frame is cut through only
	// when nothing is queued, so the order of every queue is kept.
	cut  func(f *frame) bool
	busy bool
}

func (e *egress) init(s *switchSettings, portNum int, bufSize int) {
	e.space.L = &e.mu
	e.ctrl = newRing(ctrlQueueFrames)
	for tc := range e.q {
		e.q[tc] = newRing(s.queues.Frames)
		// One visit must be able to send the largest frame, so that the
		// scheduler never loops without sending.
		e.quantum[tc] = int64(s.weights[tc]) * int64(bufSize)
	}
	e.byteLimit = int64(s.queues.Bytes)
	e.strict = &s.strict
	e.ecnOn = !s.ecn.Disabled
	e.kmin, e.kmax, e.pmax = int64(s.ecn.KMin), int64(s.ecn.KMax), s.ecn.PMax
	e.rng = rand.New(rand.NewPCG(s.ecn.Seed, uint64(portNum)))
	e.notify = make(chan struct{}, 1)
}

// kick wakes the tx goroutine.
func (e *egress) kick() {
	select {
	case e.notify <- struct{}{}:
	default:
	}
}

// enqueue queues f (taking ownership unless the result is a drop). A
// lossless frame waits for space instead of being dropped; in, when not
// nil, is the ingress port: before it waits it is told to pause its
// peer, and the wait ends when its session ends.
func (e *egress) enqueue(f *frame, in *port, now time.Time) enqResult {
	e.mu.Lock()
	q := &e.q[f.tc]
	size := int64(len(f.buf))
	told := false
	for {
		if !e.up || e.stopping {
			e.mu.Unlock()
			return enqLinkDown
		}
		if q.n == 0 || (!q.full() && q.bytes+size <= e.byteLimit) {
			break
		}
		if !f.lossless {
			e.mu.Unlock()
			return enqFull
		}
		if in != nil && in.abort.Load() {
			e.mu.Unlock()
			return enqAborted
		}
		if in != nil && !told {
			// The ingress port must wait: it is congested whatever its
			// own share of the buffer, so its peer is paused now. The
			// lock is dropped because pausing takes the ingress port's.
			told = true
			e.mu.Unlock()
			in.blocked(f.tc, now)
			e.mu.Lock()
			continue
		}
		e.waiters++
		e.space.Wait()
		e.waiters--
	}
	res := enqOK
	if f.ipOff != 0 && e.ecnOn && e.shouldMark(q.bytes) {
		if f.ipv6 {
			proto.IPv6(f.buf[f.ipOff:]).SetECN(proto.ECNCE)
		} else {
			proto.IPv4(f.buf[f.ipOff:]).SetECN(proto.ECNCE)
		}
		res = enqMarked
	}
	if in != nil && in.lone && e.cut != nil && !e.busy && e.empty() && e.paused&(1<<f.tc) == 0 {
		// A lone frame, nothing waits and the writer is free: the rx
		// goroutine sends the frame itself, sparing the tx goroutine's
		// wake-up. A frame the peer cannot take now is queued as usual.
		cut := e.cut
		e.busy = true
		e.mu.Unlock()
		sent := cut(f)
		e.mu.Lock()
		e.busy = false
		if sent {
			if !e.empty() {
				e.mu.Unlock()
				e.kick() // what was queued meanwhile waited for the writer
				return res
			}
			e.mu.Unlock()
			return res
		}
	}
	q.push(f)
	e.mu.Unlock()
	e.kick()
	return res
}

// empty reports whether no frame is queued; mu is held.
func (e *egress) empty() bool {
	if e.ctrl.n > 0 {
		return false
	}
	for tc := range e.q {
		if e.q[tc].n > 0 {
			return false
		}
	}
	return true
}

// setCut installs (or, with nil, removes) the cut-through writer of the
// port's session (tx goroutine).
func (e *egress) setCut(cut func(f *frame) bool) {
	e.mu.Lock()
	e.cut = cut
	e.mu.Unlock()
}

// txDone frees the writer after the tx goroutine wrote what it dequeued.
func (e *egress) txDone() {
	e.mu.Lock()
	e.busy = false
	e.mu.Unlock()
}

// shouldMark applies the RED-like marking curve to a queue holding depth
// bytes. Called with mu held (the RNG is guarded by it).
func (e *egress) shouldMark(depth int64) bool {
	switch {
	case depth < e.kmin:
		return false
	case depth >= e.kmax:
		return true
	}
	p := e.pmax * float64(depth-e.kmin) / float64(e.kmax-e.kmin)
	return e.rng.Float64() < p
}

// enqueueCtrl queues a frame the switch made; it is sent before any
// data and regardless of pauses. It reports false (and does not take
// ownership) when the port is down or the control queue is full.
func (e *egress) enqueueCtrl(f *frame) bool {
	e.mu.Lock()
	if !e.up || e.stopping || e.ctrl.full() {
		e.mu.Unlock()
		return false
	}
	e.ctrl.push(f)
	e.mu.Unlock()
	e.kick()
	return true
}

// dequeue fills out with frames to send, in scheduler order, and
// returns how many. When frames wait only because of pauses, wake is
// the time the earliest pause ends (zero otherwise).
func (e *egress) dequeue(out []*frame, now time.Time) (n int, wake time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.dequeueLocked(out, now)
}

// take is the tx goroutine's dequeue: the frames it returns hold the
// port's writer (busy) until txDone. While a frame is being cut
// through it returns none; that frame's sender kicks when it is done if
// anything is queued.
func (e *egress) take(out []*frame, now time.Time) (n int, wake time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.busy {
		return 0, time.Time{}
	}
	n, wake = e.dequeueLocked(out, now)
	e.busy = n > 0
	return n, wake
}

func (e *egress) dequeueLocked(out []*frame, now time.Time) (n int, wake time.Time) {
	for n < len(out) && e.ctrl.n > 0 {
		out[n] = e.ctrl.pop()
		n++
	}
	if e.paused != 0 {
		for tc := range NumTC {
			if e.paused&(1<<tc) != 0 && !now.Before(e.pausedUntil[tc]) {
				e.paused &^= 1 << tc
			}
		}
	}
	for n < len(out) {
		tc := e.pick()
		if tc < 0 {
			break
		}
		out[n] = e.q[tc].pop()
		n++
	}
	if e.paused != 0 {
		for tc := range NumTC {
			if e.paused&(1<<tc) != 0 && e.q[tc].n > 0 && (wake.IsZero() || e.pausedUntil[tc].Before(wake)) {
				wake = e.pausedUntil[tc]
			}
		}
	}
	if n > 0 && e.waiters > 0 {
		e.space.Broadcast()
	}
	return n, wake
}

func (e *egress) avail(tc int) bool { return e.q[tc].n > 0 && e.paused&(1<<tc) == 0 }

// pick chooses the class to send from next, or -1. Strict classes go
// first, highest first (IEEE 802.1Q 8.6.8.1); the ETS classes share the
// rest by deficit round robin weighted by bytes (802.1Qaz ETS).
func (e *egress) pick() int {
	anyETS := false
	for tc := NumTC - 1; tc >= 0; tc-- {
		if !e.avail(tc) {
			continue
		}
		if e.strict[tc] {
			return tc
		}
		anyETS = true
	}
	if !anyETS {
		return -1
	}
	// Every quantum covers the largest frame, so a fresh visit of an
	// available class always sends: the loop ends within one round.
	for range 2*NumTC + 1 {
		tc := e.rr
		if !e.strict[tc] && e.avail(tc) {
			if !e.visited {
				e.deficit[tc] += e.quantum[tc]
				e.visited = true
			}
			size := int64(len(e.q[tc].peek().buf))
			if e.deficit[tc] >= size {
				e.deficit[tc] -= size
				if e.q[tc].n == 1 {
					// The queue empties: it keeps no credit (DRR).
					e.deficit[tc] = 0
					e.rr, e.visited = (tc+1)%NumTC, false
				}
				return tc
			}
		} else if e.q[tc].n == 0 {
			e.deficit[tc] = 0
		}
		e.rr, e.visited = (tc+1)%NumTC, false
	}
	return -1
}

// pause applies a PFC or PAUSE request from the peer to the classes in
// mask: d > 0 pauses them for d, d == 0 resumes them (XON).
func (e *egress) pause(mask uint8, d time.Duration, now time.Time) {
	e.mu.Lock()
	for tc := range NumTC {
		if mask&(1<<tc) == 0 {
			continue
		}
		if d <= 0 {
			e.paused &^= 1 << tc
			continue
		}
		until := now.Add(d)
		if e.paused&(1<<tc) == 0 || until.After(e.pausedUntil[tc]) {
			e.pausedUntil[tc] = until
		}
		e.paused |= 1 << tc
	}
	e.mu.Unlock()
	e.kick()
}

// setUp marks the port up (frames are accepted) or down. Going down
// returns every queued frame through drop and clears the pause state.
func (e *egress) setUp(up bool, drop func(*frame, bool)) {
	e.mu.Lock()
	e.up = up
	var dropped []*frame
	if !up {
		for e.ctrl.n > 0 {
			dropped = append(dropped, e.ctrl.pop())
		}
		for tc := range e.q {
			for e.q[tc].n > 0 {
				dropped = append(dropped, e.q[tc].pop())
			}
			e.deficit[tc] = 0
		}
		e.paused = 0
		e.space.Broadcast()
	}
	e.mu.Unlock()
	for _, f := range dropped {
		drop(f, f.in >= 0)
	}
}

// stop ends every lossless wait for good (switch shutdown).
func (e *egress) stop() {
	e.mu.Lock()
	e.stopping = true
	e.space.Broadcast()
	e.mu.Unlock()
	e.kick()
}

// wake re-checks the abort condition of waiting rx goroutines.
func (e *egress) wake() {
	e.mu.Lock()
	if e.waiters > 0 {
		e.space.Broadcast()
	}
	e.mu.Unlock()
}

// depth returns the frames and bytes queued per class.
func (e *egress) depth() (frames [NumTC]int, bytes [NumTC]int64, paused uint8) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for tc := range e.q {
		frames[tc], bytes[tc] = e.q[tc].n, e.q[tc].bytes
	}
	return frames, bytes, e.paused
}
