package gpu

import (
	"errors"
	"sort"
)

// Allocator errors, mapped to completion statuses by the caller.
var (
	errNoMem   = errors.New("gpu: device memory exhausted")       // ENOMEM
	errNoEnt   = errors.New("gpu: no such allocation")            // ENOENT
	errAccess  = errors.New("gpu: range outside the allocations") // EACCES
	errInvalid = errors.New("gpu: invalid argument")              // EINVAL
	errFault   = errors.New("gpu: GPA outside guest RAM")         // EFAULT
)

// extent is a range of device memory: [off, off+size).
type extent struct{ off, size uint64 }

// allocation is a live MEM_ALLOC of context ctx.
type allocation struct {
	extent
	ctx uint16
}

// heap is a first-fit allocator of device memory with coalescing on
// free. Offsets are from the start of device memory; device addresses
// are base + offset. Free extents and allocations are kept sorted by
// offset (both are bounded: allocations by max_allocs, free extents by
// allocations + 1). Not safe for concurrent use (the session's memMu).
type heap struct {
	base, size uint64
	align      uint64 // least alignment, a power of two
	free       []extent
	allocs     []allocation
	used       uint64
}

func newHeap(base, size, align uint64) *heap {
	h := &heap{base: base, size: size, align: align}
	h.reset()
	return h
}

// reset frees everything.
func (h *heap) reset() {
	h.free = append(h.free[:0], extent{0, h.size})
	h.allocs = h.allocs[:0]
	h.used = 0
}

// roundSize rounds n up to the heap's alignment, or reports overflow.
func (h *heap) roundSize(n uint64) (uint64, bool) {
	r := (n + h.align - 1) &^ (h.align - 1)
	return r, r >= n
}

// alloc takes size bytes (already rounded) at a device address aligned
// to align (a power of two of at least h.align) for ctx, first fit.
func (h *heap) alloc(size, align uint64, ctx uint16) (uint64, error) {
	if size == 0 || size > h.size {
		return 0, errNoMem
	}
	for i, f := range h.free {
		if f.size < size {
			continue
		}
		start := h.base + f.off
		if align > 1<<62 {
			return 0, errNoMem
		}
		a := (start + align - 1) &^ (align - 1)
		if a < start {
			continue
		}
		pad := a - start
		if pad > f.size || f.size-pad < size {
			continue
		}
		off := f.off + pad
		// Split the free extent into the pad before and the rest after.
		var repl []extent
		if pad > 0 {
			repl = append(repl, extent{f.off, pad})
		}
		if rest := f.size - pad - size; rest > 0 {
			repl = append(repl, extent{off + size, rest})
		}
		h.free = append(h.free[:i], append(repl, h.free[i+1:]...)...)
		j := sort.Search(len(h.allocs), func(k int) bool { return h.allocs[k].off > off })
		h.allocs = append(h.allocs, allocation{})
		copy(h.allocs[j+1:], h.allocs[j:])
		h.allocs[j] = allocation{extent{off, size}, ctx}
		h.used += size
		return h.base + off, nil
	}
	return 0, errNoMem
}

// find returns the index of the allocation holding device address addr,
// or -1.
func (h *heap) find(addr uint64) int {
	if addr < h.base || addr-h.base >= h.size {
		return -1
	}
	off := addr - h.base
	j := sort.Search(len(h.allocs), func(k int) bool { return h.allocs[k].off > off }) - 1
	if j < 0 || off-h.allocs[j].off >= h.allocs[j].size {
		return -1
	}
	return j
}

// freeAt frees the allocation that starts at addr, which must be ctx's.
// It returns the size freed.
func (h *heap) freeAt(addr uint64, ctx uint16) (uint64, error) {
	j := h.find(addr)
	if j < 0 {
		return 0, errNoEnt
	}
	a := h.allocs[j]
	if a.ctx != ctx {
		if a.off == addr-h.base {
			return 0, errAccess
		}
		return 0, errNoEnt
	}
	if a.off != addr-h.base {
		return 0, errInvalid
	}
	h.allocs = append(h.allocs[:j], h.allocs[j+1:]...)
	h.release(a.extent)
	return a.size, nil
}

// freeCtx frees every allocation of ctx and returns the bytes and count.
func (h *heap) freeCtx(ctx uint16) (bytes uint64, n int) {
	keep := h.allocs[:0]
	var gone []extent
	for _, a := range h.allocs {
		if a.ctx == ctx {
			gone = append(gone, a.extent)
			continue
		}
		keep = append(keep, a)
	}
	h.allocs = keep
	for _, e := range gone {
		h.release(e)
		bytes += e.size
	}
	return bytes, len(gone)
}

// release returns e to the free list, merged with its neighbours.
func (h *heap) release(e extent) {
	h.used -= e.size
	i := sort.Search(len(h.free), func(k int) bool { return h.free[k].off > e.off })
	h.free = append(h.free, extent{})
	copy(h.free[i+1:], h.free[i:])
	h.free[i] = e
	if i+1 < len(h.free) && h.free[i].off+h.free[i].size == h.free[i+1].off {
		h.free[i].size += h.free[i+1].size
		h.free = append(h.free[:i+1], h.free[i+2:]...)
	}
	if i > 0 && h.free[i-1].off+h.free[i-1].size == h.free[i].off {
		h.free[i-1].size += h.free[i].size
		h.free = append(h.free[:i], h.free[i+1:]...)
	}
}

// check returns the offset of [addr, addr+n) when it lies wholly in one
// allocation of ctx, else errAccess.
func (h *heap) check(addr, n uint64, ctx uint16) (uint64, error) {
	j := h.find(addr)
	if j < 0 || h.allocs[j].ctx != ctx {
		return 0, errAccess
	}
	a := h.allocs[j]
	off := addr - h.base
	if n > a.off+a.size-off {
		return 0, errAccess
	}
	return off, nil
}

// checkAny returns the offset of [addr, addr+n) when it lies wholly in
// one allocation of any context (a peer's access), else errAccess.
func (h *heap) checkAny(addr, n uint64) (uint64, error) {
	j := h.find(addr)
	if j < 0 {
		return 0, errAccess
	}
	return h.check(addr, n, h.allocs[j].ctx)
}

// largest returns the largest allocation possible now (at the least
// alignment).
func (h *heap) largest() uint64 {
	var m uint64
	for _, f := range h.free {
		// The start of a free extent is always aligned to h.align.
		m = max(m, f.size&^(h.align-1))
	}
	return m
}
