package fabric

import "sync"

// frame is one frame in flight through a switch, with what the ingress
// pipeline learnt about it. Exactly one goroutine owns a frame at a time
// (see the package comment); handing it on hands on ownership.
type frame struct {
	buf []byte // the frame; cap(buf) is the pool's buffer size
	// in is the index of the ingress port whose buffer accounting the
	// frame is charged to, or -1 for a frame the switch made (PFC).
	in       int16
	tc       uint8
	lossless bool
	// ipOff is the offset of the IPv4 or IPv6 header of an ECN-capable
	// frame (ECT(0) or ECT(1)), or 0 when the frame cannot be CE-marked.
	ipOff uint16
	ipv6  bool
	// captured is set once the egress port's capture holds the frame
	// (port.capture), so that a frame that failed to cut through is not
	// captured again from the queue.
	captured bool
}

// framePool hands out frames with buffers of one size. It is safe for
// concurrent use.
type framePool struct {
	size int
	p    sync.Pool
}

func newFramePool(size int) *framePool {
	fp := &framePool{size: size}
	fp.p.New = func() any { return &frame{buf: make([]byte, size)} }
	return fp
}

// get returns a frame whose buf has the pool's full size.
func (fp *framePool) get() *frame {
	f := fp.p.Get().(*frame)
	f.buf = f.buf[:fp.size]
	f.in, f.tc, f.lossless, f.ipOff, f.ipv6, f.captured = -1, 0, false, 0, false, false
	return f
}

func (fp *framePool) put(f *frame) {
	if f != nil {
		fp.p.Put(f)
	}
}

// clone returns a copy of f (meta data and bytes) from the pool.
func (fp *framePool) clone(f *frame) *frame {
	c := fp.get()
	c.buf = c.buf[:copy(c.buf, f.buf)]
	c.in, c.tc, c.lossless, c.ipOff, c.ipv6 = f.in, f.tc, f.lossless, f.ipOff, f.ipv6
	return c
}

// ring is a bounded FIFO of frames. It is not safe for concurrent use;
// the egress lock guards it.
type ring struct {
	buf        []*frame
	head, n    int
	bytes      int64
	frameLimit int
}

func newRing(capacity int) ring { return ring{buf: make([]*frame, capacity), frameLimit: capacity} }

func (r *ring) len() int   { return r.n }
func (r *ring) full() bool { return r.n == len(r.buf) }

func (r *ring) push(f *frame) {
	r.buf[(r.head+r.n)%len(r.buf)] = f
	r.n++
	r.bytes += int64(len(f.buf))
}

func (r *ring) peek() *frame { return r.buf[r.head] }

func (r *ring) pop() *frame {
	f := r.buf[r.head]
	r.buf[r.head] = nil
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	r.bytes -= int64(len(f.buf))
	return f
}
