package rdma

import "github.com/PacketFive/hinic/internal/proto"

// Unreliable connection (UC) service (IBA 9.7 without acknowledgements):
// a UC QP is connected to one remote QP like RC and sends SEND and RDMA
// WRITE messages (with or without immediate) of any length, segmented at
// the path MTU, but nothing is acknowledged or retransmitted. A send
// completes once its last packet is on the wire. The responder accepts
// packets in PSN order; a gap (a lost packet) makes it drop the message
// in progress and resume at the next FIRST or ONLY packet, as rxe does;
// the receive WR of a dropped SEND is kept for the next message. A SEND
// that finds no receive WR is dropped too, silently: there is no RNR on
// UC.

// ucTransitions is the UC column of ib_modify_qp_is_ok's table.
var ucTransitions = func() (t transitions) {
	t = baseTransitions()
	t[QPStateReset][QPStateInit] = transition{valid: true, req: QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags}
	t[QPStateInit][QPStateInit] = transition{valid: true, opt: QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags}
	t[QPStateInit][QPStateRTR] = transition{valid: true,
		req: QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN,
		opt: QPAttrAltPath | QPAttrAccessFlags | QPAttrPKeyIndex}
	t[QPStateRTR][QPStateRTS] = transition{valid: true, req: QPAttrSQPSN,
		opt: QPAttrCurState | QPAttrAltPath | QPAttrAccessFlags | QPAttrPathMigState}
	t[QPStateRTS][QPStateRTS] = transition{valid: true,
		opt: QPAttrCurState | QPAttrAccessFlags | QPAttrAltPath | QPAttrPathMigState}
	t[QPStateRTS][QPStateSQD] = transition{valid: true, opt: QPAttrEnSQDAsyncNotify}
	t[QPStateSQD][QPStateRTS] = transition{valid: true,
		opt: QPAttrCurState | QPAttrAltPath | QPAttrAccessFlags | QPAttrPathMigState}
	t[QPStateSQD][QPStateSQD] = transition{valid: true,
		opt: QPAttrAV | QPAttrAltPath | QPAttrAccessFlags | QPAttrPKeyIndex | QPAttrPathMigState}
	t[QPStateSQE][QPStateRTS] = transition{valid: true, opt: QPAttrCurState | QPAttrAccessFlags}
	return t
}()

// ucStep sends up to budget packets of the send queue: the WQE at the
// head is in progress while compIdx != startIdx.
func (qp *QP) ucStep(budget int) (progressed, more bool) {
	st := qp.State()
	if st != QPStateRTS && st != QPStateSQD {
		return false, false
	}
	r := &qp.req
	d := qp.dev
	for sent := 0; sent < budget; sent++ {
		if r.compIdx == r.startIdx {
			if st == QPStateSQD || r.startIdx == qp.sqProd.Load() {
				return sent > 0, false
			}
			w := qp.sqSlot(r.startIdx)
			r.startIdx++
			r.reqIdx = r.startIdx
			if !qp.resolveSend(w, 0) {
				qp.completeSend(w, WCLocProtErr)
				qp.enterError()
				return true, false
			}
			npkts := 1
			if w.length > 0 {
				npkts = (int(w.length) + qp.pmtu - 1) / qp.pmtu
			}
			w.firstPSN = r.sqPSN
			w.lastPSN = r.sqPSN.Add(npkts - 1)
			w.nextPSN = w.firstPSN
		}
		w := qp.sqSlot(r.compIdx)
		if qp.dev.cfg.DCQCN != nil && !qp.dcqcnPace(qp.packetBytes(w)) {
			return sent > 0, false
		}
		psn := w.nextPSN
		idx := int(psn.Diff(w.firstPSN))
		off := idx * qp.pmtu
		n := min(qp.pmtu, int(w.length)-off)
		first, last := idx == 0, psn == w.lastPSN
		write := w.opcode == WRRDMAWrite || w.opcode == WRRDMAWriteWithImm
		imm := w.opcode == WRSendWithImm || w.opcode == WRRDMAWriteWithImm
		f := qp.path.f
		f.BTH.PSN = psn
		f.BTH.Opcode = segmentOpcode(write, imm, first, last) + (proto.OpUCSendFirst - proto.OpRCSendFirst)
		if write && first {
			f.RETH = proto.RETHFields{VA: w.remoteAddr, RKey: w.rkey, DMALength: w.length}
		}
		if last {
			f.Imm = w.imm
			f.BTH.SE = w.flags&SendSolicited != 0 && w.opcode != WRRDMAWrite
		}
		fb, po := qp.txBegin(&f, true)
		payload := fb.b[po : po+n]
		if !qp.gather(w, off, payload) {
			if qp.path.loopback {
				d.eng.putBuf(fb)
			}
			qp.completeSend(w, WCLocProtErr)
			qp.enterError()
			return true, false
		}
		qp.txEnd(&f, fb, payload)
		w.nextPSN = psn.Next()
		r.sqPSN = w.nextPSN
		if last {
			qp.completeSend(w, WCSuccess)
		}
	}
	return true, true
}

// ucRequest handles a UC packet at the responder.
func (qp *QP) ucRequest(pkt *proto.Packet) {
	d := qp.dev
	if !qp.receiving() {
		return
	}
	rs := &qp.resp
	psn := pkt.BTH.PSN()
	info := pkt.BTH.Opcode().Info()
	pos := info.Position
	start := pos == proto.PosFirst || pos == proto.PosOnly
	if psn != rs.ePSN {
		// Packets were lost: the message in progress is gone.
		d.ctr.outOfSequence.Add(1)
		qp.ucDrop()
	}
	rs.ePSN = psn.Next()
	if rs.op == respIdle && !start {
		d.ctr.ucDropped.Add(1) // the rest of a dropped message
		return
	}
	if rs.op != respIdle && start {
		qp.ucDrop() // a new message while one was unfinished
	}
	payload := pkt.Payload
	if !qp.checkSegment(pos, len(payload)) {
		qp.ucDrop()
		d.ctr.ucDropped.Add(1)
		return
	}
	end := pos == proto.PosLast || pos == proto.PosOnly
	switch info.Kind {
	case proto.KindSend:
		if start {
			w := qp.recvTake()
			if w == nil {
				d.ctr.ucDropped.Add(1) // no RNR on UC: the message is lost
				return
			}
			if !qp.resolveRecv(w) {
				qp.ucFail(w, WCLocProtErr)
				return
			}
			rs.op, rs.recvOff = respSend, 0
		}
		if rs.op != respSend {
			qp.ucDrop()
			return
		}
		w := qp.recvTake()
		if rs.recvOff+uint64(len(payload)) > w.length {
			qp.ucFail(w, WCLocLenErr)
			return
		}
		if !qp.scatter(w.sge, w.mrs, int(rs.recvOff), payload) {
			qp.ucFail(w, WCLocProtErr)
			return
		}
		rs.recvOff += uint64(len(payload))
		if end {
			wc := WC{WRID: w.wrID, Opcode: WCRecv, ByteLen: uint32(rs.recvOff), QPNum: qp.qpn, SrcQP: qp.attr.DestQPNum}
			if pkt.ImmDt != nil {
				wc.ImmData, wc.WCFlags = pkt.ImmDt.Value(), WCWithImm
			}
			qp.recvDone()
			rs.op = respIdle
			qp.recvCQ.push(&wc, pkt.BTH.SE())
		}
	case proto.KindWrite:
		if qp.attr.QPAccessFlags&AccessRemoteWrite == 0 {
			d.ctr.ucDropped.Add(1)
			return
		}
		if start {
			reth := pkt.RETH
			va, rkey, n := reth.VA(), reth.RKey(), reth.DMALength()
			var mr *MR
			if n > 0 {
				mr = d.lookupMR(rkey)
				if mr == nil || mr.pd != qp.pd || mr.access&AccessRemoteWrite == 0 || !mr.contains(va, uint64(n)) {
					d.ctr.ucDropped.Add(1) // UC drops a bad WRITE silently
					return
				}
			}
			rs.op, rs.wMR, rs.wVA, rs.wLen, rs.wOff = respWrite, mr, va, n, 0
		}
		if rs.op != respWrite || uint64(rs.wOff)+uint64(len(payload)) > uint64(rs.wLen) ||
			(end && rs.wOff+uint32(len(payload)) != rs.wLen) {
			qp.ucDrop()
			d.ctr.ucDropped.Add(1)
			return
		}
		if len(payload) > 0 {
			if rs.wMR.write(rs.wVA+uint64(rs.wOff), payload) != nil {
				qp.ucDrop()
				d.ctr.ucDropped.Add(1)
				return
			}
			rs.wOff += uint32(len(payload))
		}
		if end {
			rs.op, rs.wMR = respIdle, nil
			if pkt.ImmDt != nil {
				w := qp.recvTake()
				if w == nil {
					d.ctr.ucDropped.Add(1)
					return
				}
				wc := WC{WRID: w.wrID, Opcode: WCRecvRDMAWithImm, ByteLen: rs.wLen, ImmData: pkt.ImmDt.Value(),
					WCFlags: WCWithImm, QPNum: qp.qpn, SrcQP: qp.attr.DestQPNum}
				qp.recvDone()
				qp.recvCQ.push(&wc, pkt.BTH.SE())
			}
		}
	default:
		d.ctr.rxUnsupported.Add(1)
	}
}

// ucDrop abandons the message in progress; a SEND's receive WR stays for
// the next message.
func (qp *QP) ucDrop() {
	rs := &qp.resp
	if rs.op != respIdle {
		qp.dev.ctr.ucDropped.Add(1)
	}
	rs.op, rs.recvOff, rs.wMR = respIdle, 0, nil
}

// ucFail completes the receive WR of the message in progress with an
// error (its buffer is unusable or too small) and moves the QP to ERR.
func (qp *QP) ucFail(w *recvWQE, status WCStatus) {
	wc := WC{WRID: w.wrID, Status: status, Opcode: WCRecv, QPNum: qp.qpn, SrcQP: qp.attr.DestQPNum}
	qp.recvDone()
	qp.resp.op = respIdle
	qp.recvCQ.push(&wc, false)
	qp.enterError()
}
