package device

import (
	"unsafe"

	"github.com/PacketFive/hinic/internal/rdma"
)

// allocMW runs ALLOC_MW (ABI 1.10): a type 1 or 2 window of the PD,
// charged to the guest's budget; its handle is its R_Key.
func (s *session) allocMW(a *CmdAllocMWArgs, out *AdminCQE) uint16 {
	pd, ok := s.pds[a.PD]
	if !ok {
		return StENOENT
	}
	if a.Type != uint32(rdma.MWType1) && a.Type != uint32(rdma.MWType2) {
		return StEINVAL
	}
	if !s.mem.charge(mwCost()) {
		return StENOMEM
	}
	mw, err := s.dev.AllocMW(pd, rdma.MWType(a.Type))
	if err != nil {
		s.mem.refund(mwCost())
		return status(err)
	}
	key := mw.RKey()
	s.mws[key&^0xff] = mw
	out.Handle = key
	put32(out.Out[0:], key)
	return StOK
}

func (s *session) regMR(a *CmdRegMRArgs, out *AdminCQE) uint16 {
	pd, ok := s.pds[a.PD]
	if !ok {
		return StENOENT
	}
	cost, pageSize, pages, st := s.chargedPages(a)
	if st != StOK {
		return st
	}
	mr, err := s.dev.RegMRPages(pd, a.IOVA, a.Length, pageSize, pages, rdma.Access(a.Access))
	if err != nil {
		s.mem.refund(cost)
		return status(err)
	}
	s.mrs[mr.LKey] = mr
	s.mrCost[mr.LKey] = cost
	out.Handle = mr.LKey
	put32(out.Out[0:], mr.LKey)
	put32(out.Out[4:], mr.RKey)
	return StOK
}

// chargedPages charges the budget for the page list of a REG_MR or
// REREG_MR, then reads and checks it; on an error nothing stays
// charged. The charge comes before the read: the copy the engine keeps
// is what the MR costs, and this one is as large.
func (s *session) chargedPages(a *CmdRegMRArgs) (cost int64, pageSize uint64, pages []uint64, st uint16) {
	if a.PageShift < 12 || a.PageShift > 30 || a.NPages == 0 || a.NPages > maxPageList || a.Length == 0 {
		return 0, 0, nil, StEINVAL
	}
	cost = mrCost(a.NPages)
	if !s.mem.charge(cost) {
		return 0, 0, nil, StENOMEM
	}
	pageSize, pages, st = s.mrPages(a)
	if st != StOK {
		s.mem.refund(cost)
		return 0, 0, nil, st
	}
	return cost, pageSize, pages, StOK
}

// mrPages reads and checks the page list of a REG_MR or REREG_MR
// (little-endian GPAs, as the host's words).
func (s *session) mrPages(a *CmdRegMRArgs) (uint64, []uint64, uint16) {
	if a.PageShift < 12 || a.PageShift > 30 || a.NPages == 0 || a.NPages > maxPageList || a.Length == 0 {
		return 0, nil, StEINVAL
	}
	pageSize := uint64(1) << a.PageShift
	pages, st := s.pageList(a.PageListGPA, uint64(a.NPages), pageSize)
	return pageSize, pages, st
}

// pageList reads and checks a list of n page GPAs at gpa (little-endian,
// as the host's words; n > 0): each page is pageSize-aligned guest RAM.
// The list is read once, so the guest cannot change it afterwards.
func (s *session) pageList(gpa, n, pageSize uint64) ([]uint64, uint16) {
	if !s.ramRange(gpa, 8*n) {
		return nil, StEFAULT
	}
	pages := make([]uint64, n)
	if err := s.v.ram.ReadAt(unsafe.Slice((*byte)(unsafe.Pointer(&pages[0])), 8*len(pages)), gpa); err != nil {
		return nil, StEFAULT
	}
	for _, p := range pages {
		if p%pageSize != 0 {
			return nil, StEINVAL
		}
		if !s.ramRange(p, pageSize) {
			return nil, StEFAULT
		}
	}
	return pages, StOK
}
