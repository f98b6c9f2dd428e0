package shmport

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// FuzzConsumer plays a hostile producer: the fuzz input becomes the
// peer's head and the ring's descriptors. Recv must never panic, every
// frame it hands out must lie inside the ring's buffer area, and a head
// more than a ring ahead must be an error.
func FuzzConsumer(f *testing.F) {
	g := Geometry{Entries: MinEntries, BufSize: MinBufSize}
	seed := func(head uint32, descs ...uint32) []byte {
		b := binary.LittleEndian.AppendUint32(nil, head)
		for _, d := range descs {
			b = binary.LittleEndian.AppendUint32(b, d)
		}
		return b
	}
	f.Add(seed(1, 0, 10))                            // one good frame
	f.Add(seed(2, 0, 10, 256, 256))                  // two good frames
	f.Add(seed(1, 0xFFFFFFFF, 10))                   // offset far out
	f.Add(seed(1, uint32(MinEntries*MinBufSize), 1)) // just past the end
	f.Add(seed(1, 0, 0xFFFFFFFF))                    // length far out
	f.Add(seed(17))                                  // head past a ring
	f.Add(seed(0xFFFFFFFF))                          // head "behind" tail
	mem := make([]byte, g.ringSize()+64)
	off := (64 - uintptr(unsafePtr(mem))%64) % 64
	mem = mem[off : off+uintptr(g.ringSize())]
	f.Fuzz(func(t *testing.T, in []byte) {
		clear(mem)
		if len(in) < 4 {
			return
		}
		c := consumer{r: newRing(mem, g)}
		head := binary.LittleEndian.Uint32(in)
		for i, j := 0, 4; j+8 <= len(in) && i < int(g.Entries); i, j = i+1, j+8 {
			copy(c.r.desc[i*descSize:i*descSize+8], in[j:j+8])
		}
		c.r.head.Store(head)
		lo := uintptr(unsafePtr(c.r.bufs))
		hi := lo + uintptr(len(c.r.bufs))
		n, err := c.avail()
		if head > g.Entries {
			if err == nil {
				t.Fatalf("head %d accepted (%d frames)", head, n)
			}
			return
		}
		if err != nil || n != head {
			t.Fatalf("head %d: avail %d, %v", head, n, err)
		}
		batch, bad := c.collect(n, nil)
		for _, fr := range batch {
			p := uintptr(unsafePtr(fr))
			if len(fr) == 0 || p < lo || p+uintptr(len(fr)) > hi || len(fr) > int(g.BufSize) {
				t.Fatalf("frame of %d bytes at %#x outside [%#x, %#x)", len(fr), p, lo, hi)
			}
		}
		if len(batch)+bad != int(n) {
			t.Fatalf("%d frames + %d bad of %d", len(batch), bad, n)
		}
		c.release(n)
		if c.r.tail.Load() != head {
			t.Fatalf("tail %d after releasing to head %d", c.r.tail.Load(), head)
		}
	})
}

// FuzzSetup checks the setup parser: no panic, what parses re-encodes to
// the same bytes, and Check never accepts a geometry Validate rejects.
func FuzzSetup(f *testing.F) {
	f.Add(AppendSetup(nil, &Setup{Version: SetupVersion, Geometry: testGeo, RegionSize: testGeo.RegionSize()}))
	f.Add(AppendSetup(nil, &Setup{Version: SetupVersion}))
	f.Add(AppendSetup(nil, &Setup{Version: 2, Geometry: Geometry{Entries: 1 << 31, BufSize: 64}, RegionSize: 1}))
	f.Add(AppendAnswer(nil, StatusOK))
	f.Fuzz(func(t *testing.T, b []byte) {
		if st, err := ParseAnswer(b); err == nil {
			if !bytes.Equal(AppendAnswer(nil, st)[:6], b[:6]) {
				t.Fatalf("answer %x re-encodes differently", b)
			}
		}
		s, err := ParseSetup(b)
		if err != nil {
			return
		}
		// Bytes 6 and 7 are reserved and not kept.
		if re := AppendSetup(nil, &s); !bytes.Equal(re[:6], b[:6]) || !bytes.Equal(re[8:], b[8:]) {
			t.Fatalf("setup %x re-encodes as %x", b, re)
		}
		if st := s.Check(1<<40, 0); st == StatusOK {
			if err := s.Geometry.Validate(); err != nil || s.RegionSize != s.Geometry.RegionSize() {
				t.Fatalf("accepted %+v: %v", s, err)
			}
		}
	})
}

// FuzzProducer plays a hostile consumer: the fuzz input becomes the
// peer's tail and the sizes of the frames queued and flushed against
// it. A tail ahead of the producer's head or more than a ring behind
// must be an error, a put must stay inside the ring's buffer area, and
// the published head never runs more than a ring ahead of the tail the
// producer last trusted.
func FuzzProducer(f *testing.F) {
	g := Geometry{Entries: MinEntries, BufSize: MinBufSize}
	f.Add(uint32(0), uint32(0), []byte{10, 200, 255})
	f.Add(uint32(3), uint32(5), []byte{1})                  // tail ahead of head
	f.Add(uint32(20), uint32(0), []byte{1, 2})              // head a ring and more past tail
	f.Add(uint32(0xFFFFFFF0), uint32(0xFFFFFFF0), []byte{}) // wrapped indices
	mem := make([]byte, g.ringSize()+64)
	off := (64 - uintptr(unsafePtr(mem))%64) % 64
	mem = mem[off : off+uintptr(g.ringSize())]
	f.Fuzz(func(t *testing.T, head, tail uint32, sizes []byte) {
		clear(mem)
		p := producer{r: newRing(mem, g), head: head, pub: head}
		p.r.tail.Store(tail)
		for _, s := range sizes {
			if p.free == 0 {
				n, err := p.space()
				if head-tail > g.Entries {
					if err == nil {
						t.Fatalf("head %d, tail %d accepted (%d free)", head, tail, n)
					}
					return
				}
				if err != nil {
					t.Fatalf("head %d, tail %d: %v", head, tail, err)
				}
				if n == 0 {
					break
				}
			}
			p.put(make([]byte, 1+int(s)))
		}
		if p.pending() && p.head-tail > g.Entries {
			t.Fatalf("head %d more than a ring past tail %d", p.head, tail)
		}
		if p.pending() {
			p.publish()
			if p.r.head.Load() != p.head || p.pending() {
				t.Fatalf("published head %d, want %d", p.r.head.Load(), p.head)
			}
		}
	})
}
