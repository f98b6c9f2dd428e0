package gpu

import (
	"math/rand/v2"
	"testing"
)

// TestHeapRandom drives the allocator with random allocations and frees
// and checks it against a map of the bytes in use: no overlap, every
// alignment kept, every byte accounted for, and all free extents merged
// back into one at the end.
func TestHeapRandom(t *testing.T) {
	const base, size = 1 << 40, 1 << 20
	h := newHeap(base, size, AllocAlgn)
	rnd := rand.New(rand.NewPCG(7, 8))
	owner := make([]int, size/AllocAlgn) // allocation id per unit, 0 free
	type live struct {
		addr, size uint64
		ctx        uint16
		id         int
	}
	var lives []live
	next := 1
	for step := range 20000 {
		if len(lives) > 0 && rnd.IntN(3) == 0 {
			i := rnd.IntN(len(lives))
			l := lives[i]
			if _, err := h.freeAt(l.addr, l.ctx+1); err == nil {
				t.Fatal("freed by another context")
			}
			if n, err := h.freeAt(l.addr, l.ctx); err != nil || n != l.size {
				t.Fatalf("step %d: free %#x: %d %v", step, l.addr, n, err)
			}
			for u := (l.addr - base) / AllocAlgn; u < (l.addr-base+l.size)/AllocAlgn; u++ {
				owner[u] = 0
			}
			lives = append(lives[:i], lives[i+1:]...)
			continue
		}
		n, _ := h.roundSize(uint64(1 + rnd.IntN(40000)))
		align := uint64(AllocAlgn) << rnd.IntN(6)
		ctx := uint16(rnd.IntN(3))
		addr, err := h.alloc(n, align, ctx)
		if err != nil {
			continue
		}
		if addr%align != 0 || addr < base || addr+n > base+size {
			t.Fatalf("step %d: %#x+%d align %d", step, addr, n, align)
		}
		for u := (addr - base) / AllocAlgn; u < (addr-base+n)/AllocAlgn; u++ {
			if owner[u] != 0 {
				t.Fatalf("step %d: %#x overlaps allocation %d", step, addr, owner[u])
			}
			owner[u] = next
		}
		lives = append(lives, live{addr, n, ctx, next})
		next++
		if off, err := h.check(addr+n-1, 1, ctx); err != nil || off != addr+n-1-base {
			t.Fatalf("check of the last byte: %d %v", off, err)
		}
		if _, err := h.check(addr, n+1, ctx); err == nil {
			t.Fatal("check one past the end passed")
		}
		var used uint64
		for _, o := range owner {
			if o != 0 {
				used += AllocAlgn
			}
		}
		if used != h.used {
			t.Fatalf("used %d, map says %d", h.used, used)
		}
	}
	for _, c := range []uint16{0, 1, 2} {
		h.freeCtx(c)
	}
	if h.used != 0 || len(h.allocs) != 0 || len(h.free) != 1 || h.free[0] != (extent{0, size}) || h.largest() != size {
		t.Fatalf("after freeing all: used %d allocs %d free %v", h.used, len(h.allocs), h.free)
	}
}
