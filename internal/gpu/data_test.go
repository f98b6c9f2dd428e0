package gpu_test

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/PacketFive/hinic/internal/gpu"
)

// putSGL writes a scatter list into guest memory and returns its GPA.
func putSGL(t *testing.T, r *rig, segs []gpu.SGE) uint64 {
	t.Helper()
	gpa := must[uint64](t)(r.g.Alloc(uint64(len(segs))*16, 16))
	b := r.g.Mem(gpa, uint64(len(segs))*16)
	for i, s := range segs {
		binary.LittleEndian.PutUint64(b[16*i:], s.GPA)
		binary.LittleEndian.PutUint64(b[16*i+8:], s.Len)
	}
	return gpa
}

func TestCopies(t *testing.T) {
	r := liveRig(t, nil, nil)
	g, ctx := r.g, r.ctx
	c := must[uint16](t)(g.CtxCreate(ctx))
	const n = 300_000
	rnd := rand.New(rand.NewPCG(1, 2))
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(rnd.Uint32())
	}
	dev := must[uint64](t)(g.MemAlloc(ctx, c, n, 0))
	dev2 := must[uint64](t)(g.MemAlloc(ctx, c, n, 0))
	host := must[uint64](t)(g.Alloc(n, 4096))
	copy(g.Mem(host, n), src)
	cp := func(t *testing.T, op uint16, dst, src, n uint64, sg uint32) {
		t.Helper()
		if err := g.Copy(ctx, op, c, dst, src, n, sg); err != nil {
			t.Fatal(err)
		}
	}
	// readDev copies n bytes of device memory at d into fresh host memory
	// and returns them.
	readDev := func(t *testing.T, d, n uint64) []byte {
		t.Helper()
		h := must[uint64](t)(g.Alloc(n, 64))
		cp(t, gpu.OpCopyD2H, h, d, n, 0)
		return g.Mem(h, n)
	}

	t.Run("h2d d2h", func(t *testing.T) {
		cp(t, gpu.OpCopyH2D, dev, host, n, 0)
		if !bytes.Equal(readDev(t, dev, n), src) {
			t.Error("D2H(H2D(x)) != x")
		}
	})
	t.Run("scatter lists", func(t *testing.T) {
		// Three host pieces, in an order other than their addresses.
		p := [3]uint64{}
		lens := [3]uint64{1, 99_999, n - 100_000}
		for i := 2; i >= 0; i-- {
			p[i] = must[uint64](t)(g.Alloc(lens[i], 8))
		}
		off := uint64(0)
		var sgl []gpu.SGE
		for i := range 3 {
			copy(g.Mem(p[i], lens[i]), src[off:off+lens[i]])
			sgl = append(sgl, gpu.SGE{GPA: p[i], Len: lens[i]})
			off += lens[i]
		}
		list := putSGL(t, r, sgl)
		cp(t, gpu.OpCopyH2D, dev2, list, n, 3)
		if !bytes.Equal(readDev(t, dev2, n), src) {
			t.Error("H2D with a scatter list")
		}
		// D2H into a scatter list of two pieces.
		q0, q1 := must[uint64](t)(g.Alloc(1000, 8)), must[uint64](t)(g.Alloc(n-1000, 8))
		list = putSGL(t, r, []gpu.SGE{{GPA: q1, Len: n - 1000}, {GPA: q0, Len: 1000}})
		cp(t, gpu.OpCopyD2H, list, dev2, n, 2)
		if !bytes.Equal(g.Mem(q1, n-1000), src[:n-1000]) || !bytes.Equal(g.Mem(q0, 1000), src[n-1000:]) {
			t.Error("D2H into a scatter list")
		}
	})
	t.Run("d2d overlapping", func(t *testing.T) {
		cp(t, gpu.OpCopyH2D, dev, host, n, 0)
		// memmove forward and backward within one allocation.
		cp(t, gpu.OpCopyD2D, dev+1000, dev, 5000, 0)
		want := append([]byte(nil), src...)
		copy(want[1000:6000], src[0:5000])
		cp(t, gpu.OpCopyD2D, dev+10, dev+20, 100, 0)
		copy(want[10:110], append([]byte(nil), want[20:120]...))
		// And across allocations.
		cp(t, gpu.OpCopyD2D, dev2, dev, n, 0)
		if !bytes.Equal(readDev(t, dev2, n), want) {
			t.Error("D2D is not memmove")
		}
	})
	t.Run("memset", func(t *testing.T) {
		if _, err := g.Do(ctx, gpu.NewCmd(gpu.OpMemset, c, 0, 0, gpu.ArgsMemset{Dst: dev + 7, Len: 1001, Value: 0xa5})); err != nil {
			t.Fatal(err)
		}
		out := must[uint64](t)(g.Alloc(2000, 64))
		cp(t, gpu.OpCopyD2H, out, dev2, 2000, 0)
		cp(t, gpu.OpCopyD2H, out, dev, 2000, 0)
		b := g.Mem(out, 2000)
		if b[6] == 0xa5 || b[1008] == 0xa5 || bytes.Count(b[7:1008], []byte{0xa5}) != 1001 {
			t.Error("memset range")
		}
	})
	h := g.Header()
	if h.BytesH2D == 0 || h.BytesD2H == 0 || h.BytesD2D == 0 {
		t.Errorf("byte counters %d %d %d", h.BytesH2D, h.BytesD2H, h.BytesD2D)
	}
}

// TestAllocZeroed: memory a context frees is zero when the next one
// allocates it.
func TestAllocZeroed(t *testing.T) {
	r := liveRig(t, nil, nil)
	g, ctx := r.g, r.ctx
	a := must[uint16](t)(g.CtxCreate(ctx))
	d := must[uint64](t)(g.MemAlloc(ctx, a, 4096, 0))
	if _, err := g.Do(ctx, gpu.NewCmd(gpu.OpMemset, a, 0, 0, gpu.ArgsMemset{Dst: d, Len: 4096, Value: 0xff})); err != nil {
		t.Fatal(err)
	}
	if err := g.CtxDestroy(ctx, a); err != nil {
		t.Fatal(err)
	}
	b := must[uint16](t)(g.CtxCreate(ctx))
	d2 := must[uint64](t)(g.MemAlloc(ctx, b, 4096, 0))
	out := must[uint64](t)(g.Alloc(4096, 64))
	if err := g.Copy(ctx, gpu.OpCopyD2H, b, out, d2, 4096, 0); err != nil {
		t.Fatal(err)
	}
	if d2 != d || !bytes.Equal(g.Mem(out, 4096), make([]byte, 4096)) {
		t.Errorf("reused %v, zero %v", d2 == d, bytes.Equal(g.Mem(out, 4096), make([]byte, 4096)))
	}
}
