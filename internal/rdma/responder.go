package rdma

import (
	"encoding/binary"

	"github.com/PacketFive/hinic/internal/proto"
)

// Responder operation in progress (IBA 9.7.5: the opcode sequence of a
// multi-packet message).
const (
	respIdle = iota
	respSend
	respWrite
)

// respState is the responder half of an RC QP (IBA 9.7.5), owned by the
// engine goroutine.
type respState struct {
	ePSN    proto.PSN // next expected request PSN
	msn     uint32    // messages completed, carried in every AETH
	nakSent bool      // a sequence-error or RNR NAK already went out for ePSN

	op uint8
	// SEND in progress: the receive WQE at the RQ head, bytes placed.
	recvOff uint64
	// WRITE in progress.
	wMR  *MR
	wVA  uint64
	wLen uint32
	wOff uint32

	ackPending bool
	ackPSN     proto.PSN

	resNext int // next slot of QP.readRes to fill

	// READ responses in progress: sent a budget at a time by the send
	// scheduler (replyStep), so a large READ does not stall the engine.
	// Requests that arrive meanwhile wait in QP.backlog.
	reply    *readRes
	replyPSN proto.PSN

	tm tmRecv // the message being received on a TM SRQ
}

// readRes is one slot of the responder's replay ring (max_dest_rd_atomic
// deep, IBA 9.7.5.1.2): a READ to answer again from memory, or an atomic
// whose original value is answered again without executing it twice.
type readRes struct {
	valid       bool
	first, last proto.PSN
	mr          *MR
	va          uint64
	length      uint32
	atomic      bool
	orig        uint64 // atomic: the value the target held before
	atomicWrite bool   // an ATOMIC WRITE: answered again, never executed twice
}

// receiving reports whether the QP's state lets it receive (RTR and
// after, IBA 10.3.1) and counts a packet that arrives in another.
func (qp *QP) receiving() bool {
	switch qp.State() {
	case QPStateRTR, QPStateRTS, QPStateSQD, QPStateSQE:
		return true
	}
	qp.dev.ctr.rxWrongState.Add(1)
	return false
}

// onRequest handles a request packet (SEND, WRITE, READ request, atomic).
func (qp *QP) onRequest(pkt *proto.Packet) {
	d := qp.dev
	if !qp.receiving() {
		return
	}
	rs := &qp.resp
	bth := pkt.BTH
	psn := bth.PSN()
	if !qp.svc().reliable {
		if qp.ucSequence(pkt, psn) {
			qp.execute(pkt, psn)
		}
		return
	}
	switch diff := psn.Diff(rs.ePSN); {
	case diff > 0:
		// Out of sequence (IBA 9.7.5): NAK once per gap, drop the
		// rest silently until ePSN arrives.
		d.ctr.outOfSequence.Add(1)
		if !rs.nakSent {
			rs.nakSent = true
			qp.sendNAK(rs.ePSN, proto.NAKPSNSequenceError)
			d.ctr.seqNAKsSent.Add(1)
		}
		return
	case diff < 0:
		qp.duplicate(pkt, psn)
		return
	}
	if qp.isXRCTgt() && !qp.xrcSelect(pkt, psn) {
		return
	}
	qp.execute(pkt, psn)
}

// execute carries out an in-sequence request, by kind.
func (qp *QP) execute(pkt *proto.Packet, psn proto.PSN) {
	d := qp.dev
	info := pkt.BTH.Opcode().Info()
	switch info.Kind {
	case proto.KindSend:
		qp.respSend(pkt, psn, info)
	case proto.KindWrite:
		qp.respWrite(pkt, psn, info)
	case proto.KindReadRequest:
		qp.respRead(pkt, psn)
	case proto.KindAtomic:
		qp.respAtomic(pkt, psn)
	case proto.KindAtomicWrite:
		qp.respAtomicWrite(pkt, psn)
	default:
		d.ctr.rxUnsupported.Add(1)
		qp.respFatal(psn, proto.NAKInvalidRequest, WCRemInvReqErr)
	}
}

// respAtomic executes a CMP_AND_SWP or FETCH_AND_ADD on the target word,
// atomically with respect to every other engine operation on that memory
// (the Memory implementation's atomics), saves the original value for
// replays and answers with an ATOMIC ACKNOWLEDGE (IBA 9.4.5, 9.5.2).
func (qp *QP) respAtomic(pkt *proto.Packet, psn proto.PSN) {
	d := qp.dev
	if !qp.checkSequence(psn, proto.KindAtomic, proto.PosNone) {
		return
	}
	if qp.attr.QPAccessFlags&AccessRemoteAtomic == 0 || qp.attr.MaxDestRDAtomic == 0 {
		qp.respFatal(psn, proto.NAKInvalidRequest, WCRemInvReqErr)
		return
	}
	a := pkt.AtomicETH
	va, rkey := a.VA(), a.RKey()
	if va%8 != 0 {
		qp.respFatal(psn, proto.NAKInvalidRequest, WCRemInvReqErr)
		return
	}
	addr, ok := qp.atomicTarget(rkey, va, AccessRemoteAtomic)
	if !ok {
		qp.respFatal(psn, proto.NAKRemoteAccessError, WCLocProtErr)
		return
	}
	var orig uint64
	var err error
	if rcOpcode(pkt.BTH.Opcode()) == proto.OpRCCompareSwap {
		orig, err = d.mem.CompareAndSwap64(addr, a.CompareData(), a.SwapData())
	} else {
		orig, err = d.mem.FetchAndAdd64(addr, a.SwapData())
	}
	if err != nil {
		qp.respFatal(psn, proto.NAKRemoteOperationalError, WCLocProtErr)
		return
	}
	qp.executedOnce(psn, readRes{valid: true, first: psn, last: psn, atomic: true, orig: orig})
	// Counted before the answer leaves: whoever sees the completion sees
	// the count.
	d.ctr.atomicsExecuted.Add(1)
	qp.sendAtomicAck(psn, orig)
}

// respAtomicWrite executes an RDMA ATOMIC WRITE (IBA 1.5, 9.4.6): the
// 8-byte payload replaces the aligned target word at once (with respect
// to the engine's other atomics), and the answer is an RDMA READ
// RESPONSE ONLY without data. The QP needs remote write access (as rxe
// checks), the R_Key remote write over the word. A duplicate is answered
// again from the replay ring and not executed twice.
func (qp *QP) respAtomicWrite(pkt *proto.Packet, psn proto.PSN) {
	d := qp.dev
	if !qp.checkSequence(psn, proto.KindAtomicWrite, proto.PosNone) {
		return
	}
	if qp.attr.QPAccessFlags&AccessRemoteWrite == 0 || qp.attr.MaxDestRDAtomic == 0 {
		qp.respFatal(psn, proto.NAKInvalidRequest, WCRemInvReqErr)
		return
	}
	reth := pkt.RETH
	va, rkey := reth.VA(), reth.RKey()
	if reth.DMALength() != 8 || len(pkt.Payload) != 8 || va%8 != 0 {
		qp.respFatal(psn, proto.NAKInvalidRequest, WCRemInvReqErr)
		return
	}
	addr, ok := qp.atomicTarget(rkey, va, AccessRemoteWrite)
	if !ok {
		qp.respFatal(psn, proto.NAKRemoteAccessError, WCLocProtErr)
		return
	}
	// The payload's bytes become the word's: the value in memory order.
	val := binary.LittleEndian.Uint64(pkt.Payload)
	if !atomicStore64(d.mem, addr, val) {
		qp.respFatal(psn, proto.NAKRemoteOperationalError, WCLocProtErr)
		return
	}
	qp.executedOnce(psn, readRes{valid: true, first: psn, last: psn, atomicWrite: true})
	d.ctr.atomicWrites.Add(1)
	qp.sendEmptyReadResponse(psn)
}

// atomicTarget resolves the aligned 8-byte word an atomic or an ATOMIC
// WRITE names, checked against rkey with the right need (remoteMR), to
// its address in the engine's memory. An aligned word never crosses a
// page of a paged MR.
func (qp *QP) atomicTarget(rkey uint32, va uint64, need Access) (uint64, bool) {
	mr := qp.remoteMR(rkey, va, 8, need)
	if mr == nil {
		return 0, false
	}
	if mr.paged {
		addr, _ := mr.translate(va, 8)
		return addr, true
	}
	return mr.base + (va - mr.iova), true
}

// executedOnce records the answer of a request executed at psn (an
// atomic or an ATOMIC WRITE) in the replay ring, so that a duplicate is
// answered again and not executed twice, and accepts the request: the
// response acknowledges everything before it.
func (qp *QP) executedOnce(psn proto.PSN, res readRes) {
	rs := &qp.resp
	qp.readRes[rs.resNext] = res
	rs.resNext = (rs.resNext + 1) % len(qp.readRes)
	rs.msn++
	rs.ackPending = false
	qp.accepted(psn, 1, false)
}

// atomicStore64 replaces the 8-byte word at addr with v through the
// Memory's compare-and-swap, so that it is atomic with respect to the
// engine's other atomics on the word.
func atomicStore64(m Memory, addr, v uint64) bool {
	old, err := m.FetchAndAdd64(addr, 0)
	for err == nil {
		var got uint64
		if got, err = m.CompareAndSwap64(addr, old, v); err == nil && got == old {
			return true
		}
		old = got
	}
	return false
}

// sendEmptyReadResponse answers an ATOMIC WRITE: a READ RESPONSE ONLY of
// psn without payload.
func (qp *QP) sendEmptyReadResponse(psn proto.PSN) {
	f := qp.path.f
	f.BTH.Opcode = proto.OpRCReadResponseOnly
	f.BTH.PSN = psn
	f.AETH = proto.AETHFields{Syndrome: proto.MakeSyndrome(proto.AckTypeACK, proto.AETHCreditInvalid), MSN: qp.resp.msn}
	fb, po := qp.txBegin(&f, false)
	qp.txEnd(&f, fb, fb.b[po:po])
	qp.dev.ctr.readResponsesSent.Add(1)
}

// sendAtomicAck sends the ATOMIC ACKNOWLEDGE of psn carrying orig.
func (qp *QP) sendAtomicAck(psn proto.PSN, orig uint64) {
	f := qp.path.f
	f.BTH.Opcode = proto.OpRCAtomicAcknowledge
	f.BTH.PSN = psn
	f.AETH = proto.AETHFields{Syndrome: proto.MakeSyndrome(proto.AckTypeACK, proto.AETHCreditInvalid), MSN: qp.resp.msn}
	f.AtomicAckData = orig
	fb, _ := qp.txBegin(&f, false)
	qp.txEnd(&f, fb, nil)
}

// checkSequence enforces the opcode sequence of multi-packet messages; it
// NAKs an invalid request and reports false on a violation.
func (qp *QP) checkSequence(psn proto.PSN, kind proto.Kind, pos proto.Position) bool {
	rs := &qp.resp
	ok := false
	switch rs.op {
	case respIdle:
		ok = pos != proto.PosMiddle && pos != proto.PosLast
	case respSend:
		ok = kind == proto.KindSend && (pos == proto.PosMiddle || pos == proto.PosLast)
	case respWrite:
		ok = kind == proto.KindWrite && (pos == proto.PosMiddle || pos == proto.PosLast)
	}
	if !ok {
		qp.respFatal(psn, proto.NAKInvalidRequest, WCRemInvReqErr)
	}
	return ok
}

// checkSegment checks a segment's payload size against the path MTU:
// FIRST and MIDDLE carry exactly one MTU, LAST 1..MTU, ONLY 0..MTU.
func (qp *QP) checkSegment(pos proto.Position, n int) bool {
	switch pos {
	case proto.PosFirst, proto.PosMiddle:
		return n == qp.pmtu
	case proto.PosLast:
		return n >= 1 && n <= qp.pmtu
	}
	return n <= qp.pmtu
}

// accepted finishes an in-sequence request: the expected PSN moves on by
// npkts and an AckReq asks for a (coalesced) ACK.
func (qp *QP) accepted(psn proto.PSN, npkts int, ackReq bool) {
	rs := &qp.resp
	rs.ePSN = psn.Add(npkts)
	rs.nakSent = false
	if ackReq && qp.svc().reliable {
		rs.ackPending, rs.ackPSN = true, psn.Add(npkts-1)
		qp.dev.eng.queueAck(qp)
	}
}

func (qp *QP) respSend(pkt *proto.Packet, psn proto.PSN, info *proto.OpcodeInfo) {
	d := qp.dev
	rs := &qp.resp
	pos := info.Position
	if !qp.checkSequence(psn, proto.KindSend, pos) {
		return
	}
	payload := pkt.Payload
	tms := qp.rsrq()
	if tms != nil && (tms.tm == nil || !qp.svc().reliable) {
		tms = nil
	}
	if pos == proto.PosFirst || pos == proto.PosOnly {
		var w *recvWQE
		if tms != nil {
			var err error
			if w, _, err = qp.tmTake(tms, payload); err != nil {
				// A message without a valid TMH on a TM QP
				// (ConnectX: a malformed request).
				d.ctr.rxMalformed.Add(1)
				qp.respFatal(psn, proto.NAKInvalidRequest, WCRemInvReqErr)
				return
			}
		} else {
			w = qp.recvTake()
		}
		if w == nil && !qp.svc().reliable {
			d.ctr.ucDropped.Add(1) // no RNR on UC: the message is lost
			return
		}
		if w == nil {
			// Receiver not ready (IBA 9.7.5): NAK with our
			// min_rnr_timer; the requester resends this packet later.
			// Later packets of the window are dropped as out of
			// sequence without a second NAK.
			rs.nakSent = true
			qp.sendNAKSyndrome(psn, proto.MakeSyndrome(proto.AckTypeRNRNAK, qp.attr.MinRNRTimer))
			d.ctr.rnrNAKsSent.Add(1)
			return
		}
		if !qp.resolveRecv(w) {
			// The receive buffer is unusable: a local protection
			// error here, a remote operational error there.
			rs.op = respSend
			qp.respFatal(psn, proto.NAKRemoteOperationalError, WCLocProtErr)
			return
		}
		rs.op, rs.recvOff = respSend, 0
	}
	if !qp.checkSegment(pos, len(payload)) {
		qp.respFatal(psn, proto.NAKInvalidRequest, WCRemInvReqErr)
		return
	}
	w := qp.recvTake()
	if tms != nil {
		switch rs.tm.mode {
		case tmEager:
			if pos == proto.PosFirst || pos == proto.PosOnly {
				payload = payload[TMHeaderLen:]
			}
		case tmRndv:
			payload = nil // the data comes by READ
		}
	}
	if rs.recvOff+uint64(len(payload)) > w.length {
		// The message does not fit the receive buffer (IBA 9.9.3):
		// local length error here, invalid request there.
		qp.respFatal(psn, proto.NAKInvalidRequest, WCLocLenErr)
		return
	}
	if !qp.scatter(w.sge, w.mrs, int(rs.recvOff), payload) {
		qp.respFatal(psn, proto.NAKRemoteOperationalError, WCLocProtErr)
		return
	}
	rs.recvOff += uint64(len(payload))
	if pos == proto.PosLast || pos == proto.PosOnly {
		wc := WC{WRID: w.wrID, Opcode: WCRecv, ByteLen: uint32(rs.recvOff), QPNum: qp.qpn, SrcQP: qp.attr.DestQPNum}
		if pkt.ImmDt != nil {
			wc.ImmData, wc.WCFlags = pkt.ImmDt.Value(), WCWithImm
		}
		if pkt.IETH != nil {
			// SEND_WITH_INV (IBA 9.4.1.1, 10.6.7.3): invalidate the
			// R_Key once the message is placed. A key that cannot be
			// invalidated is an invalid request (rxe: class J).
			rkey := pkt.IETH.RKey()
			if !qp.invalidateKey(rkey) {
				qp.respFatal(psn, proto.NAKInvalidRequest, WCRemInvReqErr)
				return
			}
			wc.ImmData, wc.WCFlags = rkey, WCWithInv
		}
		if tms != nil {
			wc.WCFlags |= rs.tm.wc.WCFlags
			wc.Opcode, wc.Tag, wc.TMAppCtx, wc.TMHandle = rs.tm.wc.Opcode, rs.tm.wc.Tag, rs.tm.wc.TMAppCtx, rs.tm.wc.TMHandle
		}
		qp.recvDone()
		rs.op = respIdle
		rs.msn++
		qp.rcq().push(&wc, pkt.BTH.SE())
		if tms != nil && rs.tm.mode == tmRndv {
			qp.tmStartRndv(w, &rs.tm)
		}
	}
	qp.accepted(psn, 1, pkt.BTH.AckReq())
}

func (qp *QP) respWrite(pkt *proto.Packet, psn proto.PSN, info *proto.OpcodeInfo) {
	d := qp.dev
	rs := &qp.resp
	pos := info.Position
	if !qp.checkSequence(psn, proto.KindWrite, pos) {
		return
	}
	if qp.attr.QPAccessFlags&AccessRemoteWrite == 0 {
		qp.respFatal(psn, proto.NAKInvalidRequest, WCRemInvReqErr)
		return
	}
	payload := pkt.Payload
	if pos == proto.PosFirst || pos == proto.PosOnly {
		reth := pkt.RETH
		va, rkey, n := reth.VA(), reth.RKey(), reth.DMALength()
		var mr *MR
		if n > 0 { // a zero-length WRITE touches nothing and needs no key
			mr = qp.remoteMR(rkey, va, uint64(n), AccessRemoteWrite)
			if mr == nil {
				qp.respFatal(psn, proto.NAKRemoteAccessError, WCLocProtErr)
				return
			}
		}
		rs.op, rs.wMR, rs.wVA, rs.wLen, rs.wOff = respWrite, mr, va, n, 0
	}
	if !qp.checkSegment(pos, len(payload)) || uint64(rs.wOff)+uint64(len(payload)) > uint64(rs.wLen) {
		qp.respFatal(psn, proto.NAKInvalidRequest, WCRemInvReqErr)
		return
	}
	end := pos == proto.PosLast || pos == proto.PosOnly
	if end && rs.wOff+uint32(len(payload)) != rs.wLen {
		qp.respFatal(psn, proto.NAKInvalidRequest, WCRemInvReqErr)
		return
	}
	withImm := pkt.ImmDt != nil
	if withImm && !qp.recvAvailable() && qp.svc().reliable {
		if pos == proto.PosOnly {
			// The retry comes as the same ONLY packet: the WRITE has
			// not started (a LAST retry continues the one in progress).
			rs.op, rs.wMR = respIdle, nil
		}
		rs.nakSent = true
		qp.sendNAKSyndrome(psn, proto.MakeSyndrome(proto.AckTypeRNRNAK, qp.attr.MinRNRTimer))
		d.ctr.rnrNAKsSent.Add(1)
		return
	}
	if len(payload) > 0 {
		if rs.wMR.write(rs.wVA+uint64(rs.wOff), payload) != nil {
			qp.respFatal(psn, proto.NAKRemoteOperationalError, WCLocProtErr)
			return
		}
		rs.wOff += uint32(len(payload))
	}
	if end {
		rs.op = respIdle
		rs.wMR = nil
		rs.msn++
		if withImm {
			if w := qp.recvTake(); w == nil {
				// UC only (RC checked recvAvailable): the data is
				// placed, the completion is lost.
				d.ctr.ucDropped.Add(1)
			} else {
				wc := WC{WRID: w.wrID, Opcode: WCRecvRDMAWithImm, ByteLen: rs.wLen, ImmData: pkt.ImmDt.Value(),
					WCFlags: WCWithImm, QPNum: qp.qpn, SrcQP: qp.attr.DestQPNum}
				qp.recvDone()
				qp.rcq().push(&wc, pkt.BTH.SE())
			}
		}
	}
	qp.accepted(psn, 1, pkt.BTH.AckReq())
}

func (qp *QP) respRead(pkt *proto.Packet, psn proto.PSN) {
	rs := &qp.resp
	if !qp.checkSequence(psn, proto.KindReadRequest, proto.PosNone) {
		return
	}
	if qp.attr.QPAccessFlags&AccessRemoteRead == 0 || qp.attr.MaxDestRDAtomic == 0 {
		qp.respFatal(psn, proto.NAKInvalidRequest, WCRemInvReqErr)
		return
	}
	reth := pkt.RETH
	va, rkey, n := reth.VA(), reth.RKey(), reth.DMALength()
	var mr *MR
	if n > 0 {
		mr = qp.remoteMR(rkey, va, uint64(n), AccessRemoteRead)
		if mr == nil {
			qp.respFatal(psn, proto.NAKRemoteAccessError, WCLocProtErr)
			return
		}
	}
	npkts := 1
	if n > 0 {
		npkts = (int(n) + qp.pmtu - 1) / qp.pmtu
	}
	res := &qp.readRes[rs.resNext]
	rs.resNext = (rs.resNext + 1) % len(qp.readRes)
	*res = readRes{valid: true, first: psn, last: psn.Add(npkts - 1), mr: mr, va: va, length: n}
	rs.msn++
	// The responses acknowledge everything before them.
	rs.ackPending = false
	qp.accepted(psn, npkts, false)
	qp.startReply(res, psn)
}

// startReply begins sending the responses of a saved READ from psn on.
func (qp *QP) startReply(res *readRes, from proto.PSN) {
	qp.resp.reply, qp.resp.replyPSN = res, from
	qp.dev.eng.schedule(qp)
}

// replyStep sends up to budget READ responses; when the READ is answered
// it goes on with the requests that waited. progressed reports that it
// did something, more that it stopped for the budget.
func (qp *QP) replyStep(budget int) (progressed, more bool) {
	rs := &qp.resp
	for rs.reply != nil || qp.backHead < len(qp.backlog) {
		if rs.reply != nil {
			if budget == 0 {
				return progressed, true
			}
			n := qp.sendReadResponses(rs.reply, rs.replyPSN, budget)
			budget -= n
			progressed = true
			if rs.reply == nil || rs.replyPSN.After(rs.reply.last) {
				rs.reply = nil
			}
			continue
		}
		// Requests that waited for the reply, in arrival order; one may
		// start another reply.
		b := qp.backlog[qp.backHead]
		qp.backlog[qp.backHead] = nil
		qp.backHead++
		if qp.backHead == len(qp.backlog) {
			qp.backlog, qp.backHead = qp.backlog[:0], 0
		}
		if pkt, err := proto.Parse(b.b[:b.n], qp.dev.linkType()); err == nil {
			qp.onRequest(&pkt)
		}
		qp.dev.eng.putBuf(b)
		progressed = true
	}
	return progressed, false
}

// dropBacklog releases parked requests (QP to ERR, RESET or destroyed).
func (qp *QP) dropBacklog() {
	for _, b := range qp.backlog[qp.backHead:] {
		qp.dev.eng.putBuf(b)
	}
	clear(qp.backlog)
	qp.backlog, qp.backHead = qp.backlog[:0], 0
	qp.resp.reply = nil
}

// sendReadResponses sends up to max responses of a saved READ from psn
// from on, advances resp.replyPSN, and returns how many it sent.
func (qp *QP) sendReadResponses(res *readRes, from proto.PSN, max int) int {
	d := qp.dev
	sent := 0
	for p := from; !p.After(res.last) && sent < max; p = p.Next() {
		idx := int(p.Diff(res.first))
		off := idx * qp.pmtu
		n := min(qp.pmtu, int(res.length)-off)
		first, last := p == res.first, p == res.last
		f := qp.path.f
		f.BTH.PSN = p
		switch {
		case first && last:
			f.BTH.Opcode = proto.OpRCReadResponseOnly
		case first:
			f.BTH.Opcode = proto.OpRCReadResponseFirst
		case last:
			f.BTH.Opcode = proto.OpRCReadResponseLast
		default:
			f.BTH.Opcode = proto.OpRCReadResponseMiddle
		}
		f.AETH = proto.AETHFields{Syndrome: proto.MakeSyndrome(proto.AckTypeACK, proto.AETHCreditInvalid), MSN: qp.resp.msn}
		fb, po := qp.txBegin(&f, true)
		payload := fb.b[po : po+n]
		if n > 0 && res.mr.read(res.va+uint64(off), payload) != nil {
			if qp.path.loopback {
				d.eng.putBuf(fb)
			}
			qp.respFatal(p, proto.NAKRemoteOperationalError, WCLocProtErr)
			return sent
		}
		qp.txEnd(&f, fb, payload)
		d.ctr.readResponsesSent.Add(1)
		sent++
		qp.resp.replyPSN = p.Next()
	}
	return sent
}

// duplicate handles a request whose PSN is before ePSN (IBA 9.7.5):
// SENDs and WRITEs are acknowledged again without being executed; a READ
// is answered again from the saved request.
func (qp *QP) duplicate(pkt *proto.Packet, psn proto.PSN) {
	d := qp.dev
	rs := &qp.resp
	d.ctr.duplicates.Add(1)
	switch pkt.BTH.Opcode().Info().Kind {
	case proto.KindSend, proto.KindWrite:
		rs.ackPending, rs.ackPSN = true, rs.ePSN.Add(-1)
		d.eng.queueAck(qp)
	case proto.KindAtomic:
		// Never executed twice: the saved original value is sent again.
		for i := range qp.readRes {
			res := &qp.readRes[i]
			if res.valid && res.atomic && res.first == psn {
				d.ctr.atomicReplays.Add(1)
				qp.sendAtomicAck(psn, res.orig)
				return
			}
		}
		// Too old to replay: the requester will time out.
	case proto.KindAtomicWrite:
		for i := range qp.readRes {
			res := &qp.readRes[i]
			if res.valid && res.atomicWrite && res.first == psn {
				d.ctr.atomicReplays.Add(1)
				qp.sendEmptyReadResponse(psn)
				return
			}
		}
	case proto.KindReadRequest:
		for i := range qp.readRes {
			res := &qp.readRes[i]
			if res.valid && !res.atomic && !res.atomicWrite && !psn.Before(res.first) && !psn.After(res.last) {
				d.ctr.readReplays.Add(1)
				qp.startReply(res, psn)
				return
			}
		}
		// Too old to replay: the requester will time out.
	}
}

// sendNAK sends a NAK with a NAK code for psn.
func (qp *QP) sendNAK(psn proto.PSN, code uint8) {
	qp.sendNAKSyndrome(psn, proto.MakeSyndrome(proto.AckTypeNAK, code))
}

// sendNAKSyndrome sends an RNR NAK or NAK. A NAK acknowledges every PSN
// before its own, so a coalesced ACK still pending is superseded.
func (qp *QP) sendNAKSyndrome(psn proto.PSN, syndrome uint8) {
	qp.resp.ackPending = false
	qp.sendAck(psn, syndrome)
}

// respFatal handles a responder class C error (IBA 9.9.3): NAK the
// request, complete the receive WQE in use (if any) with recvStatus, and
// move the QP to ERR.
func (qp *QP) respFatal(psn proto.PSN, nakCode uint8, recvStatus WCStatus) {
	d := qp.dev
	rs := &qp.resp
	if !qp.svc().reliable {
		qp.ucError(recvStatus)
		return
	}
	qp.sendNAK(psn, nakCode)
	d.ctr.errNAKsSent.Add(1)
	if rs.op == respSend && qp.recvHeld() {
		w := qp.recvTake()
		wc := WC{WRID: w.wrID, Status: recvStatus, Opcode: WCRecv, QPNum: qp.qpn, SrcQP: qp.attr.DestQPNum}
		qp.recvDone()
		qp.rcq().push(&wc, false)
	}
	rs.op = respIdle
	qp.enterError()
}
