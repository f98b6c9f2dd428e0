package rdma

import (
	"encoding/binary"
	"time"

	"github.com/PacketFive/hinic/internal/clock"
	"github.com/PacketFive/hinic/internal/proto"
)

var zeroTime time.Time

// reqState is the requester and completer half of an RC QP (IBA 9.7.4 and
// 9.9.2), owned by the engine goroutine.
//
// Send WQEs move through three free-running indices: compIdx (oldest not
// completed, published as QP.sqCons) <= reqIdx (next WQE to transmit from;
// it moves back on retransmission) <= startIdx (WQEs that have been given
// PSNs) <= QP.sqProd (posted).
type reqState struct {
	sqPSN proto.PSN // next new PSN
	una   proto.PSN // oldest PSN not yet acknowledged

	compIdx, reqIdx, startIdx uint32

	outReads  int // READ WQEs started and not completed
	noAckPkts int // packets sent since the last AckReq
	retryLeft uint8
	rnrLeft   uint8
	stalled   bool // a WQE with an error status blocks further starts

	timer    clock.Timer // local ACK timer, armed lazily (see armTimer)
	deadline time.Time   // when the oldest outstanding packet times out; zero: none
	probeAt  time.Time   // when a tail-loss probe is due (see onRetryTimer); zero: none
	probes   uint8       // probes sent since the last forward progress
	forceAck bool        // the packet being built is a probe: it asks for an ACK

	rnrWait  bool
	rnrPSN   proto.PSN
	rnrTimer clock.Timer

	readRetried  bool // a READ retry for readRetryPSN is already under way
	readRetryPSN proto.PSN
}

// rnrTimerUsec is the IBTA RNR NAK timer table (IBA Vol 1 9.7.5; the same
// values as rxe's rnrnak_usec): the 5-bit timer field of an RNR NAK (and a
// QP's min_rnr_timer) in microseconds. Code 0 is the longest, 655.36 ms.
var rnrTimerUsec = [32]uint32{
	655360, 10, 20, 30, 40, 60, 80, 120,
	160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
	40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
}

// RNRTimerDuration returns the delay an RNR NAK timer code asks for.
func RNRTimerDuration(code uint8) time.Duration {
	return time.Duration(rnrTimerUsec[code&31]) * time.Microsecond
}

// LocalAckTimeout returns the local ACK timeout of a QP timeout attribute:
// 4.096 us * 2^timeout (IBA 9.7.6); 0 means infinite (returned as 0).
func LocalAckTimeout(timeout uint8) time.Duration {
	if timeout == 0 {
		return 0
	}
	return time.Duration(4096) << (timeout & 31) * time.Nanosecond
}

// reqStep transmits up to budget packets of the send queue, for every
// QP type (service.go). progressed reports that it sent something; more
// that it stopped only because of the budget.
func (qp *QP) reqStep(budget int) (progressed, more bool) {
	st := qp.State()
	if st != QPStateRTS && st != QPStateSQD {
		return false, false
	}
	r := &qp.req
	if r.rnrWait {
		return false, false
	}
	datagram := qp.svc().datagram
	sent := 0
	for sent < budget {
		if r.reqIdx == r.startIdx {
			// The next WQE has not been started.
			if st == QPStateSQD || r.stalled || r.startIdx == qp.sqProd.Load() {
				return sent > 0, false
			}
			w := qp.sqSlot(r.startIdx)
			if datagram {
				// One packet, complete once on the wire (IBA 10.8.3).
				r.startIdx++
				r.reqIdx = r.startIdx
				status := qp.sendDatagram(w)
				qp.completeSend(w, status)
				sent++
				if status != WCSuccess {
					qp.enterError()
					return true, false
				}
				continue
			}
			if w.isLocal() {
				if !qp.execLocal(w) {
					return sent > 0, false
				}
				continue
			}
			if !qp.canStart(w) {
				return sent > 0, false
			}
			if !qp.startWQE(w) {
				if qp.State() == QPStateErr {
					return sent > 0, false
				}
				continue // it waits for the WQEs before it, then fails
			}
		}
		w := qp.sqSlot(r.reqIdx)
		if w.errStatus != 0 {
			return sent > 0, false
		}
		if !w.nextPSN.Before(r.sqPSN) && !w.hasResponse() && int(r.sqPSN.Diff(r.una)) >= qp.window() {
			return sent > 0, false // window full
		}
		if qp.dev.cfg.DCQCN != nil && !qp.dcqcnPace(qp.packetBytes(w)) {
			return sent > 0, false // paced: a timer reschedules the QP
		}
		qp.sendRequest(w)
		sent++
		if qp.State() == QPStateErr {
			return true, false
		}
	}
	return true, true
}

// execLocal executes a BIND_MW or LOCAL_INV WQE at startIdx once every
// WQE before it has completed (so that a window changes only after the
// operations posted before it are done, and completions stay in order)
// and completes it: Success, or MWBindErr / LocQPOpErr (rxe's statuses),
// which moves the QP to ERR. It reports false when it has to wait.
func (qp *QP) execLocal(w *sendWQE) bool {
	r := &qp.req
	if r.compIdx != r.startIdx {
		return false // rescheduled when the completions come (progress)
	}
	r.startIdx++
	r.reqIdx = r.startIdx
	w.errStatus = WCSuccess
	if w.opcode == WRBindMW {
		w.errStatus = qp.bindMW(&w.bind)
	} else if !qp.invalidateKey(w.imm) {
		w.errStatus = WCLocQPOpErr
	}
	if w.errStatus != WCSuccess {
		r.stalled = true
		qp.advanceCompletions()
		return false
	}
	qp.completeSend(w, WCSuccess)
	return true
}

// window is how many PSNs the requester may have in flight: MaxUnackedPSNs,
// and no more than MaxUnackedBytes of packets at the path MTU.
func (qp *QP) window() int {
	return min(MaxUnackedPSNs, MaxUnackedBytes/qp.pmtu)
}

// canStart reports whether w may be given PSNs now: READs are limited to
// max_rd_atomic outstanding (at least one, so that a QP left at 0 does not
// hang), a fenced WR waits for all earlier READs, and the PSN window must
// have room.
func (qp *QP) canStart(w *sendWQE) bool {
	r := &qp.req
	if w.flags&SendFence != 0 && r.outReads > 0 {
		return false
	}
	if w.hasResponse() && r.outReads >= max(int(qp.attr.MaxRDAtomic), 1) {
		return false
	}
	return int(r.sqPSN.Diff(r.una)) < qp.window()
}

// startWQE checks w's local SGEs and assigns its PSNs. On a local error
// (bad lkey, range outside the MR, another PD, READ into memory without
// LocalWrite) w gets LocProtErr and will complete with it once the WQEs
// before it have; nothing after it starts. It reports whether w can be
// transmitted.
func (qp *QP) startWQE(w *sendWQE) bool {
	r := &qp.req
	r.startIdx++
	w.errStatus = WCSuccess
	need := Access(0)
	if w.hasResponse() && w.opcode != WRAtomicWrite {
		need = AccessLocalWrite // the response is written into the SGEs
	}
	if !qp.resolveSend(w, need) {
		w.errStatus = WCLocProtErr
		r.stalled = true
		r.reqIdx = r.startIdx
		qp.advanceCompletions()
		return false
	}
	npkts := 1
	if w.length > 0 {
		npkts = (int(w.length) + qp.pmtu - 1) / qp.pmtu
	}
	w.firstPSN = r.sqPSN
	w.lastPSN = r.sqPSN.Add(npkts - 1)
	w.nextPSN, w.respPSN = w.firstPSN, w.firstPSN
	if w.hasResponse() {
		r.outReads++
		w.readOut = true
	}
	return true
}

// sendRequest transmits the packet of w at w.nextPSN: one READ request
// (covering the rest of the READ), one atomic, or one SEND/WRITE segment
// (RC, XRC or UC).
func (qp *QP) sendRequest(w *sendWQE) {
	r := &qp.req
	d := qp.dev
	svc := qp.svc()
	psn := w.nextPSN
	retrans := psn.Before(r.sqPSN)
	f := qp.path.f
	f.BTH.PSN = psn
	f.XRCSRQ = w.remoteSRQN // written only for XRC opcodes
	idx := int(psn.Diff(w.firstPSN))
	off := idx * qp.pmtu
	if w.isAtomic() {
		f.BTH.Opcode = proto.OpRCCompareSwap
		if w.opcode == WRAtomicFetchAndAdd {
			f.BTH.Opcode = proto.OpRCFetchAdd
		}
		f.BTH.AckReq = true
		f.AtomicETH = proto.AtomicETHFields{VA: w.remoteAddr, RKey: w.rkey, SwapData: w.swap, CompareData: w.compareAdd}
		if w.opcode == WRAtomicFetchAndAdd {
			// FETCH_ADD carries its operand in SwapData (IBA 9.3.4).
			f.AtomicETH.SwapData, f.AtomicETH.CompareData = w.compareAdd, 0
		}
		fb, _ := qp.txBegin(&f, true)
		qp.txEnd(&f, fb, nil)
		w.nextPSN = w.lastPSN.Next()
		r.noAckPkts = 0
	} else if w.opcode == WRAtomicWrite {
		// IBA 1.5 9.4.6: RETH and the 8-byte value, one packet.
		f.BTH.Opcode = proto.OpRCAtomicWrite
		f.BTH.AckReq = true
		f.RETH = proto.RETHFields{VA: w.remoteAddr, RKey: w.rkey, DMALength: 8}
		fb, po := qp.txBegin(&f, true)
		payload := fb.b[po : po+8]
		if w.length == 0 {
			binary.LittleEndian.PutUint64(payload, w.compareAdd)
		} else if !qp.gather(w, 0, payload) {
			qp.gatherFailed(w, fb)
			return
		}
		qp.txEnd(&f, fb, payload)
		w.nextPSN = w.lastPSN.Next()
		r.noAckPkts = 0
	} else if w.isRead() {
		f.BTH.Opcode = proto.OpRCReadRequest
		f.BTH.AckReq = true
		f.RETH = proto.RETHFields{VA: w.remoteAddr + uint64(off), RKey: w.rkey, DMALength: w.length - uint32(off)}
		fb, _ := qp.txBegin(&f, true)
		qp.txEnd(&f, fb, nil)
		w.nextPSN = w.lastPSN.Next()
		r.noAckPkts = 0
	} else {
		n := min(qp.pmtu, int(w.length)-off)
		first, last := idx == 0, psn == w.lastPSN
		op := wrInfo(w.opcode)
		f.BTH.Opcode = segmentOpcode(op.write, op.imm, first, last) + svc.opBase
		if op.inv && last {
			// SEND_LAST/ONLY_WITH_INVALIDATE carry the IETH (IBA 9.3.8).
			f.BTH.Opcode = proto.OpRCSendLastInvalidate
			if first {
				f.BTH.Opcode = proto.OpRCSendOnlyInvalidate
			}
			f.InvalidateRKey = w.imm
		}
		if op.write && first {
			f.RETH = proto.RETHFields{VA: w.remoteAddr, RKey: w.rkey, DMALength: w.length}
		}
		if last {
			f.Imm = w.imm
			f.BTH.SE = w.flags&SendSolicited != 0 && w.opcode != WRRDMAWrite
		}
		r.noAckPkts++
		// Ask for an ACK at the end of each message, every ackReqInterval
		// packets, and when the window is about to close. Nothing
		// acknowledges UC.
		if svc.reliable &&
			(last || r.forceAck || r.noAckPkts >= ackReqInterval || int(r.sqPSN.Diff(r.una)) >= qp.window()-1) {
			f.BTH.AckReq = true
			r.noAckPkts = 0
		}
		fb, po := qp.txBegin(&f, true)
		payload := fb.b[po : po+n]
		if !qp.gather(w, off, payload) {
			qp.gatherFailed(w, fb)
			return
		}
		qp.txEnd(&f, fb, payload)
		w.nextPSN = psn.Next()
	}
	if retrans {
		d.ctr.retransmits.Add(1)
	} else {
		r.sqPSN = w.nextPSN
	}
	if w.nextPSN == w.lastPSN.Next() {
		r.reqIdx++
		if r.reqIdx != r.startIdx { // resending a WQE sent before
			nw := qp.sqSlot(r.reqIdx)
			nw.nextPSN = nw.firstPSN
		}
	}
	if !svc.reliable {
		// UC: nothing is outstanding once sent, and a WQE completes
		// with its last packet.
		r.una = r.sqPSN
		if w.nextPSN == w.lastPSN.Next() {
			qp.completeSend(w, WCSuccess)
		}
		return
	}
	if r.deadline.IsZero() {
		qp.armTimer()
	}
}

// gatherFailed abandons the packet being built for w, whose payload
// could not be read from its SGEs: w fails with LocProtErr and nothing
// after it is sent.
func (qp *QP) gatherFailed(w *sendWQE, fb *frameBuf) {
	if qp.path.loopback {
		qp.dev.eng.putBuf(fb)
	}
	w.errStatus = WCLocProtErr
	qp.req.stalled = true
	qp.advanceCompletions()
}

// packetBytes estimates the size on the wire of w's next packet, for
// pacing: the payload plus the headers of a RoCEv2 frame over IPv4.
func (qp *QP) packetBytes(w *sendWQE) int {
	const headers = 14 + 20 + 8 + 12 + 16 + 4
	if w.hasResponse() {
		return headers + 28
	}
	off := int(w.nextPSN.Diff(w.firstPSN)) * qp.pmtu
	return headers + min(qp.pmtu, max(int(w.length)-off, 0))
}

// segmentOpcode picks the RC opcode of a SEND or WRITE segment (IBA 9.4.1).
func segmentOpcode(write, imm, first, last bool) proto.Opcode {
	var op proto.Opcode
	switch {
	case first && last:
		op = proto.OpRCSendOnly
		if imm {
			op = proto.OpRCSendOnlyImm
		}
	case first:
		op = proto.OpRCSendFirst
	case last:
		op = proto.OpRCSendLast
		if imm {
			op = proto.OpRCSendLastImm
		}
	default:
		op = proto.OpRCSendMiddle
	}
	if write {
		// WRITE opcodes are the SEND ones + 6 (table 38).
		op += proto.OpRCWriteFirst - proto.OpRCSendFirst
	}
	return op
}

// armTimer starts the local ACK timeout for the oldest outstanding packet,
// and the tail-loss probe before it.
// The Clock timer is armed lazily: moving the deadline does not touch it;
// when it fires, onRetryTimer re-arms it for the remaining time. That keeps
// timer allocations off the per-packet path. Both deadlines only move
// later (each is now plus a fixed delay), so a timer already running
// fires no later than either.
func (qp *QP) armTimer() {
	r := &qp.req
	to := LocalAckTimeout(qp.attr.Timeout)
	if to == 0 || r.rnrWait {
		r.deadline, r.probeAt = zeroTime, zeroTime
		return
	}
	now := qp.dev.clock.Now()
	r.deadline = now.Add(to)
	first := to
	r.probeAt = zeroTime
	if pd := probeDelay(to); pd > 0 && r.probes < maxTailProbes {
		r.probeAt = now.Add(pd << r.probes)
		first = min(first, pd<<r.probes)
	}
	if r.timer == nil {
		qp.startTimer(first)
	}
}

// maxTailProbes is how many tail-loss probes a requester sends between
// two forward progresses before it leaves recovery to the local ACK
// timeout; each waits twice as long as the one before.
const maxTailProbes = 2

// probeDelay is how long a requester waits for an acknowledgement before
// it sends a tail-loss probe: a sixteenth of the local ACK timeout (4.2 ms
// at perftest's default timeout 14), and none when that is under 1 ms.
func probeDelay(to time.Duration) time.Duration {
	pd := to / 16
	if pd < time.Millisecond {
		return 0
	}
	return pd
}

func (qp *QP) startTimer(d time.Duration) {
	e := &qp.dev.eng
	qp.req.timer = qp.dev.clock.AfterFunc(d, func() { e.signal(qp, evRetry) })
}

// restartTimer is called on progress: a new deadline if packets are still
// outstanding, none otherwise.
func (qp *QP) restartTimer() {
	r := &qp.req
	if r.una == r.sqPSN {
		r.deadline, r.probeAt = zeroTime, zeroTime
		return
	}
	qp.armTimer()
}

// onRetryTimer handles the local ACK timer (IBA 9.7.6): retransmit from
// the oldest unacknowledged PSN, up to retry_cnt times without progress,
// then complete the oldest WQE with RetryExcErr. retry_cnt 7 means 7 retries
// here, as in the IBTA and on hardware; rxe alone treats it as infinite.
func (qp *QP) onRetryTimer() {
	r := &qp.req
	st := qp.State()
	if (st != QPStateRTS && st != QPStateSQD) || r.deadline.IsZero() || r.rnrWait {
		return
	}
	if r.una == r.sqPSN {
		r.deadline, r.probeAt = zeroTime, zeroTime
		return
	}
	now := qp.dev.clock.Now()
	if now.Before(r.deadline) {
		if !r.probeAt.IsZero() && !now.Before(r.probeAt) {
			qp.tailProbe(now)
		}
		next := r.deadline
		if !r.probeAt.IsZero() && r.probeAt.Before(next) {
			next = r.probeAt
		}
		qp.startTimer(next.Sub(now))
		return
	}
	d := qp.dev
	d.ctr.retransmitTimeouts.Add(1)
	if r.retryLeft == 0 {
		d.ctr.retryExceeded.Add(1)
		qp.failHead(WCRetryExcErr)
		return
	}
	r.retryLeft--
	r.readRetried = false
	qp.retransmitFrom(r.una)
}

// tailProbe is the requester's tail-loss probe, as HCAs' adaptive
// retransmission and TCP's TLP do: when nothing has been acknowledged for
// probeDelay, the last packet sent goes out again asking for an ACK. If
// the responder has everything, the duplicate brings back the ACK that was
// late or lost; if packets at the end of the window were dropped, and so
// no later packet showed the gap, it arrives out of sequence and the
// responder NAKs the first missing PSN. Either way recovery starts long
// before the local ACK timeout, which still runs and still counts
// retries. The probe changes no state but the packet it sends, and it is
// never a READ or atomic request (a READ would be executed again).
func (qp *QP) tailProbe(now time.Time) {
	r := &qp.req
	r.probes++
	r.probeAt = zeroTime
	if pd := probeDelay(LocalAckTimeout(qp.attr.Timeout)); pd > 0 && r.probes < maxTailProbes {
		r.probeAt = now.Add(pd << r.probes)
	}
	last := r.sqPSN.Add(-1)
	for i := r.compIdx; i != r.startIdx; i++ {
		w := qp.sqSlot(i)
		if w.errStatus != 0 || last.Before(w.firstPSN) {
			return
		}
		if last.After(w.lastPSN) {
			continue
		}
		if w.hasResponse() || qp.path.loopback {
			return
		}
		reqIdx, next, noAck := r.reqIdx, w.nextPSN, r.noAckPkts
		r.reqIdx, w.nextPSN, r.forceAck = i, last, true
		qp.sendRequest(w)
		r.reqIdx, w.nextPSN, r.noAckPkts, r.forceAck = reqIdx, next, noAck, false
		qp.dev.ctr.tailProbes.Add(1)
		return
	}
}

// onRNRTimer resumes after an RNR NAK's delay.
func (qp *QP) onRNRTimer() {
	r := &qp.req
	if !r.rnrWait {
		return
	}
	r.rnrWait = false
	if st := qp.State(); st != QPStateRTS && st != QPStateSQD {
		return
	}
	// From the oldest unacknowledged PSN: the NAK'd one, earlier if a
	// READ before it lost responses, or later if an ACK covered it while
	// we waited (a retransmission got through).
	qp.retransmitFrom(r.una)
	// Work posted during the wait was not started (reqStep stops while
	// rnrWait): the QP must be scheduled even if nothing is resent.
	qp.dev.eng.schedule(qp)
}

// retransmitFrom restarts transmission at psn: the WQE holding it resends
// from there, every later started WQE from its first packet.
func (qp *QP) retransmitFrom(psn proto.PSN) {
	r := &qp.req
	for i := r.compIdx; i != r.startIdx; i++ {
		w := qp.sqSlot(i)
		if w.errStatus != 0 {
			break
		}
		if !psn.Before(w.firstPSN) && !psn.After(w.lastPSN) {
			r.reqIdx = i
			w.nextPSN = psn
			r.noAckPkts = 0
			qp.armTimer()
			qp.dev.eng.schedule(qp)
			return
		}
	}
	qp.restartTimer()
}
