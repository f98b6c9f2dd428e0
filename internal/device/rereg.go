package device

import "github.com/PacketFive/hinic/internal/rdma"

// reregMR is REREG_MR (ABI 1.8), the device side of ibv_rereg_mr: the MR
// whose lkey is handle takes a new PD, access and page list, all of
// them given (the driver merges what the verb leaves unchanged), and
// keeps its keys. The page list is checked as REG_MR checks it; on any
// error the MR stays as it was. The budget is charged for the new page
// list, and the old one's charge returned, once the MR has changed.
func (s *session) reregMR(lkey uint32, a *CmdRegMRArgs, out *AdminCQE) uint16 {
	old, ok := s.mrs[lkey]
	if !ok {
		return StENOENT
	}
	pd, ok := s.pds[a.PD]
	if !ok {
		return StENOENT
	}
	cost, pageSize, pages, st := s.chargedPages(a)
	if st != StOK {
		return st
	}
	mr, err := s.dev.ReregMRPages(old, pd, a.IOVA, a.Length, pageSize, pages, rdma.Access(a.Access))
	if err != nil {
		s.mem.refund(cost)
		return status(err)
	}
	s.mem.refund(s.mrCost[lkey])
	s.mrCost[lkey] = cost
	s.mrs[lkey] = mr
	out.Handle = mr.LKey
	put32(out.Out[0:], mr.LKey)
	put32(out.Out[4:], mr.RKey)
	return StOK
}
