package device

import (
	"errors"
	"net/netip"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/PacketFive/hinic/internal/rdma"
)

const (
	adminCmdSize = int(unsafe.Sizeof(AdminCmd{}))
	adminCQESize = int(unsafe.Sizeof(AdminCQE{}))
	cqeSize      = uint64(unsafe.Sizeof(CQE{}))
	sgeSize      = uint64(unsafe.Sizeof(SGE{}))
	sendHdrSize  = uint64(unsafe.Sizeof(SendWQE{}))
	recvHdrSize  = uint64(unsafe.Sizeof(RecvWQE{}))
	wqeAVSize    = uint64(unsafe.Sizeof(WQEAV{}))
	maxPageList  = 1 << 20 // pages in one MR registration (4 GiB of 4 KiB pages)
)

// adminQueue executes the commands between admin_sq_cons and
// admin_sq_prod and writes one completion each.
func (s *session) adminQueue() {
	h := s.hdr
	prod := atomic.LoadUint32(&h.AdminSQProd)
	if prod-s.adminCons > AdminSQEntries {
		s.setFatal(FatalAdminRing)
		return
	}
	done := false
	for s.adminCons != prod {
		if s.adminCQ-atomic.LoadUint32(&h.AdminCQCons) >= AdminCQEntries {
			break // the driver has not consumed completions yet
		}
		var cmd AdminCmd
		off := AdminSQOff + int(s.adminCons%AdminSQEntries)*adminCmdSize
		copy(AsBytes(&cmd), s.shm[off:off+adminCmdSize])
		cqe := AdminCQE{CmdID: cmd.CmdID, Opcode: cmd.Opcode}
		cqe.Status = s.execute(&cmd, &cqe)
		s.v.stats.adminCmds.Add(1)
		atomic.AddUint64(&h.AdminCmds, 1)
		if cqe.Status != StOK {
			s.v.stats.adminErrors.Add(1)
		}
		coff := AdminCQOff + int(s.adminCQ%AdminCQEntries)*adminCQESize
		copy(s.shm[coff:coff+adminCQESize], AsBytes(&cqe))
		s.adminCons++
		s.adminCQ++
		atomic.StoreUint32(&h.AdminSQCons, s.adminCons)
		atomic.StoreUint32(&h.AdminCQProd, s.adminCQ)
		done = true
	}
	if done {
		s.publishQPs()
		s.raise(IRQCtrl)
	}
}

// status maps an engine error to an admin status.
func status(err error) uint16 {
	switch {
	case err == nil:
		return StOK
	case errors.Is(err, rdma.ErrBadAddress), errors.Is(err, ErrOutsideRAM):
		return StEFAULT
	case errors.Is(err, rdma.ErrUnsupported):
		return StEOPNOTSUPP
	case errors.Is(err, rdma.ErrBusy):
		return StEBUSY
	case errors.Is(err, rdma.ErrNoResources):
		return StENOMEM
	case errors.Is(err, rdma.ErrClosed):
		return StENODEV
	default:
		return StEINVAL
	}
}

func isPow2(n uint32) bool { return n != 0 && n&(n-1) == 0 }

// ramRange checks that [gpa, gpa+n) is guest RAM.
func (s *session) ramRange(gpa, n uint64) bool {
	_, err := s.v.ram.Offset(gpa, n)
	return err == nil
}

func (s *session) execute(c *AdminCmd, out *AdminCQE) uint16 {
	switch c.Opcode {
	case CmdQueryDevice:
		a := s.dev.QueryDevice()
		r := DeviceAttr{NodeGUID: a.NodeGUID, SysImageGUID: a.SysImageGUID, MaxMRSize: a.MaxMRSize,
			PageSizeCap: a.PageSizeCap, VendorID: a.VendorID, VendorPartID: a.VendorPartID, HWVer: a.HWVer,
			MaxQP: uint32(a.MaxQP), MaxQPWR: uint32(a.MaxQPWR), DeviceCapFlags: a.DeviceCapFlags,
			MaxSGE: uint32(a.MaxSGE), MaxSGERd: uint32(a.MaxSGERd), MaxCQ: uint32(a.MaxCQ), MaxCQE: uint32(a.MaxCQE),
			MaxMR: uint32(a.MaxMR), MaxPD: uint32(a.MaxPD), MaxQPRdAtom: uint32(a.MaxQPRdAtom),
			MaxQPInitRdAtom: uint32(a.MaxQPInitRdAtom), MaxResRdAtom: uint32(a.MaxResRdAtom),
			AtomicCap: uint32(a.AtomicCap), MaxPKeys: uint32(a.MaxPKeys), MaxInline: uint32(a.MaxInlineData),
			MaxMsgSz: a.MaxMsgSize, LocalCAAckDelay: a.LocalCAAckDelay, PhysPortCnt: uint8(a.PhysPortCnt),
			MaxSRQ: uint32(a.MaxSRQ), MaxSRQWR: uint32(a.MaxSRQWR), MaxSRQSGE: uint32(a.MaxSRQSGE),
			MaxMcastGrp: uint32(a.MaxMcastGrp), MaxMcastQPAttach: uint32(a.MaxMcastQPAttach),
			MaxTotalMcastQPAttach: uint32(a.MaxTotalMcastQPAttach), MaxAH: s.lim.maxAH, MaxMW: uint32(a.MaxMW),
			MaxRndvHdrSize: uint32(a.TM.MaxRndvHdrSize), MaxNumTags: uint32(a.TM.MaxNumTags), TMFlags: uint32(a.TM.Flags),
			MaxTMOps: uint32(a.TM.MaxOps), MaxTMSGE: uint32(a.TM.MaxSGE)}
		// A 1.0 driver asks for the first 120 bytes and gets them.
		b := AsBytes(&r)
		if c.RespLen < DeviceAttrV10Size {
			return StEINVAL
		}
		return s.respond(c, b[:min(int(c.RespLen), len(b))])
	case CmdQueryPort:
		if c.Handle != 1 {
			return StEINVAL
		}
		a := s.dev.QueryPort()
		if !s.v.linkUp() && !s.v.cfg.ib() {
			// An InfiniBand port's own state follows the link
			// (rdma.Device.SetLinkUp: Down, Polling).
			a.State = rdma.PortDown
			a.PhysState = 3 // Disabled
		}
		r := PortAttr{State: uint32(a.State), MaxMTU: uint32(a.MaxMTU), ActiveMTU: uint32(a.ActiveMTU),
			GIDTblLen: uint32(a.GIDTableLen), PortCapFlags: a.PortCapFlags, MaxMsgSz: uint32(a.MaxMsgSize),
			BadPKeyCntr: a.BadPKeyCntr, QKeyViolCntr: a.QKeyViolCntr, PKeyTblLen: uint32(a.PKeyTableLen),
			LID: a.LID, SMLID: a.SMLID, LMC: a.LMC, MaxVLNum: a.MaxVLNum, SMSL: a.SMSL,
			SubnetTimeout: a.SubnetTimeout, ActiveWidth: a.ActiveWidth, ActiveSpeed: a.ActiveSpeed,
			PhysState: a.PhysState, LinkLayer: uint8(a.LinkLayer)}
		return s.respond(c, AsBytes(&r))
	case CmdQueryGID:
		g, err := s.dev.QueryGID(int(c.Handle))
		if err != nil {
			return StEINVAL
		}
		typ, _ := s.dev.QueryGIDType(int(c.Handle))
		copy(out.Out[:16], g[:])
		out.Out[16] = byte(typ)
		return StOK
	case CmdQueryPKey:
		k, err := s.dev.QueryPKey(int(c.Handle))
		if err != nil {
			return StEINVAL
		}
		out.Out[0], out.Out[1] = byte(k), byte(k>>8)
		return StOK
	case CmdAllocPD:
		pd, err := s.dev.AllocPD()
		if err != nil {
			return status(err)
		}
		if _, live := s.pds[pd.Handle()]; live {
			pd.Dealloc() // the engine's counter wrapped onto a handle the guest holds
			return StENOMEM
		}
		s.pds[pd.Handle()] = pd
		out.Handle = pd.Handle()
		return StOK
	case CmdAllocXRCD:
		return s.allocXRCD(out)
	case CmdDeallocXRCD:
		return s.deallocXRCD(c.Handle)
	case CmdDeallocPD:
		pd, ok := s.pds[c.Handle]
		if !ok {
			return StENOENT
		}
		for _, a := range s.ahs {
			if a.pd == c.Handle {
				return StEBUSY
			}
		}
		if err := pd.Dealloc(); err != nil {
			return status(err)
		}
		delete(s.pds, c.Handle)
		return StOK
	case CmdRegMR:
		return s.regMR(PayloadOf[CmdRegMRArgs](c), out)
	case CmdDeregMR:
		mr, ok := s.mrs[c.Handle]
		if !ok {
			return StENOENT
		}
		if err := mr.Dereg(); err != nil {
			return status(err)
		}
		delete(s.mrs, c.Handle)
		s.mem.refund(s.mrCost[c.Handle])
		delete(s.mrCost, c.Handle)
		return StOK
	case CmdCreateCQ:
		return s.createCQ(PayloadOf[CmdCreateCQArgs](c), out)
	case CmdDestroyCQ:
		cq, ok := s.cqs[c.Handle]
		if !ok {
			return StENOENT
		}
		if cq.users > 0 {
			return StEBUSY
		}
		if err := cq.cq.Destroy(); err != nil {
			return status(err)
		}
		delete(s.cqs, c.Handle)
		s.mem.refund(cq.cost)
		return StOK
	case CmdCreateQP:
		return s.createQP(PayloadOf[CmdCreateQPArgs](c), out)
	case CmdModifyQP:
		return s.modifyQP(PayloadOf[CmdModifyQPArgs](c))
	case CmdQueryQP:
		q, ok := s.qps[c.Handle]
		if !ok {
			return StENOENT
		}
		a, _ := q.qp.Query()
		r := qpAttrToABI(a)
		return s.respond(c, AsBytes(&r))
	case CmdDestroyQP:
		q, ok := s.qps[c.Handle]
		if !ok {
			return StENOENT
		}
		if q.flows > 0 || q.rssUsers > 0 {
			return StEBUSY // ib_core destroys a QP's flows and RSS QPs first
		}
		if err := q.qp.Destroy(); err != nil {
			return status(err)
		}
		if q.typ == rdma.QPTypeRawPacket {
			s.nRawQP--
		}
		for _, w := range q.rssTable {
			w.rssUsers--
		}
		q.releaseUsers()
		delete(s.qps, c.Handle)
		s.mem.refund(q.cost)
		s.publishQPs()
		return StOK
	case CmdCreateAH:
		a := PayloadOf[CmdCreateAHArgs](c)
		pd, ok := s.pds[a.PD]
		if !ok {
			return StENOENT
		}
		if len(s.ahs) >= int(s.lim.maxAH) || !s.mem.charge(ahCost()) {
			return StENOMEM
		}
		ah, err := s.dev.CreateAH(pd, ahFromABI(&a.Attr))
		if err != nil {
			s.mem.refund(ahCost())
			return status(err)
		}
		h := nextHandle(&s.nextAH, s.ahs)
		s.ahs[h] = &gah{pd: a.PD, ah: ah}
		out.Handle = h
		return StOK
	case CmdDestroyAH:
		a, ok := s.ahs[c.Handle]
		if !ok {
			return StENOENT
		}
		a.ah.Destroy()
		delete(s.ahs, c.Handle)
		s.mem.refund(ahCost())
		return StOK
	case CmdSetAddr:
		return s.setAddr(PayloadOf[CmdSetAddrArgs](c))
	case CmdCreateSRQ:
		return s.createSRQ(PayloadOf[CmdCreateSRQArgs](c), out)
	case CmdModifySRQ:
		return s.modifySRQ(PayloadOf[CmdModifySRQArgs](c))
	case CmdQuerySRQ:
		q, ok := s.srqs[c.Handle]
		if !ok {
			return StENOENT
		}
		a := q.srq.Query()
		r := SRQAttr{MaxWR: uint32(a.MaxWR), MaxSGE: uint32(a.MaxSGE), SRQLimit: uint32(a.Limit)}
		copy(out.Out[:], AsBytes(&r))
		return StOK
	case CmdDestroySRQ:
		q, ok := s.srqs[c.Handle]
		if !ok {
			return StENOENT
		}
		if q.users > 0 {
			return StEBUSY
		}
		if err := q.srq.Destroy(); err != nil {
			return status(err)
		}
		if q.xrcd != nil {
			q.xrcd.users--
		}
		if q.cq != nil {
			q.cq.users--
		}
		delete(s.srqs, c.Handle)
		s.mem.refund(q.cost)
		return StOK
	case CmdAttachMcast, CmdDetachMcast:
		a := PayloadOf[CmdMcastArgs](c)
		q, ok := s.qps[a.QPN]
		if !ok {
			return StENOENT
		}
		if c.Opcode == CmdAttachMcast {
			return status(q.qp.AttachMcast(a.GID, a.LID))
		}
		return status(q.qp.DetachMcast(a.GID, a.LID))
	case CmdResizeCQ:
		return s.resizeCQ(c.Handle, PayloadOf[CmdCreateCQArgs](c))
	case CmdQueryCounters:
		if c.Handle != 1 {
			return StEINVAL
		}
		r := s.portCounters()
		return s.respond(c, AsBytes(&r))
	case CmdMADIfc:
		return s.madIfc(c, PayloadOf[CmdMADIfcArgs](c), out)
	case CmdSetPortCap:
		if c.Handle != 1 {
			return StEINVAL
		}
		return status(s.dev.SetHostCapabilities(PayloadOf[CmdPortCapArgs](c).CapMask))
	case CmdReregMR:
		return s.reregMR(c.Handle, PayloadOf[CmdRegMRArgs](c), out)
	case CmdAllocMW:
		return s.allocMW(PayloadOf[CmdAllocMWArgs](c), out)
	case CmdCreateFlow:
		return s.createFlow(PayloadOf[CmdCreateFlowArgs](c), out)
	case CmdDestroyFlow:
		return s.destroyFlow(c.Handle)
	case CmdSetRSS:
		return s.setRSS(PayloadOf[CmdSetRSSArgs](c))
	case CmdDeallocMW:
		mw, ok := s.mws[c.Handle&^0xff]
		if !ok {
			return StENOENT
		}
		if err := mw.Dealloc(); err != nil {
			return status(err)
		}
		delete(s.mws, c.Handle&^0xff)
		s.mem.refund(mwCost())
		return StOK
	default:
		return StEINVAL
	}
}

// portCounters gathers QUERY_COUNTERS: the engine's frame counters, the
// multicast frames the port saw, the link's state. The multicast counts
// are read first, since the engine counts a frame after the port took
// it. The port counts a received multicast frame before the engine
// validates it, and one the engine rejects is in no total: hence the
// clamp of the unicast counts.
func (s *session) portCounters() PortCounters {
	pc := s.portCtr.Load()
	mtx, mrx := pc.mcastTx.Load(), pc.mcastRx.Load()
	c := s.dev.Counters()
	r := PortCounters{
		XmitData: c.TxBytes, RcvData: c.RxBytes, XmitPkts: c.TxPackets, RcvPkts: c.RxPackets,
		UnicastXmitPkts: c.TxPackets - min(mtx, c.TxPackets), UnicastRcvPkts: c.RxPackets - min(mrx, c.RxPackets),
		MulticastXmitPkts: mtx, MulticastRcvPkts: mrx,
		RcvErrors: c.RxICRCErrors + c.RxMalformed, XmitDiscards: c.TxErrors, RcvConstraintErrors: c.RxPKeyErrors,
		VL15Dropped: c.VL15Dropped, QP1Dropped: c.QP1Dropped,
	}
	if s.v.fabric != nil {
		r.LinkDowned = s.v.fabric.downs.Load()
	}
	return r
}

// madIfc runs MAD_IFC: the port's SMA answers an SMP the driver hands it
// (rdma.Device.LocalSMP), for a subnet manager on the port itself.
func (s *session) madIfc(c *AdminCmd, a *CmdMADIfcArgs, out *AdminCQE) uint16 {
	if c.Handle != 1 || c.RespLen < MADSize {
		return StEINVAL
	}
	if !s.v.cfg.ib() {
		return StEOPNOTSUPP
	}
	var mad [MADSize]byte
	if err := s.v.ram.ReadAt(mad[:], a.InGPA); err != nil {
		return StEFAULT
	}
	if !s.ramRange(c.RespGPA, MADSize) {
		return StEFAULT
	}
	resp, err := s.dev.LocalSMP(mad[:])
	if err != nil {
		return status(err)
	}
	if resp == nil {
		return StOK
	}
	if st := s.respond(c, resp); st != StOK {
		return st
	}
	out.Out[0] = MADIfcReply
	return StOK
}

// respond writes a query result to the command's response buffer.
func (s *session) respond(c *AdminCmd, b []byte) uint16 {
	if c.RespLen < uint32(len(b)) {
		return StEINVAL
	}
	if err := s.v.ram.WriteAt(b, c.RespGPA); err != nil {
		return StEFAULT
	}
	return StOK
}

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

func put32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

// cqRing checks the ring and dbrec of a CREATE_CQ or RESIZE_CQ, and
// reads a paged ring's page table (CQFPaged, ABI 1.9) with pageList.
// nil pages: a contiguous ring at RingGPA.
func (s *session) cqRing(a *CmdCreateCQArgs) ([]uint64, uint16) {
	if a.Flags&^CQFPaged != 0 || a.Rsvd != 0 || a.DBRecGPA%16 != 0 {
		return nil, StEINVAL
	}
	if !s.ramRange(a.DBRecGPA, 16) {
		return nil, StEFAULT
	}
	bytes := uint64(a.Depth) * cqeSize
	if a.Flags&CQFPaged == 0 {
		if a.RingGPA%64 != 0 {
			return nil, StEINVAL
		}
		if !s.ramRange(a.RingGPA, bytes) {
			return nil, StEFAULT
		}
		return nil, StOK
	}
	n := bytes / CQPageSize
	if bytes%CQPageSize != 0 || n > CQMaxPages || a.RingGPA%8 != 0 {
		return nil, StEINVAL
	}
	return s.pageList(a.RingGPA, n, CQPageSize)
}

func (s *session) createCQ(a *CmdCreateCQArgs, out *AdminCQE) uint16 {
	if !isPow2(a.Depth) || a.Depth > s.lim.maxCQE {
		return StEINVAL
	}
	if int(a.CompVector)+IRQCQBase >= s.v.cfg.Vectors {
		return StEINVAL
	}
	pages, st := s.cqRing(a)
	if st != StOK {
		return st
	}
	cost := cqCost(a.Depth) + int64(len(pages))*8
	if len(s.cqs) >= int(s.lim.maxCQ) || !s.mem.charge(cost) {
		return StENOMEM
	}
	cq, err := s.dev.CreateCQ(int(a.Depth), nil)
	if err != nil {
		s.mem.refund(cost)
		return status(err)
	}
	n := nextHandle(&s.nextCQ, s.cqs)
	g := &gcq{s: s, cqn: n, cq: cq, ring: a.RingGPA, pages: pages, dbrec: a.DBRecGPA, depth: a.Depth,
		vector: IRQCQBase + int(a.CompVector), cost: cost}
	cq.SetSink(g) // the engine writes the guest ring itself
	s.cqs[n] = g
	out.Handle = n
	return StOK
}

// resizeCQ moves CQ cqn to a new ring of a.Depth entries with a new dbrec
// (ib_resize_cq): the completions the guest has not consumed are copied
// to the new ring's entries 0..n-1, its dbrec starts at prod n, cons 0,
// disarmed, and the engine CQ is resized to the same depth. comp_vector
// must stay the same. Nothing changes on an error.
// settleWait bounds how long a resize waits for the engine to run what
// the guest posted: work that waits on the wire (an RC send's ACK)
// completes later whatever the wait.
const settleWait = 100 * time.Millisecond

// settle lets the engine run the work taken from the rings until it has
// nothing it can do at once (UD sends complete as they leave), within
// settleWait; the waiter left behind ends when the engine idles or
// closes.
func (s *session) settle() {
	if s.dev == nil {
		return
	}
	done := make(chan struct{})
	go func(d *rdma.Device) {
		d.WaitIdle()
		close(done)
	}(s.dev)
	select {
	case <-done:
	case <-time.After(settleWait):
	}
}

func (s *session) resizeCQ(cqn uint32, a *CmdCreateCQArgs) uint16 {
	cq, ok := s.cqs[cqn]
	if !ok {
		return StENOENT
	}
	if !isPow2(a.Depth) || a.Depth > s.lim.maxCQE || IRQCQBase+int(a.CompVector) != cq.vector {
		return StEINVAL
	}
	pages, st := s.cqRing(a)
	if st != StOK {
		return st
	}
	// The work the guest posted before this command counts: its WQEs
	// are taken and its completions moved into the ring first, so that
	// what the CQ holds is known (ibv_resize_cq fails below it, and a
	// user-space post reaches the device only through its doorbell).
	if s.live() {
		s.serviceQPs()
		s.settle()
		s.moveCQ(cq)
	}
	// The engine CQ holds what completes from here on: the worker has
	// the ring to itself until the sink is back, then hands the guest
	// the held completions in the new ring (or the old one, on error).
	cq.cq.SetSink(nil)
	defer func() {
		cq.cq.SetSink(cq)
		s.moveCQ(cq)
	}()
	ram := s.v.ram
	cons, err := ram.Load32(cq.dbrec + 4)
	if err != nil {
		return StEFAULT
	}
	pending := cq.prod - cons
	if pending > cq.depth || uint64(pending)+uint64(cq.cq.Len()) > uint64(a.Depth) {
		return StEINVAL // a bad consumer index, or the new ring is too small
	}
	cost := cqCost(a.Depth) + int64(len(pages))*8
	if !s.mem.charge(cost) {
		return StENOMEM
	}
	if err := cq.cq.Resize(int(a.Depth)); err != nil {
		s.mem.refund(cost)
		return status(err)
	}
	s.mem.refund(cq.cost)
	cq.cost = cost
	nr := &gcq{ring: a.RingGPA, pages: pages, depth: a.Depth}
	var e [cqeSize]byte
	for i := uint32(0); i < pending; i++ {
		if ram.ReadAt(e[:], cq.slot(cons+i)) != nil || ram.WriteAt(e[:], nr.slot(i)) != nil {
			return StEFAULT
		}
	}
	ram.Store32(a.DBRecGPA+4, 0)
	ram.Store32(a.DBRecGPA+8, 0)
	ram.Store32(a.DBRecGPA+12, cq.events) // the count goes on (ABI 1.7)
	ram.Store32(a.DBRecGPA, pending)      // release: the entries are in place
	cq.mu.Lock()
	cq.ring, cq.pages, cq.dbrec, cq.depth, cq.prod = a.RingGPA, pages, a.DBRecGPA, a.Depth, pending
	cq.mu.Unlock()
	return StOK
}

func (s *session) createQP(a *CmdCreateQPArgs, out *AdminCQE) uint16 {
	typ := rdma.QPType(a.QPType)
	switch typ {
	case rdma.QPTypeXRCTgt:
		return s.createXRCTgt(a, out)
	}
	ini := typ == rdma.QPTypeXRCIni
	rcqn, srqn := a.RecvCQ, a.SRQ
	if ini { // send side only: recv_cq, srq and the rq_* fields are ignored
		rcqn, srqn = a.SendCQ, 0
	}
	// ABI 1.15: a raw packet QP without a send queue is a receive work
	// queue (ibv_wq); without either queue it is an RSS QP (SET_RSS),
	// which has no CQs either.
	noSQ := typ == rdma.QPTypeRawPacket && a.SQDepth == 0
	rss := noSQ && a.RQDepth == 0
	pd, ok := s.pds[a.PD]
	if !ok {
		return StENOENT
	}
	var scq, rcq *gcq
	if !rss {
		var ok1, ok2 bool
		scq, ok1 = s.cqs[a.SendCQ]
		rcq, ok2 = s.cqs[rcqn]
		if !ok1 || !ok2 {
			return StENOENT
		}
	}
	switch typ {
	case rdma.QPTypeRC, rdma.QPTypeUC, rdma.QPTypeUD, rdma.QPTypeGSI, rdma.QPTypeXRCIni:
	case rdma.QPTypeSMI:
		if !s.v.cfg.ib() {
			return StEOPNOTSUPP // QP0 exists only on an InfiniBand port (as rxe)
		}
	case rdma.QPTypeRawPacket:
		if s.v.cfg.ib() {
			return StEOPNOTSUPP // Ethernet frames need an Ethernet port
		}
		if srqn != 0 {
			return StEINVAL
		}
		if s.nRawQP >= MaxRawQP {
			return StENOMEM
		}
	default:
		return StEOPNOTSUPP // driver types
	}
	var srq *gsrq
	if srqn != 0 {
		if srq, ok = s.srqs[srqn]; !ok {
			return StENOENT
		}
		if srq.xrcd != nil {
			return StEINVAL // an XRC SRQ serves XRC target QPs only
		}
	}
	if st := s.checkSQ(a); !noSQ && st != StOK {
		return st
	}
	if srq == nil && !ini && !rss {
		// The RQ ring; a QP with an SRQ has none (its rq_* fields are
		// ignored).
		if !isPow2(a.RQDepth) || a.RQDepth > s.lim.maxQPWR || a.MaxRecvSGE == 0 || a.MaxRecvSGE > s.lim.maxSGE {
			return StEINVAL
		}
		if a.RQStride%16 != 0 || uint64(a.RQStride) < recvHdrSize+uint64(a.MaxRecvSGE)*sgeSize || a.RQDBRecGPA%8 != 0 {
			return StEINVAL
		}
		if !s.ramRange(a.RQGPA, uint64(a.RQDepth)*uint64(a.RQStride)) || !s.ramRange(a.RQDBRecGPA, 8) {
			return StEFAULT
		}
	}
	attr := rdma.QPInitAttr{SendCQ: scq.engine(), RecvCQ: rcq.engine(), QPType: typ, SQSigAll: a.SQSigAll != 0,
		Cap: rdma.QPCap{MaxSendWR: int(a.SQDepth), MaxRecvWR: int(a.RQDepth), MaxSendSGE: int(a.MaxSendSGE),
			MaxRecvSGE: int(a.MaxRecvSGE), MaxInlineData: int(a.MaxInline)}}
	if srq != nil {
		attr.SRQ = srq.srq
		attr.Cap.MaxRecvWR, attr.Cap.MaxRecvSGE = 0, 0 // the engine ignores them
	}
	if ini {
		attr.RecvCQ = nil
		attr.Cap.MaxRecvWR, attr.Cap.MaxRecvSGE = 0, 0
	}
	if noSQ {
		attr.Cap.MaxSendWR, attr.Cap.MaxSendSGE, attr.Cap.MaxInlineData = 0, 0, 0
	}
	cost := gqpSize + s.dev.QPMemory(attr.Cap)
	if attr.SRQ != nil && attr.SRQ.IsTM() {
		cost += rdma.TMQPMemory()
	}
	if !s.mem.charge(cost) {
		return StENOMEM
	}
	qp, err := s.dev.CreateQP(pd, attr)
	if err != nil {
		s.mem.refund(cost)
		return status(err)
	}
	q := &gqp{qp: qp, typ: typ, pd: a.PD, scq: scq, rcq: rcq, srq: srq, noSQ: noSQ, cost: cost}
	if !noSQ {
		// The guest's indices start where the dbrec says, so a driver
		// may reuse memory without zeroing it.
		sqp, _ := s.v.ram.Load32(a.SQDBRecGPA)
		q.sq, q.sqDB, q.sqDepth, q.sqStride, q.maxSendSGE, q.maxInline, q.sqCons = a.SQGPA, a.SQDBRecGPA,
			a.SQDepth, a.SQStride, a.MaxSendSGE, a.MaxInline, sqp
		s.v.ram.Store32(a.SQDBRecGPA+4, sqp)
	}
	switch {
	case rss:
		q.noRQ = true
	case ini:
		q.noRQ, q.rcq = true, nil
	case srq == nil:
		rqp, _ := s.v.ram.Load32(a.RQDBRecGPA)
		q.rq, q.rqDB, q.rqDepth, q.rqStride, q.maxRecvSGE, q.rqCons = a.RQGPA, a.RQDBRecGPA, a.RQDepth,
			a.RQStride, a.MaxRecvSGE, rqp
		s.v.ram.Store32(a.RQDBRecGPA+4, rqp)
	default:
		srq.users++
	}
	for _, c := range []*gcq{q.scq, q.rcq} {
		if c != nil {
			c.users++
		}
	}
	if typ == rdma.QPTypeRawPacket {
		s.nRawQP++
	}
	s.qps[qp.QPN()] = q
	s.publishQPs()
	out.Handle = qp.QPN()
	return StOK
}

// checkSQ checks the send queue of a CREATE_QP.
func (s *session) checkSQ(a *CmdCreateQPArgs) uint16 {
	if !isPow2(a.SQDepth) || a.SQDepth > s.lim.maxQPWR {
		return StEINVAL
	}
	if a.MaxSendSGE == 0 || a.MaxSendSGE > s.lim.maxSGE || a.MaxInline > s.lim.maxInline {
		return StEINVAL
	}
	if a.SQStride%64 != 0 || uint64(a.SQStride) < sendHdrSize+uint64(a.MaxSendSGE)*sgeSize ||
		uint64(a.SQStride) < sendHdrSize+uint64(a.MaxInline) {
		return StEINVAL
	}
	if a.SQDBRecGPA%8 != 0 {
		return StEINVAL
	}
	if !s.ramRange(a.SQGPA, uint64(a.SQDepth)*uint64(a.SQStride)) || !s.ramRange(a.SQDBRecGPA, 8) {
		return StEFAULT
	}
	return StOK
}

// engine returns the engine CQ of c, or nil for none.
func (c *gcq) engine() *rdma.CQ {
	if c == nil {
		return nil
	}
	return c.cq
}

func (s *session) modifyQP(a *CmdModifyQPArgs) uint16 {
	q, ok := s.qps[a.QPN]
	if !ok {
		return StENOENT
	}
	attr := qpAttrFromABI(&a.Attr)
	if err := q.qp.Modify(&attr, rdma.QPAttrMask(a.AttrMask)); err != nil {
		return status(err)
	}
	if rdma.QPAttrMask(a.AttrMask)&rdma.QPAttrState != 0 && attr.QPState == rdma.QPStateReset {
		// RESET discards posted work; the rings restart at the
		// guest's current producer indices.
		if !q.noSQ {
			q.sqCons, _ = s.v.ram.Load32(q.sqDB)
			s.v.ram.Store32(q.sqDB+4, q.sqCons)
		}
		if q.srq == nil && !q.noRQ {
			q.rqCons, _ = s.v.ram.Load32(q.rqDB)
			s.v.ram.Store32(q.rqDB+4, q.rqCons)
		}
		q.fatal = false
	}
	s.publishQPs()
	return StOK
}

// createSRQ binds an engine SRQ to a receive ring in guest memory.
func (s *session) createSRQ(a *CmdCreateSRQArgs, out *AdminCQE) uint16 {
	pd, ok := s.pds[a.PD]
	if !ok {
		return StENOENT
	}
	var x *gxrcd
	var xcq *gcq
	switch a.SRQType {
	case SRQTBasic:
	case SRQTXRC:
		x, ok = s.xrcds[a.XRCD]
		if !ok {
			return StENOENT
		}
		if xcq, ok = s.cqs[a.CQ]; !ok {
			return StENOENT
		}
	case SRQTTM:
		if xcq, ok = s.cqs[a.CQ]; !ok {
			return StENOENT
		}
		if a.MaxNumTags == 0 || a.MaxNumTags > rdma.TMMaxNumTags || a.MaxOps == 0 || a.MaxOps > rdma.TMMaxOps ||
			!isPow2(a.OpsDepth) || a.OpsDepth < 2*a.MaxOps || a.OpsDBRecGPA%8 != 0 {
			return StEINVAL
		}
		if !s.ramRange(a.OpsRingGPA, uint64(a.OpsDepth)*tmOpSize) || !s.ramRange(a.OpsDBRecGPA, 16) {
			return StEFAULT
		}
	default:
		return StEOPNOTSUPP
	}
	da := s.dev.QueryDevice()
	if !isPow2(a.Depth) || a.Depth > uint32(da.MaxSRQWR) || a.Limit > a.Depth {
		return StEINVAL
	}
	if a.MaxSGE == 0 || a.MaxSGE > uint32(da.MaxSRQSGE) {
		return StEINVAL
	}
	if a.Stride%16 != 0 || uint64(a.Stride) < recvHdrSize+uint64(a.MaxSGE)*sgeSize || a.DBRecGPA%8 != 0 {
		return StEINVAL
	}
	if !s.ramRange(a.RingGPA, uint64(a.Depth)*uint64(a.Stride)) || !s.ramRange(a.DBRecGPA, 8) {
		return StEFAULT
	}
	cost := srqCost(a.Depth, a.MaxSGE)
	if a.SRQType == SRQTTM {
		cost += rdma.TMSRQMemory(int(a.MaxNumTags))
	}
	if !s.mem.charge(cost) {
		return StENOMEM
	}
	sa := rdma.SRQInitAttr{MaxWR: int(a.Depth), MaxSGE: int(a.MaxSGE), Limit: int(a.Limit)}
	if x != nil {
		sa.XRCD, sa.CQ = x.xrcd, xcq.cq
	}
	if a.SRQType == SRQTTM {
		sa.CQ, sa.TM = xcq.cq, &rdma.TMAttr{MaxNumTags: int(a.MaxNumTags), MaxOps: int(a.MaxOps)}
	}
	srq, err := s.dev.CreateSRQ(pd, sa)
	if err != nil {
		s.mem.refund(cost)
		return status(err)
	}
	n := srq.Handle()
	if x != nil && n != srq.Num() {
		// An XRC SRQ's handle is its 24-bit number (the guest's
		// ibv_get_srq_num); past 2^24 handles there is none.
		srq.Destroy()
		s.mem.refund(cost)
		return StENOMEM
	}
	if _, live := s.srqs[n]; live {
		srq.Destroy() // the engine's counter wrapped onto a handle the guest holds
		s.mem.refund(cost)
		return StENOMEM
	}
	prod, _ := s.v.ram.Load32(a.DBRecGPA)
	s.v.ram.Store32(a.DBRecGPA+4, prod)
	q := &gsrq{srqn: n, srq: srq, pd: a.PD, ring: a.RingGPA, db: a.DBRecGPA, depth: a.Depth,
		stride: a.Stride, maxSGE: a.MaxSGE, cons: prod, cost: cost, xrcd: x, cq: xcq}
	if a.SRQType == SRQTTM {
		q.ops, q.opsDB, q.opsDepth = a.OpsRingGPA, a.OpsDBRecGPA, a.OpsDepth
		q.opsCons, _ = s.v.ram.Load32(a.OpsDBRecGPA)
		s.v.ram.Store32(a.OpsDBRecGPA+4, q.opsCons)
		ram, busyAt := s.v.ram, a.OpsDBRecGPA+8
		ram.Store64(busyAt, 0)
		srq.SetTMNotify(func(busy uint64) { ram.Store64(busyAt, busy) })
	}
	s.srqs[n] = q
	if x != nil {
		x.users++
	}
	if xcq != nil {
		xcq.users++
	}
	out.Handle = n
	return StOK
}

// modifySRQ arms the limit and/or resizes the SRQ onto a new ring.
func (s *session) modifySRQ(a *CmdModifySRQArgs) uint16 {
	q, ok := s.srqs[a.SRQN]
	if !ok {
		return StENOENT
	}
	if a.AttrMask&^(SRQMaxWR|SRQLimit) != 0 || a.AttrMask == 0 {
		return StEINVAL
	}
	attr := rdma.SRQAttr{Limit: int(a.Limit)}
	mask := rdma.SRQAttrMask(0)
	if a.AttrMask&SRQLimit != 0 {
		mask |= rdma.SRQAttrLimit
	}
	if a.AttrMask&SRQMaxWR == 0 {
		return status(q.srq.Modify(attr, mask))
	}
	if q.fatal {
		return StEINVAL
	}
	if !isPow2(a.MaxWR) || a.DBRecGPA%8 != 0 {
		return StEINVAL
	}
	if !s.ramRange(a.RingGPA, uint64(a.MaxWR)*uint64(q.stride)) || !s.ramRange(a.DBRecGPA, 8) {
		return StEFAULT
	}
	// Every WQE of the old ring must fit the resized SRQ: the device
	// takes them all before it leaves the old ring.
	prod, err := s.v.ram.Load32(q.db)
	if err != nil || prod-q.cons > q.depth {
		return StEINVAL
	}
	if uint64(q.srq.Len())+uint64(prod-q.cons) > uint64(a.MaxWR) {
		return StEINVAL
	}
	attr.MaxWR = int(a.MaxWR)
	cost := srqCost(a.MaxWR, q.maxSGE)
	if !s.mem.charge(cost) {
		return StENOMEM
	}
	if err := q.srq.Modify(attr, mask|rdma.SRQAttrMaxWR); err != nil {
		s.mem.refund(cost)
		return status(err)
	}
	s.mem.refund(q.cost)
	q.cost = cost
	s.takeSRQ(q, prod)
	if q.fatal || q.cons != prod {
		return StEINVAL // a malformed WQE in the old ring (SRQ_ERR posted)
	}
	newProd, _ := s.v.ram.Load32(a.DBRecGPA)
	s.v.ram.Store32(a.DBRecGPA+4, newProd)
	q.ring, q.db, q.depth, q.cons, q.blocked = a.RingGPA, a.DBRecGPA, a.MaxWR, newProd, false
	return StOK
}

// setAddr gives the engine the guest's MAC (the configured one: any
// other is refused), path MTU limit and IPv4 addresses (on a vNIC with
// allowed addresses, only those: EACCES for any other, and nothing
// changes). A RoCE port whose MAC and MTU stay changes its IPv4 GIDs in
// place, while PDs, QPs and AHs exist (the host added or removed an
// address); another MAC or MTU needs a new engine, which only a device
// without objects gets (EBUSY otherwise).
func (s *session) setAddr(a *CmdSetAddrArgs) uint16 {
	if a.NIPv4 > 4 {
		return StEINVAL
	}
	mtu := int(a.MTU)
	if mtu == 0 {
		mtu = s.v.cfg.MTU
	}
	if _, ok := rdma.MTUFromBytes(mtu); !ok {
		return StEINVAL
	}
	var ips []netip.Addr
	for i := range a.NIPv4 {
		ip := netip.AddrFrom4(a.IPv4[i])
		if s.v.pins != nil && !s.v.pins.allows(ip) {
			// Port security: the engine would send RoCEv2 from that
			// address, which a peer's QP connected to its owner takes
			// as its owner's (rdma's fromPeer).
			s.v.stats.setAddrRefused.Add(1)
			return StEACCES
		}
		ips = append(ips, ip)
	}
	mac := a.MAC
	if mac == ([6]byte{}) {
		mac = s.v.cfg.MAC
	}
	if mac != s.v.cfg.MAC {
		return StEINVAL // the host sets the vNIC's MAC; the guest sends as no other
	}
	if mac == s.devMAC && mtu == s.devMTU && !s.v.cfg.ib() {
		return status(s.dev.SetIPv4(ips))
	}
	if len(s.pds)+len(s.cqs) > 0 {
		return StEBUSY // a new MAC or MTU: the engine's paths were built with the old ones
	}
	if err := s.newDevice(mac, ips, mtu); err != nil {
		return status(err)
	}
	s.hdr.MAC = mac
	return StOK
}

func ahFromABI(a *AHAttr) rdma.AHAttr {
	return rdma.AHAttr{
		GRH: rdma.GlobalRoute{DGID: a.DGID, FlowLabel: a.FlowLabel, SGIDIndex: a.SGIDIndex,
			HopLimit: a.HopLimit, TrafficClass: a.TrafficClass},
		DLID: a.DLID, SL: a.SL, SrcPathBits: a.SrcPathBits, StaticRate: a.StaticRate,
		IsGlobal: a.IsGlobal != 0, PortNum: a.PortNum, DMAC: a.DMAC,
	}
}

func ahToABI(a rdma.AHAttr) AHAttr {
	r := AHAttr{DGID: a.GRH.DGID, FlowLabel: a.GRH.FlowLabel, SGIDIndex: a.GRH.SGIDIndex,
		HopLimit: a.GRH.HopLimit, TrafficClass: a.GRH.TrafficClass, SL: a.SL, DMAC: a.DMAC, DLID: a.DLID,
		PortNum: a.PortNum, StaticRate: a.StaticRate, SrcPathBits: a.SrcPathBits}
	if a.IsGlobal {
		r.IsGlobal = 1
	}
	return r
}

func qpAttrFromABI(a *QPAttr) rdma.QPAttr {
	return rdma.QPAttr{QPState: rdma.QPState(a.QPState), CurQPState: rdma.QPState(a.CurQPState),
		PathMTU: rdma.MTU(a.PathMTU), QKey: a.QKey, RQPSN: a.RQPSN, SQPSN: a.SQPSN, DestQPNum: a.DestQPNum,
		QPAccessFlags: rdma.Access(a.QPAccessFlags), AHAttr: ahFromABI(&a.AH), PKeyIndex: a.PKeyIndex,
		MaxRDAtomic: a.MaxRDAtomic, MaxDestRDAtomic: a.MaxDestRDAtomic, MinRNRTimer: a.MinRNRTimer,
		PortNum: a.PortNum, Timeout: a.Timeout, RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry}
}

func qpAttrToABI(a rdma.QPAttr) QPAttr {
	return QPAttr{QPState: uint32(a.QPState), CurQPState: uint32(a.CurQPState), PathMTU: uint32(a.PathMTU),
		QKey: a.QKey, RQPSN: a.RQPSN, SQPSN: a.SQPSN, DestQPNum: a.DestQPNum,
		QPAccessFlags: uint32(a.QPAccessFlags), PKeyIndex: a.PKeyIndex, PortNum: a.PortNum, Timeout: a.Timeout,
		RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry, MinRNRTimer: a.MinRNRTimer, MaxRDAtomic: a.MaxRDAtomic,
		MaxDestRDAtomic: a.MaxDestRDAtomic, SQDraining: a.SQDraining, AH: ahToABI(a.AHAttr)}
}

// allocXRCD allocates an XRC domain (ibv_open_xrcd), charged to the
// guest's budget.
func (s *session) allocXRCD(out *AdminCQE) uint16 {
	cost := xrcdCost()
	if !s.mem.charge(cost) {
		return StENOMEM
	}
	x, err := s.dev.AllocXRCD()
	if err != nil {
		s.mem.refund(cost)
		return status(err)
	}
	if _, live := s.xrcds[x.Handle()]; live {
		x.Dealloc() // the engine's counter wrapped onto a handle the guest holds
		s.mem.refund(cost)
		return StENOMEM
	}
	s.xrcds[x.Handle()] = &gxrcd{xrcd: x, cost: cost}
	out.Handle = x.Handle()
	return StOK
}

func (s *session) deallocXRCD(h uint32) uint16 {
	x, ok := s.xrcds[h]
	if !ok {
		return StENOENT
	}
	if x.users > 0 {
		return StEBUSY
	}
	if err := x.xrcd.Dealloc(); err != nil {
		return status(err)
	}
	delete(s.xrcds, h)
	s.mem.refund(x.cost)
	return StOK
}

// createXRCTgt creates an XRC target QP: no PD, CQs, SRQ or rings (those
// fields are ignored), only its domain (IB_QPT_XRC_TGT).
func (s *session) createXRCTgt(a *CmdCreateQPArgs, out *AdminCQE) uint16 {
	x, ok := s.xrcds[a.XRCD]
	if !ok {
		return StENOENT
	}
	cost := gqpSize + s.dev.QPMemory(rdma.QPCap{})
	if !s.mem.charge(cost) {
		return StENOMEM
	}
	qp, err := s.dev.CreateQP(nil, rdma.QPInitAttr{QPType: rdma.QPTypeXRCTgt, XRCD: x.xrcd})
	if err != nil {
		s.mem.refund(cost)
		return status(err)
	}
	x.users++
	s.qps[qp.QPN()] = &gqp{qp: qp, typ: rdma.QPTypeXRCTgt, xrcd: x, noSQ: true, noRQ: true, cost: cost}
	s.publishQPs()
	out.Handle = qp.QPN()
	return StOK
}

// releaseUsers drops the QP's uses of its CQs, SRQ and XRC domain.
func (q *gqp) releaseUsers() {
	for _, c := range []*gcq{q.scq, q.rcq} {
		if c != nil {
			c.users--
		}
	}
	if q.srq != nil {
		q.srq.users--
	}
	if q.xrcd != nil {
		q.xrcd.users--
	}
}
