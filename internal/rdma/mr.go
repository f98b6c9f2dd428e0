package rdma

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"sync/atomic"
)

// MR is a registered memory region: a range of IOVAs [Addr, Addr+Length)
// translated to the device's Memory, with its access rights and keys.
// LKey and RKey are equal (as in rxe): bits 31..8 index the key table and
// bits 7..0 are random (the key variant of rxe and mlx5), never those the
// slot's previous MR had: a consumer cannot predict another's R_Key from
// its own, and a deregistered MR's keys fail.
//
// An MR is immutable after registration except for its validity, so it is
// safe for concurrent use. Every DMA the engine does goes through an MR
// (after a bounds and access check) or, for inline data, through the
// Memory directly.
type MR struct {
	LKey, RKey uint32

	dev    *Device
	pd     *PD
	iova   uint64
	length uint64
	access Access

	// Translation: contiguous (phys = base + (va - iova)) or paged.
	paged     bool
	base      uint64
	pageShift uint
	pageMask  uint64
	firstOff  uint64 // offset of iova inside pages[0]
	pages     []uint64

	valid atomic.Bool
}

// Addr returns the first IOVA of the region.
func (mr *MR) Addr() uint64 { return mr.iova }

// Length returns the length of the region in bytes.
func (mr *MR) Length() uint64 { return mr.length }

// Access returns the region's access rights.
func (mr *MR) Access() Access { return mr.access }

// PD returns the protection domain the region belongs to.
func (mr *MR) PD() *PD { return mr.pd }

// contains reports whether [va, va+n) lies inside the region.
func (mr *MR) contains(va, n uint64) bool {
	return va >= mr.iova && n <= mr.length && va-mr.iova <= mr.length-n
}

// read copies len(p) bytes at IOVA va into p; the caller has checked
// contains.
func (mr *MR) read(va uint64, p []byte) error {
	if !mr.paged {
		return mr.dev.mem.ReadAt(p, mr.base+(va-mr.iova))
	}
	for len(p) > 0 {
		phys, n := mr.translate(va, len(p))
		if err := mr.dev.mem.ReadAt(p[:n], phys); err != nil {
			return err
		}
		p, va = p[n:], va+uint64(n)
	}
	return nil
}

// write copies p to IOVA va; the caller has checked contains.
func (mr *MR) write(va uint64, p []byte) error {
	if !mr.paged {
		return mr.dev.mem.WriteAt(p, mr.base+(va-mr.iova))
	}
	for len(p) > 0 {
		phys, n := mr.translate(va, len(p))
		if err := mr.dev.mem.WriteAt(p[:n], phys); err != nil {
			return err
		}
		p, va = p[n:], va+uint64(n)
	}
	return nil
}

// translate returns the physical address of va in a paged region and how
// many of the want bytes are contiguous from there.
func (mr *MR) translate(va uint64, want int) (uint64, int) {
	rel := va - mr.iova + mr.firstOff
	page := rel >> mr.pageShift
	off := rel & mr.pageMask
	n := mr.pageMask + 1 - off
	if uint64(want) < n {
		n = uint64(want)
	}
	return mr.pages[page] + off, int(n)
}

func checkMRAccess(access Access) error {
	if access&^accessKnown != 0 {
		return fmt.Errorf("unsupported access flags %v", access&^accessKnown)
	}
	// Remote write and remote atomic need local write: the IBTA rule the
	// kernel's ib_check_mr_access enforces before a provider sees the MR.
	if access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && access&AccessLocalWrite == 0 {
		return fmt.Errorf("access %v needs LocalWrite", access)
	}
	return nil
}

// RegMR registers [addr, addr+length) of the device's Memory, with IOVA
// equal to addr.
func (d *Device) RegMR(pd *PD, addr, length uint64, access Access) (*MR, error) {
	if err := d.checkPD(pd); err != nil {
		return nil, fmt.Errorf("rdma: reg MR: %w", err)
	}
	if err := checkMRAccess(access); err != nil {
		return nil, fmt.Errorf("rdma: reg MR: %v: %w", err, ErrInvalid)
	}
	if addr+length < addr {
		return nil, fmt.Errorf("rdma: reg MR [%#x, +%#x): wraps: %w", addr, length, ErrInvalid)
	}
	if b, ok := d.mem.(Bounded); ok && !b.Contains(addr, length) {
		return nil, fmt.Errorf("rdma: reg MR [%#x, +%#x): outside the DMA space: %w", addr, length, ErrInvalid)
	}
	mr := &MR{dev: d, pd: pd, iova: addr, length: length, access: access, base: addr}
	return mr, d.insertMR(mr)
}

// RegMRPages registers a region described by a page list, the device
// backend's path: IOVA iova maps to pages[0] + iova%pageSize, and each
// following pageSize-aligned IOVA page to the next entry. pageSize must be
// a power of two of at least 4 KiB and pages must cover the region.
func (d *Device) RegMRPages(pd *PD, iova, length, pageSize uint64, pages []uint64, access Access) (*MR, error) {
	mr, err := d.newPagedMR(pd, iova, length, pageSize, pages, access)
	if err != nil {
		return nil, fmt.Errorf("rdma: reg MR pages: %w", err)
	}
	return mr, d.insertMR(mr)
}

// ReregMRPages changes old's PD, access and translation (as RegMRPages
// takes them) in place, the device side of ibv_rereg_mr: the region keeps
// its keys. The change is atomic: a work request that looks a key up
// afterwards finds the returned region, one that took old before goes on
// with it until its next lookup, which fails; on an error old stays as
// it was.
func (d *Device) ReregMRPages(old *MR, pd *PD, iova, length, pageSize uint64, pages []uint64, access Access) (*MR, error) {
	if old == nil || old.dev != d {
		return nil, fmt.Errorf("rdma: rereg MR: not this device's: %w", ErrInvalid)
	}
	mr, err := d.newPagedMR(pd, iova, length, pageSize, pages, access)
	if err != nil {
		return nil, fmt.Errorf("rdma: rereg MR %#x: %w", old.LKey, err)
	}
	d.mu.Lock() // orders against PD.Dealloc
	defer d.mu.Unlock()
	d.mrMu.Lock()
	defer d.mrMu.Unlock()
	idx := old.LKey >> 8
	if !old.valid.Load() || d.mrTab.load(idx) != old {
		return nil, fmt.Errorf("rdma: rereg MR %#x: not registered: %w", old.LKey, ErrInvalid)
	}
	if pd.dead.Load() {
		return nil, fmt.Errorf("rdma: rereg MR %#x: PD %d deallocated: %w", old.LKey, pd.handle, ErrInvalid)
	}
	mr.LKey, mr.RKey = old.LKey, old.RKey
	mr.valid.Store(true)
	d.mrTab.store(idx, mr)
	old.valid.Store(false)
	old.pd.refs.Add(-1)
	mr.pd.refs.Add(1)
	return mr, nil
}

// newPagedMR checks a page-list region and builds it, unregistered.
func (d *Device) newPagedMR(pd *PD, iova, length, pageSize uint64, pages []uint64, access Access) (*MR, error) {
	if err := d.checkPD(pd); err != nil {
		return nil, err
	}
	if err := checkMRAccess(access); err != nil {
		return nil, fmt.Errorf("%v: %w", err, ErrInvalid)
	}
	if pageSize < 4096 || pageSize&(pageSize-1) != 0 {
		return nil, fmt.Errorf("page size %d is not a power of two >= 4096: %w", pageSize, ErrInvalid)
	}
	if iova+length < iova {
		return nil, fmt.Errorf("[%#x, +%#x): wraps: %w", iova, length, ErrInvalid)
	}
	first := iova & (pageSize - 1)
	need := (first + length + pageSize - 1) / pageSize
	if uint64(len(pages)) < need {
		return nil, fmt.Errorf("%d pages given, %d needed for %#x bytes at offset %#x: %w",
			len(pages), need, length, first, ErrInvalid)
	}
	bounded, checked := d.mem.(Bounded)
	for i, p := range pages[:need] {
		if p&(pageSize-1) != 0 {
			return nil, fmt.Errorf("page %d at %#x is not %d-aligned: %w", i, p, pageSize, ErrInvalid)
		}
		if checked && !bounded.Contains(p, pageSize) {
			return nil, fmt.Errorf("page %d at %#x is outside the DMA space: %w", i, p, ErrInvalid)
		}
	}
	mr := &MR{
		dev: d, pd: pd, iova: iova, length: length, access: access,
		paged: true, pageShift: uint(bits.TrailingZeros64(pageSize)), pageMask: pageSize - 1,
		firstOff: first, pages: append([]uint64(nil), pages[:need]...),
	}
	return mr, nil
}

func (d *Device) checkPD(pd *PD) error {
	switch {
	case d.closed.Load():
		return ErrClosed
	case pd == nil || pd.dev != d:
		return fmt.Errorf("PD of another device or nil: %w", ErrInvalid)
	case pd.dead.Load():
		return fmt.Errorf("PD %d deallocated: %w", pd.handle, ErrInvalid)
	}
	return nil
}

func (d *Device) insertMR(mr *MR) error {
	d.mu.Lock() // orders against PD.Dealloc
	defer d.mu.Unlock()
	d.mrMu.Lock()
	defer d.mrMu.Unlock()
	if d.nMR >= d.cfg.MaxMR {
		return fmt.Errorf("rdma: reg MR: %d MRs registered (MaxMR): %w", d.nMR, ErrNoResources)
	}
	var idx uint32
	if n := len(d.mrFree); n > 0 {
		idx, d.mrFree = d.mrFree[n-1], d.mrFree[:n-1]
	} else {
		idx = uint32(len(d.mrKeyGn))
		d.mrKeyGn = append(d.mrKeyGn, 0)
	}
	// 1 to 255 added: any byte but the slot's last. The global
	// generator is ChaCha8, seeded from the system's entropy.
	d.mrKeyGn[idx] += 1 + uint8(rand.N(255))
	key := idx<<8 | uint32(d.mrKeyGn[idx])
	mr.LKey, mr.RKey = key, key
	mr.valid.Store(true)
	d.mrTab.store(idx, mr)
	d.nMR++
	mr.pd.refs.Add(1)
	return nil
}

// Dereg deregisters the region. Work requests still using it fail with a
// protection error.
func (mr *MR) Dereg() error {
	d := mr.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mrMu.Lock()
	defer d.mrMu.Unlock()
	idx := mr.LKey >> 8
	if !mr.valid.Load() || d.mrTab.load(idx) != mr {
		return fmt.Errorf("rdma: dereg MR %#x: not registered: %w", mr.LKey, ErrInvalid)
	}
	mr.valid.Store(false)
	d.mrTab.store(idx, nil)
	d.mrFree = append(d.mrFree, idx)
	d.nMR--
	mr.pd.refs.Add(-1)
	return nil
}

// lookupMR returns the valid MR with this key, or nil. Engine hot path: no
// allocation.
func (d *Device) lookupMR(key uint32) *MR {
	mr := d.mrTab.load(key >> 8)
	if mr == nil || mr.LKey != key || !mr.valid.Load() {
		return nil
	}
	return mr
}
