package perf

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// copyCeilingRegion is the size of the memory the copy ceiling reads
// and writes: the buffer of a 64 KiB bandwidth test (slots of 64 KiB).
const copyCeilingRegion = slots * 64 << 10

// copyRing is a single-producer single-consumer ring of frame slots for
// the copy ceiling; crc carries each frame's CRC-32 with it.
type copyRing struct {
	head   atomic.Uint32
	_      [60]byte
	tail   atomic.Uint32
	_      [60]byte
	bufs   []byte
	crc    []uint32
	n      uint32
	stride int
}

func newCopyRing(entries, stride int) *copyRing {
	return &copyRing{bufs: make([]byte, entries*stride), crc: make([]uint32, entries), n: uint32(entries), stride: stride}
}

func (r *copyRing) slot(i uint32) []byte {
	o := int(i%r.n) * r.stride
	return r.bufs[o : o+RawFrameSize]
}

// spin waits, yielding, until ready reports true or stop is set; it
// reports whether ready did.
func spin(stop *atomic.Bool, ready func() bool) bool {
	for !ready() {
		if stop.Load() {
			return false
		}
		runtime.Gosched()
	}
	return true
}

// CopyCeiling measures what the machine's memory and cores allow for the
// two-hop path at best: total bytes of RawFrameSize frames, each copied
// three times and checksummed twice by three goroutines, as the fewest
// copies an engine, a switch and an engine can make (from the sender's
// memory into a ring slot with a CRC-32, from that ring to the next ring,
// checked and copied from the slot into the receiver's memory). Rings of
// entries slots of stride bytes stand for the ports' rings. There is no
// protocol, no header, no ACK and no wake-up: the goroutines poll. Every
// frame's CRC is checked on arrival and the receiver's memory is compared
// with the sender's at the end, so nothing can be skipped.
func CopyCeiling(ctx context.Context, total, entries, stride int) (RawResult, error) {
	return copyCeiling(ctx, total, entries, stride, nil)
}

// copyCeiling is CopyCeiling; mangle, when set, is called on every frame
// the switch stage has copied (tests use it to corrupt one).
func copyCeiling(ctx context.Context, total, entries, stride int, mangle func(i uint32, frame []byte)) (RawResult, error) {
	if entries < 1 || stride < RawFrameSize {
		return RawResult{}, fmt.Errorf("copy ceiling: %d slots of %d B: want at least one slot of %d B", entries, stride, RawFrameSize)
	}
	frames := max(1, total/RawFrameSize)
	src, dst := make([]byte, copyCeilingRegion), make([]byte, copyCeilingRegion)
	per := copyCeilingRegion / RawFrameSize
	for i := range per {
		fillPattern(src[i*RawFrameSize:(i+1)*RawFrameSize], uint64(i))
	}
	r1, r2 := newCopyRing(entries, stride), newCopyRing(entries, stride)
	n := uint32(frames)
	var stop atomic.Bool
	var bad atomic.Int64
	bad.Store(-1)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // the switch: ring to ring
		defer wg.Done()
		for i := range n {
			if !spin(&stop, func() bool { return r1.head.Load() != i }) ||
				!spin(&stop, func() bool { return i-r2.tail.Load() < r2.n }) {
				return
			}
			copy(r2.slot(i), r1.slot(i))
			if mangle != nil {
				mangle(i, r2.slot(i))
			}
			r2.crc[i%r2.n] = r1.crc[i%r1.n]
			r1.tail.Store(i + 1)
			r2.head.Store(i + 1)
		}
	}()
	go func() { // the receiving engine: check, then into memory
		defer wg.Done()
		for i := range n {
			if !spin(&stop, func() bool { return r2.head.Load() != i }) {
				return
			}
			s := r2.slot(i)
			if crc32.ChecksumIEEE(s) != r2.crc[i%r2.n] {
				bad.Store(int64(i))
				stop.Store(true)
				return
			}
			o := int(i) % per * RawFrameSize
			copy(dst[o:o+RawFrameSize], s)
			r2.tail.Store(i + 1)
		}
	}()
	start := time.Now()
	var err error
	for i := range n { // the sending engine: from memory into its ring
		if i%4096 == 0 && ctx.Err() != nil {
			err = ctx.Err()
			break
		}
		if !spin(&stop, func() bool { return i-r1.tail.Load() < r1.n }) {
			break
		}
		o := int(i) % per * RawFrameSize
		s := r1.slot(i)
		copy(s, src[o:o+RawFrameSize])
		r1.crc[i%r1.n] = crc32.ChecksumIEEE(s)
		r1.head.Store(i + 1)
	}
	if err != nil {
		stop.Store(true)
	}
	wg.Wait()
	d := time.Since(start)
	switch {
	case err != nil:
		return RawResult{}, err
	case bad.Load() >= 0:
		return RawResult{}, fmt.Errorf("copy ceiling: frame %d arrived with a bad CRC", bad.Load())
	}
	if seen := min(frames, per) * RawFrameSize; !bytes.Equal(dst[:seen], src[:seen]) {
		return RawResult{}, fmt.Errorf("copy ceiling: the receiver's memory differs from the sender's")
	}
	bw := mibps(frames*RawFrameSize, d)
	return RawResult{FrameSize: RawFrameSize, Frames: frames, Elapsed: d, MiBps: bw, Gbps: bw * (1 << 20) * 8 / 1e9}, nil
}
