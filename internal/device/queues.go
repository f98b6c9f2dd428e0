package device

import (
	"errors"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
)

// serviceQPs takes the work the guest posted on every SRQ and on every
// QP's SQ and RQ (doorbell HICAIN_DB_QP carries no queue number; the
// rings' producer indices in guest memory say which have work). SRQs go
// first so that a SEND the SQs trigger finds the receives posted with it.
func (s *session) serviceQPs() {
	for _, q := range s.srqs {
		if !q.fatal {
			s.serviceSRQ(q)
		}
	}
	for _, q := range s.qps {
		if q.fatal {
			continue
		}
		s.serviceRQ(q)
		s.serviceSQ(q)
	}
}

// qpFatal moves a QP whose rings the guest broke to ERR (its posted work
// flushes) and tells the guest through the event queue.
func (s *session) qpFatal(q *gqp, reason uint32) {
	s.v.stats.wqeErrors.Add(1)
	q.fatal = true
	_ = q.qp.Modify(&rdma.QPAttr{QPState: rdma.QPStateErr}, rdma.QPAttrState)
	s.postEvent(EvQPFatal, q.qp.QPN(), reason)
}

func (s *session) serviceSQ(q *gqp) {
	if q.noSQ {
		return
	}
	ram := s.v.ram
	prod, err := ram.Load32(q.sqDB)
	if err != nil {
		s.qpFatal(q, QPFatalRing)
		return
	}
	if prod == q.sqCons && !q.sqBlocked {
		return // nothing posted: the common case of a doorbell for another queue
	}
	if prod-q.sqCons > q.sqDepth {
		s.qpFatal(q, QPFatalSQIndex)
		return
	}
	sc := &s.scratch
	sges, raw := sc.sges[:], sc.raw[:]
	q.sqBlocked = false
	for q.sqCons != prod {
		if !q.qp.SendRoom() {
			// More WRs outstanding than the QP holds: leave the WQE in
			// the ring and retry when completions free room. Say so
			// before looking again: a completion from now on wakes the
			// worker, one before made the room this finds.
			s.blocked.Store(true)
			if !q.qp.SendRoom() {
				q.sqBlocked = true
				break
			}
		}
		at := q.sq + uint64(q.sqCons&(q.sqDepth-1))*uint64(q.sqStride)
		w := &sc.send
		if err := ram.ReadAt(AsBytes(w), at); err != nil {
			s.qpFatal(q, QPFatalRing)
			return
		}
		wr := &sc.sendWR[0]
		*wr = rdma.SendWR{WRID: w.WRID, Opcode: rdma.WROpcode(w.Opcode),
			SendFlags: rdma.SendFlags(w.SendFlags &^ SendAV), ImmData: w.ImmData, RemoteAddr: w.RemoteAddr,
			RKey: w.RKey, CompareAdd: w.CompareAdd, Swap: w.Swap}
		if wr.Opcode == rdma.WRBindMW {
			// ABI 1.10: the bind's operands in the header (see
			// HICAIN_WR_BIND_MW); the engine checks them when the WR
			// executes and completes a bad one with MW_BIND_ERR.
			if q.datagram() {
				s.badSend(q, w)
				continue
			}
			wr.Bind = rdma.MWBind{MWKey: w.RKey, NewRKey: w.ImmData, LKey: uint32(w.Swap),
				Addr: w.RemoteAddr, Length: w.CompareAdd, Access: rdma.Access(w.Swap >> 32)}
		}
		if q.typ == rdma.QPTypeXRCIni {
			wr.RemoteSRQN = w.RemoteSRQN
		}
		data := at + sendHdrSize // the SGEs or the inline data
		room := uint64(q.sqStride) - sendHdrSize
		var av *WQEAV // the address vector of a SendAV WQE
		if w.SendFlags&SendAV != 0 {
			if !q.datagram() {
				// Connected QPs have their address vector in the QP.
				s.badSend(q, w)
				continue
			}
			// A send stride is at least 128 bytes (a multiple of 64
			// with room for one SGE), so the AV fits; the data after it
			// is checked against what is left.
			av = &sc.av
			if err := ram.ReadAt(AsBytes(av), data); err != nil {
				s.qpFatal(q, QPFatalRing)
				return
			}
			data, room = data+wqeAVSize, room-wqeAVSize
		}
		if q.datagram() {
			// A datagram is a SEND through an address vector of the
			// QP's PD: an AH handle, or (SendAV) the vector in the WQE.
			// Anything else completes with LOC_QP_OP_ERR, as rxe
			// answers a WQE without a usable address vector or with an
			// opcode UD does not have.
			a, ok := s.ahs[w.AH]
			if (av == nil && (!ok || a.pd != q.pd)) || (wr.Opcode != rdma.WRSend && wr.Opcode != rdma.WRSendWithImm) {
				s.badSend(q, w)
				continue
			}
			if av == nil {
				wr.AH = a.ah
			}
			wr.RemoteQPN, wr.RemoteQKey = w.RemoteQPN, w.RemoteQKey
		}
		if wr.SendFlags&rdma.SendInline != 0 {
			// Inline data sits in the WQE after the header (and the
			// AV); the engine copies it from guest memory now.
			if w.InlineLen > q.maxInline || uint64(w.InlineLen) > room {
				s.qpFatal(q, QPFatalWQE)
				return
			}
			if w.InlineLen > 0 {
				sges[0] = rdma.SGE{Addr: data, Length: w.InlineLen}
				wr.SGList = sges[:1]
			}
		} else {
			n := uint32(w.NumSGE)
			if n > q.maxSendSGE || n > uint32(len(sges)) || uint64(n)*sgeSize > room {
				s.qpFatal(q, QPFatalWQE)
				return
			}
			if err := ram.ReadAt(raw[:n*16], data); err != nil {
				s.qpFatal(q, QPFatalRing)
				return
			}
			for i := range n {
				e := (*SGE)(unsafe.Pointer(&raw[i*16]))
				sges[i] = rdma.SGE{Addr: e.Addr, Length: e.Length, LKey: e.LKey}
			}
			wr.SGList = sges[:n]
		}
		var avAH *rdma.AH
		if av != nil {
			// An AH for this request only, checked as CREATE_AH checks
			// one (an invalid vector is a bad AH handle).
			if avAH, err = s.dev.CreateAH(s.pds[q.pd], ahFromABI(&av.Attr)); err != nil {
				s.badSend(q, w)
				continue
			}
			wr.AH = avAH
		}
		// The WQE is consumed: say so before the engine has it. Its
		// completion can reach the guest's CQ (the CQ sink) before
		// PostSend returns, and the provider counts its SQ's room by
		// this index: published later, a process that polled the
		// completion could find its SQ full.
		q.sqCons++
		ram.Store32(q.sqDB+4, q.sqCons)
		err := q.qp.PostSend(sc.sendWR[:])
		if avAH != nil {
			// The posted request keeps the AH's frame template: the
			// engine's WQE points at the AH, and destroying an AH only
			// marks it and drops its PD reference (the QP holds the PD
			// too). A request left in the ring gets a new AH when it is
			// retried.
			avAH.Destroy()
		}
		if err != nil {
			// The engine refused the request (opcode, state, length; it
			// had room, this being its only poster): complete it with an
			// error as hardware would.
			s.v.stats.wqeErrors.Add(1)
			st := rdma.WCLocQPOpErr
			if errors.Is(err, rdma.ErrInvalid) {
				st = rdma.WCLocLenErr
			}
			s.errorCQE(q.scq, rdma.WC{WRID: w.WRID, Status: st, Opcode: wcOpcodeOf(wr.Opcode), QPNum: q.qp.QPN()})
		}
	}
}

// datagram reports whether q sends datagrams: UD, GSI (QP1) or SMI (QP0).
func (q *gqp) datagram() bool {
	return q.typ == rdma.QPTypeUD || q.typ == rdma.QPTypeGSI || q.typ == rdma.QPTypeSMI
}

// badSend completes a send WQE the device cannot execute (no usable
// address vector, an opcode the QP does not have) with LOC_QP_OP_ERR and
// moves past it; the QP carries on.
func (s *session) badSend(q *gqp, w *SendWQE) {
	s.v.stats.wqeErrors.Add(1)
	q.sqCons++
	s.v.ram.Store32(q.sqDB+4, q.sqCons) // before the completion (see serviceSQ)
	s.errorCQE(q.scq, rdma.WC{WRID: w.WRID, Status: rdma.WCLocQPOpErr, Opcode: wcOpcodeOf(rdma.WROpcode(w.Opcode)),
		QPNum: q.qp.QPN()})
}

func wcOpcodeOf(op rdma.WROpcode) rdma.WCOpcode {
	switch op {
	case rdma.WRRDMAWrite, rdma.WRRDMAWriteWithImm:
		return rdma.WCRDMAWrite
	case rdma.WRRDMARead:
		return rdma.WCRDMARead
	case rdma.WRAtomicCmpAndSwp:
		return rdma.WCCompSwap
	case rdma.WRAtomicFetchAndAdd:
		return rdma.WCFetchAdd
	case rdma.WRBindMW:
		return rdma.WCBindMW
	case rdma.WRLocalInv:
		return rdma.WCLocalInv
	case rdma.WRAtomicWrite:
		return rdma.WCAtomicWrite
	default:
		return rdma.WCSend
	}
}

func (s *session) serviceRQ(q *gqp) {
	if q.srq != nil || q.noRQ {
		return
	}
	s.fetchRQ(q, false)
	q.rqNotify.settle(s, q.qp.RecvHeld, q.rqReady)
}

// rqReady reports whether the QP's RQ may go without doorbells: the QP
// takes receives and flushes none (recvnotify.go).
func (q *gqp) rqReady() bool {
	st := q.qp.State()
	return !q.fatal && st != rdma.QPStateReset && st != rdma.QPStateErr
}

// fetchRQ takes the receive WQEs the guest posted on the QP's RQ ring.
// From the engine's goroutine (engine, refillRQ) it must not move the
// QP to ERR, which waits for the engine: a broken ring or a WQE the
// engine refuses stops the fetch there and leaves it to the epoll
// goroutine, which a kick sends to fetch again and finds the same.
func (s *session) fetchRQ(q *gqp, engine bool) {
	ram := s.v.ram
	prod, err := ram.Load32(q.rqDB)
	if err != nil {
		s.rqFault(q, engine, QPFatalRing)
		return
	}
	if prod == q.rqCons && !q.rqBlocked {
		return
	}
	if prod-q.rqCons > q.rqDepth {
		s.rqFault(q, engine, QPFatalRQIndex)
		return
	}
	sc := &s.scratch
	sges, raw := sc.sges[:], sc.raw[:]
	q.rqBlocked = false
	for q.rqCons != prod {
		if !q.qp.RecvRoom() {
			s.blocked.Store(true) // as in serviceSQ
			if !q.qp.RecvRoom() {
				q.rqBlocked = true
				break
			}
		}
		at := q.rq + uint64(q.rqCons&(q.rqDepth-1))*uint64(q.rqStride)
		w := &sc.recv
		if err := ram.ReadAt(AsBytes(w), at); err != nil {
			s.rqFault(q, engine, QPFatalRing)
			return
		}
		n := w.NumSGE
		if n > q.maxRecvSGE || n > uint32(len(sges)) {
			s.rqFault(q, engine, QPFatalWQE)
			return
		}
		if err := ram.ReadAt(raw[:n*16], at+recvHdrSize); err != nil {
			s.rqFault(q, engine, QPFatalRing)
			return
		}
		for i := range n {
			e := (*SGE)(unsafe.Pointer(&raw[i*16]))
			sges[i] = rdma.SGE{Addr: e.Addr, Length: e.Length, LKey: e.LKey}
		}
		sc.recvWR[0] = rdma.RecvWR{WRID: w.WRID, SGList: sges[:n]}
		q.rqCons++
		ram.Store32(q.rqDB+4, q.rqCons) // before a completion can use it (see serviceSQ)
		if err := q.qp.PostRecv(sc.recvWR[:]); err != nil {
			s.v.stats.wqeErrors.Add(1)
			s.errorCQE(q.rcq, rdma.WC{WRID: w.WRID, Status: rdma.WCLocQPOpErr, Opcode: rdma.WCRecv,
				QPNum: q.qp.QPN()})
		}
	}
}

// rqFault is fetchRQ's broken ring: QP fatal, or from the engine's
// goroutine a kick that has the epoll goroutine find it.
func (s *session) rqFault(q *gqp, engine bool, reason uint32) {
	if engine {
		s.kickQP()
		return
	}
	s.qpFatal(q, reason)
}

// refillRQ is the engine's OnRecvEmpty: a message found the engine's RQ
// empty. While s.work is free it fetches what the guest posted and the
// device has not taken (no doorbell asked for it, or the epoll goroutine
// has not run it yet), so the message is taken rather than answered
// with an RNR NAK (RC) or lost (UD). It reports whether it took any.
func (s *session) refillRQ(q *gqp) bool {
	return s.refill(func() bool {
		if q.fatal {
			return false
		}
		before := q.rqCons
		s.fetchRQ(q, true)
		return q.rqCons != before
	})
}

// refillSRQ is refillRQ for an SRQ (its OnEmpty).
func (s *session) refillSRQ(q *gsrq) bool {
	return s.refill(func() bool {
		if q.fatal {
			return false
		}
		before := q.cons
		s.fetchSRQ(q)
		return q.cons != before
	})
}

// refill runs fetch, which reports whether it took a WQE, under s.work
// when no one holds it: the engine's goroutine must not wait for the
// epoll goroutine, which may be waiting for the engine.
func (s *session) refill(fetch func() bool) bool {
	if !s.work.TryLock() {
		return false
	}
	defer s.work.Unlock()
	if !s.live() || !fetch() {
		return false
	}
	s.v.stats.recvRefills.Add(1)
	return true
}

// srqFatal stops taking WQEs from an SRQ whose ring the guest broke and
// tells it with SRQ_ERR. The WQEs the engine holds stay usable.
func (s *session) srqFatal(q *gsrq, reason uint32) {
	s.v.stats.wqeErrors.Add(1)
	q.fatal = true
	s.postEvent(EvSRQErr, q.srqn, reason)
}

// serviceSRQ takes the receive WQEs the guest posted on an SRQ ring,
// and on a TM SRQ first the tag operations of its ops ring.
func (s *session) serviceSRQ(q *gsrq) {
	if q.ops != 0 && !s.serviceTMOps(q) {
		return
	}
	s.fetchSRQ(q)
	q.notify.settle(s, q.srq.Held, q.ready)
}

// fetchSRQ takes the receive WQEs the guest posted on an SRQ ring. A
// broken ring is SRQ_ERR, an event nothing waits for, so any goroutine
// may fetch (the engine's too: refillSRQ).
func (s *session) fetchSRQ(q *gsrq) {
	prod, err := s.v.ram.Load32(q.db)
	if err != nil {
		s.srqFatal(q, QPFatalRing)
		return
	}
	s.takeSRQ(q, prod)
}

// ready reports whether the SRQ may go without doorbells: the guest did
// not break its ring, and no limit is armed (the limit event counts
// every WQE the guest posted, so the engine must hold them all).
func (q *gsrq) ready() bool {
	return !q.fatal && q.srq.Query().Limit == 0
}

// tmOpSize is sizeof(struct hicain_tm_op_wqe).
const tmOpSize = uint64(unsafe.Sizeof(TMOpWQE{}))

// serviceTMOps executes the operations the guest posted on a TM SRQ's
// ops ring (ABI 1.13), in order; the engine completes them on the SRQ's
// CQ. A producer index that moved past the ring, an unreadable ring or
// an unknown opcode is SRQ_ERR, as for the receive ring. It reports
// false then.
func (s *session) serviceTMOps(q *gsrq) bool {
	ram := s.v.ram
	prod, err := ram.Load32(q.opsDB)
	if err != nil {
		s.srqFatal(q, QPFatalRing)
		return false
	}
	if prod-q.opsCons > q.opsDepth {
		s.srqFatal(q, QPFatalRQIndex)
		return false
	}
	var w TMOpWQE
	var sge [1]rdma.SGE
	for q.opsCons != prod {
		at := q.ops + uint64(q.opsCons&(q.opsDepth-1))*tmOpSize
		if err := ram.ReadAt(AsBytes(&w), at); err != nil {
			s.srqFatal(q, QPFatalRing)
			return false
		}
		op := rdma.TMOp{WRID: w.WRID, Opcode: rdma.TMOpcode(w.Opcode), Flags: rdma.TMOpFlags(w.Flags),
			UnexpectedCnt: w.UnexpectedCnt, Handle: w.Handle, RecvWRID: w.RecvWRID, Tag: w.Tag, Mask: w.Mask}
		if w.SGE.Length != 0 {
			sge[0] = rdma.SGE{Addr: w.SGE.Addr, Length: w.SGE.Length, LKey: w.SGE.LKey}
			op.SGList = sge[:]
		}
		if err := q.srq.PostOps([]rdma.TMOp{op}); err != nil {
			s.srqFatal(q, QPFatalWQE)
			return false
		}
		// After the operation, unlike an SQ's cons: the handles in use
		// (TMDBRec.Busy) are stored before the guest sees it taken.
		// The ring holds twice max_ops, so a completion seen before
		// the slot is free never leaves the poster without room.
		q.opsCons++
		ram.Store32(q.opsDB+4, q.opsCons)
	}
	return true
}

// takeSRQ moves the WQEs between the SRQ's cons and prod into the engine
// SRQ, with the checks of an RQ: index range, SGE count, ring readable.
func (s *session) takeSRQ(q *gsrq, prod uint32) {
	ram := s.v.ram
	if prod == q.cons && !q.blocked {
		return
	}
	if prod-q.cons > q.depth {
		s.srqFatal(q, QPFatalRQIndex)
		return
	}
	sc := &s.scratch
	sges, raw := sc.sges[:], sc.raw[:]
	q.blocked = false
	for q.cons != prod {
		if !q.srq.Room() {
			// The engine SRQ holds max_wr WRs: the rest wait in the ring
			// until QPs take some.
			s.blocked.Store(true) // as in serviceSQ
			if !q.srq.Room() {
				q.blocked = true
				break
			}
		}
		at := q.ring + uint64(q.cons&(q.depth-1))*uint64(q.stride)
		w := &sc.recv
		if err := ram.ReadAt(AsBytes(w), at); err != nil {
			s.srqFatal(q, QPFatalRing)
			return
		}
		n := w.NumSGE
		if n > q.maxSGE || n > uint32(len(sges)) {
			s.srqFatal(q, QPFatalWQE)
			return
		}
		if err := ram.ReadAt(raw[:n*16], at+recvHdrSize); err != nil {
			s.srqFatal(q, QPFatalRing)
			return
		}
		for i := range n {
			e := (*SGE)(unsafe.Pointer(&raw[i*16]))
			sges[i] = rdma.SGE{Addr: e.Addr, Length: e.Length, LKey: e.LKey}
		}
		sc.recvWR[0] = rdma.RecvWR{WRID: w.WRID, SGList: sges[:n]}
		q.cons++
		ram.Store32(q.db+4, q.cons) // before a completion can use it (see serviceSQ)
		if err := q.srq.PostRecv(sc.recvWR[:]); err != nil {
			s.srqFatal(q, QPFatalWQE)
			return
		}
	}
}

// errorCQE writes a completion the device made itself (a request the
// engine refused) to a guest CQ (worker).
func (s *session) errorCQE(cq *gcq, wc rdma.WC) {
	cq.mu.Lock()
	ok := s.writeCQEs(cq, unsafe.Slice(&wc, 1))
	s.notifyCQ(cq)
	cq.mu.Unlock()
	if !ok {
		s.v.stats.cqOverflows.Add(1)
		s.postEvent(EvCQErr, cq.cqn, CQErrOverrun)
	}
}

// writeCQEs appends completions to the guest ring, reporting false when
// there is no room for all of them; cq.mu is held. It allocates nothing.
func (s *session) writeCQEs(cq *gcq, wcs []rdma.WC) bool {
	ram := s.v.ram
	cons, err := ram.Load32(cq.dbrec + 4)
	if err != nil {
		return false
	}
	var e CQE
	// One stamp for the batch: the engine finished these together.
	ts := deviceClock()
	for i := range wcs {
		wc := &wcs[i]
		if cq.prod-cons >= cq.depth {
			return false
		}
		if wc.Opcode >= rdma.WCTMAdd && wc.Opcode <= rdma.WCTMNoTag {
			// ABI 1.13: the tag where the RC-irrelevant UD fields are.
			*(*CQETM)(unsafe.Pointer(&e)) = CQETM{WRID: wc.WRID, Status: uint32(wc.Status), Opcode: uint32(wc.Opcode),
				VendorErr: wc.VendorErr, ByteLen: wc.ByteLen, ImmData: wc.TMAppCtx, QPNum: wc.QPNum, SrcQP: wc.SrcQP,
				WCFlags: uint32(wc.WCFlags), Tag: wc.Tag, Timestamp: ts, TMHandle: wc.TMHandle}
		} else {
			e = CQE{WRID: wc.WRID, Status: uint32(wc.Status), Opcode: uint32(wc.Opcode), VendorErr: wc.VendorErr,
				ByteLen: wc.ByteLen, ImmData: wc.ImmData, QPNum: wc.QPNum, SrcQP: wc.SrcQP, WCFlags: uint32(wc.WCFlags),
				PKeyIndex: wc.PKeyIndex, SLID: wc.SLID, SL: wc.SL, DLIDPathBits: wc.DLIDPathBits, Timestamp: ts}
		}
		if err := ram.WriteAt(AsBytes(&e), cq.slot(cq.prod)); err != nil {
			return false
		}
		cq.prod++
	}
	ram.Store32(cq.dbrec, cq.prod)
	return true
}

// notifyCQ raises the CQ's vector if the guest armed it and there are
// completions it has not consumed; cq.mu is held.
func (s *session) notifyCQ(cq *gcq) {
	ram := s.v.ram
	arm, err := ram.Load32(cq.dbrec + 8)
	if err != nil || arm == 0 {
		return
	}
	cons, _ := ram.Load32(cq.dbrec + 4)
	if cons == cq.prod {
		return
	}
	if old, _ := ram.Swap32(cq.dbrec+8, 0); old != 0 {
		// The count goes out before the interrupt (ABI 1.7): the
		// guest's handler compares it with the last one it saw. It is
		// the device's own, so a guest that overwrote it only makes
		// its own CQ's next event look spurious or missed.
		cq.events++
		_ = ram.Store32(cq.dbrec+12, cq.events)
		s.raise(cq.vector)
	}
}

// moveCQ hands the guest ring the completions the engine CQ held while
// the ring was full (the guest has consumed since), in order, then
// raises the interrupt if the guest armed the CQ (worker). What does
// not fit stays held, and the CQ stays stalled.
func (s *session) moveCQ(cq *gcq) {
	cq.cq.Flush() // calls cq.Complete: not under cq.mu
	cq.mu.Lock()
	s.notifyCQ(cq)
	cq.mu.Unlock()
}

// retryBlocked takes the WQEs left in rings whose engine queue was full.
// The queues still full set blocked again.
func (s *session) retryBlocked() {
	s.blocked.Store(false)
	for _, q := range s.srqs {
		if q.blocked && !q.fatal {
			s.serviceSRQ(q)
		}
	}
	for _, q := range s.qps {
		if !q.fatal && (q.sqBlocked || q.rqBlocked) {
			s.serviceRQ(q)
			s.serviceSQ(q)
		}
	}
}

// moveAllCQs retries stalled CQs (the guest consumed) and, after a CQ
// doorbell, checks the arm words.
func (s *session) moveAllCQs(armed bool) {
	for _, cq := range s.cqs {
		cq.mu.Lock()
		stalled := cq.stalled
		if !stalled && armed {
			s.notifyCQ(cq)
		}
		cq.mu.Unlock()
		if stalled {
			s.moveCQ(cq)
		}
	}
}

// l2Transmit sends the frames the netdev queued on the L2 TX ring.
func (s *session) l2Transmit() {
	h := s.hdr
	prod := atomic.LoadUint32(&h.L2TxProd)
	if prod-s.l2TxCons > L2TxEntries {
		s.setFatal(FatalL2Ring)
		return
	}
	if s.l2TxCons == prod {
		return
	}
	buf := s.txBuf[:]
	for s.l2TxCons != prod {
		off := L2TxOff + int(s.l2TxCons%L2TxEntries)*16
		d := (*L2Desc)(unsafe.Pointer(&s.shm[off]))
		l := int(d.Len)
		flags := uint16(0)
		if l < 14 || l > L2MaxFrame {
			flags = L2FlagErr
		} else if err := s.v.ram.ReadAt(buf[:l], d.Addr); err != nil {
			flags = L2FlagErr
		} else if !s.v.linkUp() || s.v.cfg.ib() {
			flags = L2FlagErr // no link, or an InfiniBand port (no Ethernet)
		} else if !s.l2Allowed(buf[:l]) {
			flags = L2FlagErr
		} else if _, err := s.v.fabric.Write(buf[:l]); err != nil {
			flags = L2FlagErr
		} else {
			s.v.stats.l2Tx.Add(1)
		}
		d.Flags = flags
		s.l2TxCons++
	}
	atomic.StoreUint32(&h.L2TxCons, s.l2TxCons)
	s.raise(IRQL2)
}

// l2Allowed reports whether a frame the guest queued may leave, and
// counts the ones that may not. Its source must be the vNIC's MAC, the
// one the host configured (a VF's spoof check: a guest sends as no
// other); and MAC Control frames, PAUSE and PFC (IEEE 802.3 clause 31,
// 802.1Qbb), which stop the switch's egress to the whole port, leave
// only from a vNIC configured to trust them (VNICConfig.TrustPause). A
// tagged MAC Control frame is one too: the switch looks past the tags.
// A vNIC with allowed addresses also drops frames whose IPv4, ARP or
// IPv6 source the host did not pin (addrPins.frameAllowed): a guest
// with its own MAC and a peer's IP would pass the peer's remote-address
// check (rdma's fromPeer) otherwise.
func (s *session) l2Allowed(f []byte) bool {
	if [6]byte(f[6:12]) != s.v.cfg.MAC {
		s.v.stats.l2TxSpoofed.Add(1)
		return false
	}
	typ, off := l2Type(f)
	if !s.v.cfg.TrustPause && (typ == proto.EtherTypeMACControl || [6]byte(f[:6]) == proto.PFCDestMAC) {
		s.v.stats.l2TxMACControl.Add(1)
		return false
	}
	if s.v.pins != nil && !s.v.pins.frameAllowed(f, typ, off) {
		s.v.stats.l2TxIPSpoofed.Add(1)
		return false
	}
	return true
}

// l2Type returns the EtherType of a frame of at least 14 bytes past its
// 802.1Q and 802.1ad tags, and the offset of what follows it.
func l2Type(f []byte) (typ uint16, off int) {
	typ, off = uint16(f[12])<<8|uint16(f[13]), 14
	for (typ == proto.EtherTypeVLAN || typ == etherTypeQinQ) && len(f) >= off+4 {
		typ, off = uint16(f[off+2])<<8|uint16(f[off+3]), off+4
	}
	return typ, off
}

// etherTypeQinQ is the 802.1ad service tag.
const etherTypeQinQ = 0x88A8

// l2Receive puts a frame that is not RoCEv2 into the next L2 RX buffer
// the guest posted; with none posted the frame is dropped.
func (s *session) l2Receive(frame []byte) {
	s.l2mu.Lock()
	defer s.l2mu.Unlock()
	if s.shm == nil || !s.live() {
		return
	}
	h := s.hdr
	prod := atomic.LoadUint32(&h.L2RxProd)
	if prod-s.l2RxCons > L2RxEntries {
		s.setFatal(FatalL2Ring)
		return
	}
	if prod == s.l2RxCons {
		s.v.stats.l2RxDropped.Add(1)
		return
	}
	off := L2RxOff + int(s.l2RxCons%L2RxEntries)*16
	d := (*L2Desc)(unsafe.Pointer(&s.shm[off]))
	if len(frame) > int(d.BufLen) || s.v.ram.WriteAt(frame, d.Addr) != nil {
		d.Len, d.Flags = 0, L2FlagErr
		s.v.stats.l2RxDropped.Add(1)
	} else {
		d.Len, d.Flags = uint16(len(frame)), 0
		s.v.stats.l2Rx.Add(1)
	}
	s.l2RxCons++
	atomic.StoreUint32(&h.L2RxCons, s.l2RxCons)
	s.raise(IRQL2)
}

// deviceClock is the device's clock: the host's CLOCK_REALTIME in ns.
// Completion timestamps (hicain_cqe.timestamp) and QUERY_CLOCK read it,
// so a guest can set one against the other (ibv_query_rt_values_ex).
func deviceClock() uint64 { return uint64(time.Now().UnixNano()) }
