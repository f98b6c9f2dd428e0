package device

import (
	"github.com/PacketFive/hinic/internal/rdma"
)

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
	// ABI 1.16: a raw packet QP without a send queue is a receive work
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
		if !s.ramRange(a.RQGPA, uint64(a.RQDepth)*uint64(a.RQStride)) || !s.ramRange(a.RQDBRecGPA, s.wqDBRecLen()) {
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
	q := &gqp{typ: typ, pd: a.PD, scq: scq, rcq: rcq, srq: srq, noSQ: noSQ, cost: cost}
	if srq == nil && !ini && !rss {
		if low := q.rqNotify.init(s, a.RQDBRecGPA, a.RQDepth); low > 0 {
			attr.RecvLow, attr.OnRecvLow = low, func() { q.rqNotify.want(s) }
		}
		attr.OnRecvEmpty = func() bool { return s.refillRQ(q) }
	}
	qp, err := s.dev.CreateQP(pd, attr)
	if err != nil {
		s.mem.refund(cost)
		return status(err)
	}
	q.qp = qp
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
			q.rqNotify.off(s) // the engine's RQ is empty again
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
	if !s.ramRange(a.RingGPA, uint64(a.Depth)*uint64(a.Stride)) || !s.ramRange(a.DBRecGPA, s.wqDBRecLen()) {
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
	q := &gsrq{pd: a.PD, ring: a.RingGPA, db: a.DBRecGPA, depth: a.Depth, stride: a.Stride, maxSGE: a.MaxSGE,
		cost: cost, xrcd: x, cq: xcq}
	if a.SRQType == SRQTTM {
		sa.CQ, sa.TM = xcq.cq, &rdma.TMAttr{MaxNumTags: int(a.MaxNumTags), MaxOps: int(a.MaxOps)}
	} else {
		// A TM SRQ's receives are also tag operations' buffers, fetched
		// in order with its ops ring: it rings, and the engine waits.
		if low := q.notify.init(s, a.DBRecGPA, a.Depth); low > 0 {
			sa.Low, sa.OnLow = low, func() { q.notify.want(s) }
		}
		sa.OnEmpty = func() bool { return s.refillSRQ(q) }
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
	q.srqn, q.srq, q.cons = n, srq, prod
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
		if a.Limit != 0 && q.notify.at.Load() != 0 {
			// The limit event counts what the guest posted, so the
			// engine must hold it all before the limit is armed, and
			// from then on every doorbell again.
			q.notify.off(s)
			if !q.fatal {
				s.fetchSRQ(q)
			}
		}
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
	if !s.ramRange(a.RingGPA, uint64(a.MaxWR)*uint64(q.stride)) || !s.ramRange(a.DBRecGPA, s.wqDBRecLen()) {
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
	if q.notify.at.Load() != 0 {
		q.notify.off(s) // the old ring's word
		q.notify.at.Store(a.DBRecGPA + 8)
		s.v.ram.Store32(a.DBRecGPA+8, 0)
	}
	return StOK
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
