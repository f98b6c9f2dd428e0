package shmport

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"
)

// ring is a view of one ring of a mapped region. The words are shared
// with the peer; only the side's own private index is trusted.
type ring struct {
	head     *atomic.Uint32
	tail     *atomic.Uint32
	consWait *atomic.Uint32
	prodWait *atomic.Uint32
	desc     []byte // Entries descriptors
	bufs     []byte // Entries buffers of BufSize
	entries  uint32
	mask     uint32
	bufSize  uint32
}

// newRing returns the view of the ring at mem, which holds at least
// g.ringSize() bytes and is 64-byte aligned.
func newRing(mem []byte, g Geometry) ring {
	word := func(off int) *atomic.Uint32 { return (*atomic.Uint32)(unsafe.Pointer(&mem[off])) }
	bo := g.bufOff()
	return ring{
		head: word(ringHeadOff), tail: word(ringTailOff),
		consWait: word(ringConsWaitOff), prodWait: word(ringProdWaitOff),
		desc:    mem[ringDescOff : ringDescOff+int(g.Entries)*descSize],
		bufs:    mem[bo : bo+uint64(g.Entries)*uint64(g.BufSize)],
		entries: g.Entries, mask: g.Entries - 1, bufSize: g.BufSize,
	}
}

// producer is the sending side of a ring; owned by one goroutine.
type producer struct {
	r    ring
	head uint32 // private: the next slot to fill
	pub  uint32 // private: the head last published
	free uint32 // slots known free at the last look at the tail
}

// space returns how many slots are free, reading the peer's tail; a
// tail that is ahead of head or more than a ring behind is corrupt.
func (p *producer) space() (uint32, error) {
	used := p.head - p.r.tail.Load()
	raceAcquire()
	if used > p.r.entries {
		return 0, ErrCorrupt
	}
	p.free = p.r.entries - used
	return p.free, nil
}

// put copies frame into the next slot and describes it; the frame is
// not visible to the peer before publish. The caller has made sure a
// slot is free and the frame fits.
func (p *producer) put(frame []byte) {
	slot := p.head & p.r.mask
	off := slot * p.r.bufSize
	copy(p.r.bufs[off:off+p.r.bufSize], frame)
	d := p.r.desc[slot*descSize : slot*descSize+descSize]
	binary.LittleEndian.PutUint32(d[0:], off)
	binary.LittleEndian.PutUint32(d[4:], uint32(len(frame)))
	p.head++
	p.free--
}

// publish makes the frames put so far visible to the consumer.
func (p *producer) publish() {
	raceRelease()
	p.pub = p.head
	p.r.head.Store(p.head)
}

// pending reports whether frames were put and not yet published.
func (p *producer) pending() bool { return p.head != p.pub }

// consumer is the receiving side of a ring; owned by one goroutine.
type consumer struct {
	r    ring
	tail uint32 // private: the next slot to read
}

// avail returns how many frames wait, reading the peer's head.
func (c *consumer) avail() (uint32, error) {
	n := c.r.head.Load() - c.tail
	raceAcquire()
	if n > c.r.entries {
		return 0, ErrCorrupt
	}
	return n, nil
}

// frame returns the i-th waiting frame, in place, or nil when its
// descriptor points outside the buffer area or is empty. The descriptor
// is read once.
func (c *consumer) frame(i uint32) []byte {
	slot := (c.tail + i) & c.r.mask
	d := c.r.desc[slot*descSize : slot*descSize+descSize]
	off := uint64(binary.LittleEndian.Uint32(d[0:]))
	n := uint64(binary.LittleEndian.Uint32(d[4:]))
	if n == 0 || n > uint64(c.r.bufSize) || off+n > uint64(len(c.r.bufs)) {
		return nil
	}
	return c.r.bufs[off : off+n : off+n]
}

// collect appends the next n waiting frames that are well described to
// batch and counts the others.
func (c *consumer) collect(n uint32, batch [][]byte) ([][]byte, int) {
	bad := 0
	for i := range n {
		f := c.frame(i)
		if f == nil {
			bad++
			continue
		}
		batch = append(batch, f)
	}
	return batch, bad
}

// release gives n slots back to the producer.
func (c *consumer) release(n uint32) {
	c.tail += n
	raceRelease()
	c.r.tail.Store(c.tail)
}
