package rdma

import (
	"encoding/binary"
	"sync/atomic"
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

// reqStep transmits up to budget packets. progressed reports that it sent
// something; more that it stopped only because of the budget.
func (qp *QP) reqStep(budget int) (progressed, more bool) {
	if qp.isUD() || qp.init.QPType == QPTypeRawPacket {
		return qp.localStep(budget)
	}
	if qp.init.QPType == QPTypeUC {
		return qp.ucStep(budget)
	}
	st := qp.State()
	if st != QPStateRTS && st != QPStateSQD {
		return false, false
	}
	r := &qp.req
	if r.rnrWait {
		return false, false
	}
	sent := 0
	for sent < budget {
		if r.reqIdx == r.startIdx {
			// The next WQE has not been started.
			if st == QPStateSQD || r.stalled || r.startIdx == qp.sqProd.Load() {
				return sent > 0, false
			}
			w := qp.sqSlot(r.startIdx)
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
	d := qp.dev
	r.startIdx++
	w.errStatus = WCSuccess
	if !w.isInline {
		w.mrs = mrSlots(w.mrs, len(w.sge))
		for i, s := range w.sge {
			w.mrs[i] = nil
			if s.Length == 0 {
				continue
			}
			mr := d.lookupMR(s.LKey)
			if mr == nil || mr.pd != qp.pd || !mr.contains(s.Addr, uint64(s.Length)) ||
				(w.hasResponse() && w.opcode != WRAtomicWrite && mr.access&AccessLocalWrite == 0) {
				w.errStatus = WCLocProtErr
				break
			}
			w.mrs[i] = mr
		}
	}
	if w.errStatus != WCSuccess {
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
// (covering the rest of the READ) or one SEND/WRITE segment.
func (qp *QP) sendRequest(w *sendWQE) {
	r := &qp.req
	d := qp.dev
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
			if qp.path.loopback {
				d.eng.putBuf(fb)
			}
			w.errStatus = WCLocProtErr
			r.stalled = true
			qp.advanceCompletions()
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
		write := w.opcode == WRRDMAWrite || w.opcode == WRRDMAWriteWithImm
		imm := w.opcode == WRSendWithImm || w.opcode == WRRDMAWriteWithImm
		f.BTH.Opcode = segmentOpcode(write, imm, first, last)
		if w.opcode == WRSendWithInv && last {
			// SEND_LAST/ONLY_WITH_INVALIDATE carry the IETH (IBA 9.3.8).
			f.BTH.Opcode = proto.OpRCSendLastInvalidate
			if first {
				f.BTH.Opcode = proto.OpRCSendOnlyInvalidate
			}
			f.InvalidateRKey = w.imm
		}
		if write && first {
			f.RETH = proto.RETHFields{VA: w.remoteAddr, RKey: w.rkey, DMALength: w.length}
		}
		if last {
			f.Imm = w.imm
			f.BTH.SE = w.flags&SendSolicited != 0 && w.opcode != WRRDMAWrite
		}
		r.noAckPkts++
		// Ask for an ACK at the end of each message, every ackReqInterval
		// packets, and when the window is about to close.
		if last || r.forceAck || r.noAckPkts >= ackReqInterval || int(r.sqPSN.Diff(r.una)) >= qp.window()-1 {
			f.BTH.AckReq = true
			r.noAckPkts = 0
		}
		fb, po := qp.txBegin(&f, true)
		payload := fb.b[po : po+n]
		if !qp.gather(w, off, payload) {
			if qp.path.loopback {
				d.eng.putBuf(fb)
			}
			w.errStatus = WCLocProtErr
			r.stalled = true
			qp.advanceCompletions()
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
	if r.deadline.IsZero() {
		qp.armTimer()
	}
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

// gather copies len(dst) bytes of w's message at offset off into dst.
func (qp *QP) gather(w *sendWQE, off int, dst []byte) bool {
	if w.isInline {
		copy(dst, w.inline[off:])
		return true
	}
	for i, s := range w.sge {
		if len(dst) == 0 {
			break
		}
		if off >= int(s.Length) {
			off -= int(s.Length)
			continue
		}
		n := min(int(s.Length)-off, len(dst))
		if w.mrs[i].read(s.Addr+uint64(off), dst[:n]) != nil {
			return false
		}
		dst, off = dst[n:], 0
	}
	return true
}

// scatter writes data at offset off of w's local buffers (READ responses).
func (qp *QP) scatter(sge []SGE, mrs []*MR, off int, data []byte) bool {
	for i, s := range sge {
		if len(data) == 0 {
			break
		}
		if off >= int(s.Length) {
			off -= int(s.Length)
			continue
		}
		n := min(int(s.Length)-off, len(data))
		if mrs[i].write(s.Addr+uint64(off), data[:n]) != nil {
			return false
		}
		data, off = data[n:], 0
	}
	return true
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
			WRID: w.wrID, Status: status, Opcode: wcOpcode(w.opcode), ByteLen: w.length,
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

func wcOpcode(op WROpcode) WCOpcode {
	switch op {
	case WRRDMAWrite, WRRDMAWriteWithImm:
		return WCRDMAWrite
	case WRRDMARead:
		return WCRDMARead
	case WRAtomicCmpAndSwp:
		return WCCompSwap
	case WRAtomicFetchAndAdd:
		return WCFetchAdd
	case WRBindMW:
		return WCBindMW
	case WRLocalInv:
		return WCLocalInv
	case WRAtomicWrite:
		return WCAtomicWrite
	}
	return WCSend
}

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
