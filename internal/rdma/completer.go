package rdma

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/PacketFive/hinic/internal/proto"
)

// The completer of an RC or XRC send queue (IBA 9.7.5.2 for the
// requester's side of acknowledgements; rxe_comp.c in Linux): ACKs,
// NAKs, READ responses and ATOMIC ACKNOWLEDGEs come in through
// onResponse, move reqState.una and compIdx forward, and retire send
// WQEs through completeSend, in order. A WQE that failed (a local error
// found by the requester, a NAK, retries exhausted) carries errStatus
// and completes through advanceCompletions once every WQE before it has,
// which moves the QP to ERR. UC, UD and raw packet sends, which nothing
// acknowledges, complete through completeSend too, as soon as their last
// packet is on the wire.
//
// The completer shares reqState with the requester (requester.go): both
// run on the engine goroutine, and the completer moves reqIdx back when
// it finds that responses were lost, as rxe's completer rewinds the
// requester.
// failHead completes the oldest WQE with status, which moves the QP to ERR.
func (qp *QP) failHead(status WCStatus) {
	r := &qp.req
	if r.compIdx == r.startIdx {
		qp.enterError()
		return
	}
	qp.sqSlot(r.compIdx).errStatus = status
	qp.advanceCompletions()
}

// advanceCompletions completes the WQE at the head if it carries an error
// status: the QP then goes to ERR, which flushes the rest (IBA 10.8).
func (qp *QP) advanceCompletions() {
	r := &qp.req
	if r.compIdx == r.startIdx {
		return
	}
	w := qp.sqSlot(r.compIdx)
	if w.errStatus == WCSuccess {
		return
	}
	qp.completeSend(w, w.errStatus)
	qp.enterError()
}

// completeSend retires the WQE at the head of the send queue.
func (qp *QP) completeSend(w *sendWQE, status WCStatus) {
	r := &qp.req
	if w.readOut {
		w.readOut = false
		r.outReads--
	}
	// The completion is built now but pushed only after the slot is
	// published as free (sqCons): an application that polls it and posts
	// at once must find room in the send queue, as on a real NIC.
	signaled := w.tm == tmSendNone && (status != WCSuccess || qp.init.SQSigAll || w.flags&SendSignaled != 0)
	tm := w.tm
	var wc WC
	if signaled {
		wc = WC{
			WRID: w.wrID, Status: status, Opcode: wrInfo(w.opcode).wc, ByteLen: w.length,
			QPNum: qp.qpn, SrcQP: qp.attr.DestQPNum,
		}
	}
	w.errStatus = WCSuccess
	r.compIdx++
	if int32(r.startIdx-r.compIdx) < 0 { // a flushed WQE that never started
		r.startIdx = r.compIdx
	}
	if int32(r.reqIdx-r.compIdx) < 0 {
		// A (re)transmission was behind what has now been acknowledged:
		// go on from the oldest unacknowledged packet.
		r.reqIdx = r.compIdx
		if r.reqIdx != r.startIdx {
			nw := qp.sqSlot(r.reqIdx)
			switch {
			case nw.hasResponse():
				nw.nextPSN = nw.respPSN
			case r.una.After(nw.firstPSN) && !r.una.After(nw.lastPSN):
				nw.nextPSN = r.una
			default:
				nw.nextPSN = nw.firstPSN
			}
		}
	}
	qp.sqCons.Store(r.compIdx)
	if tm != tmSendNone {
		qp.tmComplete(w, status)
	}
	if signaled {
		qp.sendCQ.push(&wc, false)
		if hook := testHookSendCompleted.Load(); hook != nil {
			(*hook)(qp)
		}
	}
}

// testHookSendCompleted, set only by tests, runs on the engine goroutine
// right after a send completion became visible.
var testHookSendCompleted atomic.Pointer[func(*QP)]

// onResponse handles an ACK, NAK or READ response for this QP's requester.
func (qp *QP) onResponse(pkt *proto.Packet) {
	d := qp.dev
	st := qp.State()
	if st != QPStateRTS && st != QPStateSQD && st != QPStateSQE {
		d.ctr.rxWrongState.Add(1)
		return
	}
	r := &qp.req
	psn := pkt.BTH.PSN()
	// A response must be for a PSN we sent and that is not yet
	// acknowledged; anything else is a duplicate or a ghost.
	if n := r.sqPSN.Diff(r.una); n <= 0 || !psn.InWindow(r.una, int(n)) {
		d.ctr.staleResponses.Add(1)
		return
	}
	switch rcOpcode(pkt.BTH.Opcode()) {
	case proto.OpRCAcknowledge:
		qp.onAETH(psn, pkt.AETH)
	case proto.OpRCAtomicAcknowledge:
		qp.onAtomicAck(psn, pkt)
	default:
		qp.onReadResponse(psn, pkt)
	}
}

// onAtomicAck completes a CMP_AND_SWP or FETCH_AND_ADD: the original value
// at the target goes into the WQE's 8-byte local buffer, in the byte order
// of memory (little-endian, like the target word).
func (qp *QP) onAtomicAck(psn proto.PSN, pkt *proto.Packet) {
	r := &qp.req
	w := qp.responseWQE(psn)
	if w == nil {
		return
	}
	if psn != w.respPSN || !w.isAtomic() {
		qp.failAt(psn, WCBadRespErr)
		return
	}
	if pkt.AETH.Type() != proto.AckTypeACK {
		qp.failAt(psn, WCBadRespErr)
		return
	}
	var orig [8]byte
	binary.LittleEndian.PutUint64(orig[:], pkt.AtomicAckETH.OrigRemoteData())
	if !qp.scatter(w.sge, w.mrs, 0, orig[:]) {
		qp.failAt(psn, WCLocProtErr)
		return
	}
	w.respPSN = psn.Next()
	r.una = w.respPSN
	qp.completeSend(w, WCSuccess)
	qp.progress()
	qp.advanceCompletions()
}

// onAETH handles an ACK or NAK (IBA 9.7.5).
func (qp *QP) onAETH(psn proto.PSN, aeth proto.AETH) {
	d := qp.dev
	r := &qp.req
	switch aeth.Type() {
	case proto.AckTypeACK:
		d.ctr.acksReceived.Add(1)
		qp.ackUpTo(psn)
	case proto.AckTypeRNRNAK:
		d.ctr.rnrNAKsReceived.Add(1)
		if r.rnrWait {
			return
		}
		qp.ackUpTo(psn.Add(-1))
		if qp.State() == QPStateErr {
			return
		}
		if r.rnrLeft == 0 {
			d.ctr.rnrRetryExceeded.Add(1)
			qp.failAt(psn, WCRNRRetryExcErr)
			return
		}
		if qp.attr.RNRRetry != 7 { // 7 means retry forever (IBA 9.7.5)
			r.rnrLeft--
		}
		r.rnrWait, r.rnrPSN = true, psn
		r.deadline = zeroTime // the ACK timer does not run during the RNR wait
		e := &d.eng
		r.rnrTimer = d.clock.AfterFunc(RNRTimerDuration(aeth.Value()), func() { e.signal(qp, evRNR) })
	case proto.AckTypeNAK:
		qp.ackUpTo(psn.Add(-1))
		if qp.State() == QPStateErr {
			return
		}
		switch aeth.Value() {
		case proto.NAKPSNSequenceError:
			d.ctr.seqNAKsReceived.Add(1)
			if r.rnrWait {
				return // the RNR timer will resend from the same point
			}
			if r.retryLeft == 0 {
				d.ctr.retryExceeded.Add(1)
				qp.failAt(psn, WCRetryExcErr)
				return
			}
			r.retryLeft--
			// Go back to the oldest unacknowledged PSN: that is psn,
			// unless a READ before it lost responses (ackUpTo found the
			// gap), which must be reissued first.
			qp.retransmitFrom(r.una)
		case proto.NAKInvalidRequest, proto.NAKInvalidRDRequest:
			d.ctr.errNAKsReceived.Add(1)
			qp.failAt(psn, WCRemInvReqErr)
		case proto.NAKRemoteAccessError:
			d.ctr.errNAKsReceived.Add(1)
			qp.failAt(psn, WCRemAccessErr)
		case proto.NAKRemoteOperationalError:
			d.ctr.errNAKsReceived.Add(1)
			qp.failAt(psn, WCRemOpErr)
		default: // reserved codes
			d.ctr.errNAKsReceived.Add(1)
			qp.failAt(psn, WCBadRespErr)
		}
	default: // reserved syndrome
		d.ctr.staleResponses.Add(1)
	}
}

// failAt gives the WQE holding psn an error status. It completes (and the
// QP goes to ERR) as soon as the WQEs before it have; nothing new starts
// meanwhile.
func (qp *QP) failAt(psn proto.PSN, status WCStatus) {
	r := &qp.req
	for i := r.compIdx; i != r.startIdx; i++ {
		w := qp.sqSlot(i)
		if w.errStatus != 0 {
			break
		}
		if !psn.After(w.lastPSN) {
			w.errStatus = status
			r.stalled = true
			if r.reqIdx-i < 1<<31 { // do not transmit it or anything after it
				r.reqIdx = i
			}
			break
		}
	}
	qp.advanceCompletions()
}

// ackUpTo processes an acknowledgement of every PSN up to and including p:
// SEND and WRITE WQEs that end at or before p complete. An ACK that covers
// a READ whose responses have not all arrived means they were lost: the
// READ is reissued for the missing part.
func (qp *QP) ackUpTo(p proto.PSN) {
	r := &qp.req
	progressed := false
	for r.compIdx != r.startIdx {
		w := qp.sqSlot(r.compIdx)
		if w.errStatus != 0 {
			break
		}
		if w.hasResponse() {
			if !p.Before(w.firstPSN) {
				qp.readGap(w)
			}
			break
		}
		if p.Before(w.lastPSN) {
			if !p.Before(r.una) {
				r.una = p.Next()
				progressed = true
			}
			break
		}
		if w.lastPSN.Next().After(r.una) {
			r.una = w.lastPSN.Next()
		}
		qp.completeSend(w, WCSuccess)
		progressed = true
	}
	if progressed {
		qp.progress()
	}
	qp.advanceCompletions()
}

// progress resets the retry counters (they count retries without forward
// progress) and lets the requester use the room it got.
func (qp *QP) progress() {
	r := &qp.req
	r.retryLeft, r.rnrLeft = qp.attr.RetryCnt, qp.attr.RNRRetry
	r.readRetried = false
	r.probes = 0
	qp.restartTimer()
	qp.dev.eng.schedule(qp)
}

// readGap reissues READ w from its first missing response, once per gap.
func (qp *QP) readGap(w *sendWQE) {
	r := &qp.req
	if r.readRetried && r.readRetryPSN == w.respPSN {
		return
	}
	r.readRetried, r.readRetryPSN = true, w.respPSN
	if w.respPSN.After(r.una) {
		r.una = w.respPSN
	}
	qp.dev.ctr.readGapRetries.Add(1)
	qp.retransmitFrom(w.respPSN)
}

// responseWQE returns the READ or atomic WQE a response with PSN psn
// belongs to, completing the SENDs and WRITEs before it, which the
// response implicitly acknowledges; nil when the response is stale or a
// gap was found (a READ or atomic before it lost its own responses, and
// is reissued); stale responses are counted here.
func (qp *QP) responseWQE(psn proto.PSN) *sendWQE {
	d := qp.dev
	r := &qp.req
	for r.compIdx != r.startIdx {
		c := qp.sqSlot(r.compIdx)
		if c.errStatus != 0 {
			return nil
		}
		if !c.hasResponse() {
			if !psn.After(c.lastPSN) { // a response inside a SEND/WRITE: ghost
				d.ctr.staleResponses.Add(1)
				return nil
			}
			if c.lastPSN.Next().After(r.una) {
				r.una = c.lastPSN.Next()
			}
			qp.completeSend(c, WCSuccess)
			qp.progress()
			continue
		}
		if psn.After(c.lastPSN) { // a later response overtook this one's
			qp.readGap(c)
			return nil
		}
		if psn.Before(c.firstPSN) {
			d.ctr.staleResponses.Add(1)
			return nil
		}
		return c
	}
	d.ctr.staleResponses.Add(1) // nothing outstanding answers to it
	return nil
}

// onReadResponse places one READ response packet (IBA 9.7.5 for the
// requester's checks).
func (qp *QP) onReadResponse(psn proto.PSN, pkt *proto.Packet) {
	d := qp.dev
	r := &qp.req
	w := qp.responseWQE(psn)
	if w == nil {
		return
	}
	if psn != w.respPSN {
		if psn.Before(w.respPSN) {
			d.ctr.staleResponses.Add(1) // duplicate
		} else {
			qp.readGap(w)
		}
		return
	}
	idx := int(psn.Diff(w.firstPSN))
	off := idx * qp.pmtu
	want := min(qp.pmtu, int(w.length)-off)
	first, last := psn == w.firstPSN, psn == w.lastPSN
	var op proto.Opcode
	switch {
	case first && last:
		op = proto.OpRCReadResponseOnly
	case first:
		op = proto.OpRCReadResponseFirst
	case last:
		op = proto.OpRCReadResponseLast
	default:
		op = proto.OpRCReadResponseMiddle
	}
	if w.opcode == WRAtomicWrite {
		// Answered by one READ RESPONSE ONLY without data (IBA 1.5).
		want, op = 0, proto.OpRCReadResponseOnly
	}
	if (!w.isRead() && w.opcode != WRAtomicWrite) || rcOpcode(pkt.BTH.Opcode()) != op || len(pkt.Payload) != want ||
		(pkt.AETH != nil && pkt.AETH.Type() != proto.AckTypeACK) {
		qp.failAt(psn, WCBadRespErr)
		return
	}
	if !qp.scatter(w.sge, w.mrs, off, pkt.Payload) {
		qp.failAt(psn, WCLocProtErr)
		return
	}
	w.respPSN = psn.Next()
	r.una = w.respPSN
	if last {
		qp.completeSend(w, WCSuccess)
	}
	qp.progress()
	qp.advanceCompletions()
}
