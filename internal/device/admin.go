package device

import (
	"errors"
	"net/netip"
	"sync/atomic"
	"unsafe"

	"github.com/PacketFive/hinic/internal/ibagent"
	"github.com/PacketFive/hinic/internal/proto"
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
	case CmdQueryClock:
		if c.Handle != 0 {
			return StEINVAL
		}
		r := Clock{RealtimeNS: deviceClock()}
		copy(out.Out[:], AsBytes(&r))
		return StOK
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
	return portCountersOf(s.dev, s.portCtr.Load(), s.v.fabric)
}

// portCountersOf are the counters of port 1 of dev, whose fabric port
// counts in pc, on link l (nil without a fabric port).
func portCountersOf(dev *rdma.Device, pc *portCounters, l *fabricLink) PortCounters {
	mtx, mrx := pc.mcastTx.Load(), pc.mcastRx.Load()
	c := dev.Counters()
	r := PortCounters{
		XmitData: c.TxBytes, RcvData: c.RxBytes, XmitPkts: c.TxPackets, RcvPkts: c.RxPackets,
		UnicastXmitPkts: c.TxPackets - min(mtx, c.TxPackets), UnicastRcvPkts: c.RxPackets - min(mrx, c.RxPackets),
		MulticastXmitPkts: mtx, MulticastRcvPkts: mrx,
		RcvErrors: c.RxICRCErrors + c.RxMalformed, XmitDiscards: c.TxErrors, RcvConstraintErrors: c.RxPKeyErrors,
		VL15Dropped: c.VL15Dropped, QP1Dropped: c.QP1Dropped,
	}
	if l != nil {
		r.LinkDowned = l.downs.Load()
	}
	return r
}

// pmaTotals are dev's port counters as its PMA's totals.
func pmaTotals(dev *rdma.Device, pc *portCounters, l *fabricLink) ibagent.PortTotals {
	r := portCountersOf(dev, pc, l)
	return ibagent.PortTotals{
		XmitData: r.XmitData, RcvData: r.RcvData, XmitPkts: r.XmitPkts, RcvPkts: r.RcvPkts,
		UnicastXmitPkts: r.UnicastXmitPkts, UnicastRcvPkts: r.UnicastRcvPkts,
		MulticastXmitPkts: r.MulticastXmitPkts, MulticastRcvPkts: r.MulticastRcvPkts,
		RcvErrors: r.RcvErrors, XmitDiscards: r.XmitDiscards, RcvConstraintErrors: r.RcvConstraintErrors,
		LinkDowned: r.LinkDowned, VL15Dropped: r.VL15Dropped, QP1Dropped: r.QP1Dropped,
	}
}

// madIfc runs MAD_IFC: the port's PMA answers a PerfMgt MAD on either
// link layer (rdma.Device.LocalPerfMgt, ABI 1.15), and on InfiniBand the
// port's SMA answers an SMP (rdma.Device.LocalSMP), for a subnet manager
// on the port itself; an Ethernet port has no SMA.
func (s *session) madIfc(c *AdminCmd, a *CmdMADIfcArgs, out *AdminCQE) uint16 {
	if c.Handle != 1 || c.RespLen < MADSize {
		return StEINVAL
	}
	var mad [MADSize]byte
	if err := s.v.ram.ReadAt(mad[:], a.InGPA); err != nil {
		return StEFAULT
	}
	if !s.ramRange(c.RespGPA, MADSize) {
		return StEFAULT
	}
	local := s.dev.LocalSMP
	switch {
	case proto.MAD(mad[:]).MgmtClass() == proto.MgmtClassPerfMgt:
		local = s.dev.LocalPerfMgt
	case !s.v.cfg.ib():
		return StEOPNOTSUPP
	}
	resp, err := local(mad[:])
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

func put32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
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
