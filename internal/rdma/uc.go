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

// ucSequence is the responder's PSN check for UC, which has no NAK
// (IBA 9.7.5 without 9.7.5.1.1's NAKs): a gap drops the message in
// progress and the responder resumes at the next FIRST or ONLY packet; a
// new message drops an unfinished one. It reports whether pkt goes on to
// be executed (execute, through the same code as RC's) after its payload
// size is checked against the path MTU.
func (qp *QP) ucSequence(pkt *proto.Packet, psn proto.PSN) bool {
	d := qp.dev
	rs := &qp.resp
	pos := pkt.BTH.Opcode().Info().Position
	start := pos == proto.PosFirst || pos == proto.PosOnly
	if psn != rs.ePSN {
		// Packets were lost: the message in progress is gone.
		d.ctr.outOfSequence.Add(1)
		qp.ucDrop()
	}
	rs.ePSN = psn.Next()
	if rs.op == respIdle && !start {
		d.ctr.ucDropped.Add(1) // the rest of a dropped message
		return false
	}
	if rs.op != respIdle && start {
		qp.ucDrop() // a new message while one was unfinished
	}
	if !qp.checkSegment(pos, len(pkt.Payload)) {
		qp.ucError(WCRemInvReqErr)
		return false
	}
	return true
}

// ucError is respFatal for UC, where nothing is NAKed: an unusable or too
// small receive buffer of a SEND (a local error) completes its WR with
// the error and moves the QP to ERR, as on RC; any other error (a bad
// R_Key, a WRITE without remote write access, a broken opcode sequence)
// drops the message, silently, and the QP goes on. The drop is counted
// once.
func (qp *QP) ucError(status WCStatus) {
	rs := &qp.resp
	if rs.op == respSend && qp.recvHeld() && (status == WCLocProtErr || status == WCLocLenErr) {
		qp.ucFail(qp.recvTake(), status)
		return
	}
	if rs.op == respIdle {
		qp.dev.ctr.ucDropped.Add(1)
	}
	qp.ucDrop()
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
