package rdma

import "fmt"

// SendRoom reports whether PostSend has room for one more request now.
// Room only grows while no one else posts: a caller that is the QP's
// only poster and found room can post one request without
// ErrNoResources. The device backend uses it to publish a WQE's
// consumption before the engine can complete it.
func (qp *QP) SendRoom() bool {
	return qp.sqProd.Load()-qp.sqCons.Load() < uint32(qp.init.Cap.MaxSendWR)
}

// RecvHeld is the number of receive WRs posted to the QP's own receive
// queue and not yet retired.
func (qp *QP) RecvHeld() int {
	return int(qp.rqProd.Load() - qp.rqCons.Load())
}

// RecvRoom is SendRoom for PostRecv.
func (qp *QP) RecvRoom() bool {
	return qp.rqProd.Load()-qp.rqCons.Load() < uint32(qp.init.Cap.MaxRecvWR)
}

// PostSend posts send work requests (ibv_post_send). It checks the QP state
// (RTS, SQD, SQE or ERR; in ERR the requests complete with WRFlushErr), the
// opcode, the SGE count, the total length, inline size and queue space, and
// copies each request (and its inline data, read from the DMA space now) into
// the send queue, so wrs may be reused when it returns. On failure it returns
// a *PostError naming the first request not posted; earlier ones were posted.
//
// Keys and address ranges of the SGEs are checked when the request executes,
// as on hardware and rxe: a bad lkey completes the request with LocProtErr.
// Safe for concurrent use; it does not allocate unless it fails.
func (qp *QP) PostSend(wrs []SendWR) error {
	d := qp.dev
	if d.closed.Load() {
		return &PostError{Index: 0, Err: ErrClosed}
	}
	if qp.isXRCTgt() {
		return &PostError{Index: 0, Err: fmt.Errorf("post send to XRC target QP %#x: it has no send queue: %w", qp.qpn, ErrInvalid)}
	}
	switch st := qp.State(); st {
	case QPStateRTS, QPStateSQD, QPStateSQE, QPStateErr:
	default:
		return &PostError{Index: 0, Err: fmt.Errorf("post send to QP %#x in %v: %w", qp.qpn, st, ErrInvalidState)}
	}
	capWR := uint32(qp.init.Cap.MaxSendWR)
	qp.sqMu.Lock()
	prod := qp.sqProd.Load()
	start := prod
	var perr error
	for i := range wrs {
		wr := &wrs[i]
		if err := qp.checkSendWR(wr); err != nil {
			perr = &PostError{Index: i, Err: err}
			break
		}
		if prod-qp.sqCons.Load() >= capWR {
			perr = &PostError{Index: i, Err: fmt.Errorf("send queue of QP %#x full (%d WRs): %w", qp.qpn, capWR, ErrNoResources)}
			break
		}
		w := qp.sq.slot(prod)
		w.wrID, w.opcode, w.flags, w.imm = wr.WRID, wr.Opcode, wr.SendFlags, wr.ImmData
		w.remoteAddr, w.rkey = wr.RemoteAddr, wr.RKey
		w.compareAdd, w.swap = wr.CompareAdd, wr.Swap
		w.ah, w.remoteQPN, w.remoteQKey = nil, 0, 0
		w.remoteSRQN = wr.RemoteSRQN & xrcSRQNMask
		if wr.Opcode == WRBindMW {
			w.bind = wr.Bind
		}
		if wr.Opcode == WRBindMW || wr.Opcode == WRLocalInv {
			// Local operations: no data, no SGEs.
			w.length, w.isInline, w.inline = 0, false, nil
			w.sge = w.sgeBuf[:0]
			prod++
			continue
		}
		if qp.isUD() {
			w.ah, w.remoteQPN, w.remoteQKey = wr.AH, wr.RemoteQPN, wr.RemoteQKey
		}
		var length uint64
		for _, s := range wr.SGList {
			length += uint64(s.Length)
		}
		w.length = uint32(length)
		w.isInline = wr.SendFlags&SendInline != 0 && wr.Opcode != WRRDMARead
		if w.isInline {
			w.sge = w.sgeBuf[:0]
			if uint64(cap(w.inlineBuf)) < length {
				w.inlineBuf = make([]byte, length)
			}
			w.inline = w.inlineBuf[:length]
			off := 0
			for _, s := range wr.SGList {
				if err := d.mem.ReadAt(w.inline[off:off+int(s.Length)], s.Addr); err != nil {
					perr = &PostError{Index: i, Err: fmt.Errorf("inline data at %#x: %v: %w", s.Addr, err, ErrInvalid)}
					break
				}
				off += int(s.Length)
			}
			if perr != nil {
				break
			}
		} else {
			w.inline = nil
			w.sgeBuf = sgeSlots(w.sgeBuf, len(wr.SGList))
			w.sge = w.sgeBuf[:len(wr.SGList)]
			copy(w.sge, wr.SGList)
		}
		prod++
	}
	qp.sqProd.Store(prod)
	qp.sqMu.Unlock()
	if prod != start {
		d.eng.signal(qp, evSQ)
	}
	return perr
}

// checkSendWR checks a send WR at post time: the opcode against the QP
// type's table (service.go), the SGE count, then what the type needs.
func (qp *QP) checkSendWR(wr *SendWR) error {
	if err := qp.checkOpcode(wr.Opcode); err != nil {
		return err
	}
	if wrInfo(wr.Opcode).local {
		// Executed by the requester in order (mw.go); the operands are
		// checked then and a bad one completes the WR with an error.
		return nil
	}
	if len(wr.SGList) > qp.init.Cap.MaxSendSGE {
		return fmt.Errorf("%d SGEs, QP %#x allows %d: %w", len(wr.SGList), qp.qpn, qp.init.Cap.MaxSendSGE, ErrInvalid)
	}
	var length uint64
	for _, s := range wr.SGList {
		length += uint64(s.Length)
	}
	switch {
	case qp.init.QPType == QPTypeRawPacket:
		return qp.checkRawSendWR(wr, length)
	case qp.isUD():
		return qp.checkUDSendWR(wr, length)
	}
	if length > MaxMsgSize {
		return fmt.Errorf("message of %d bytes exceeds %d: %w", length, MaxMsgSize, ErrInvalid)
	}
	if wr.Opcode == WRAtomicCmpAndSwp || wr.Opcode == WRAtomicFetchAndAdd {
		// IBA 9.4.5: an atomic operates on one aligned 64-bit word; the
		// original value comes back into 8 bytes of local memory.
		if length != 8 {
			return fmt.Errorf("%v needs an 8-byte local buffer, got %d bytes: %w", wr.Opcode, length, ErrInvalid)
		}
		if wr.RemoteAddr%8 != 0 {
			return fmt.Errorf("%v at remote address %#x: not 8-byte aligned: %w", wr.Opcode, wr.RemoteAddr, ErrInvalid)
		}
		if wr.SendFlags&SendInline != 0 {
			return fmt.Errorf("inline %v: %w", wr.Opcode, ErrInvalid)
		}
	}
	if wr.Opcode == WRAtomicWrite {
		// IBA 1.5 ATOMIC WRITE: one aligned 64-bit word, from 8 bytes
		// of local data (inline allowed: it is the value).
		// With no data the value is CompareAdd (the device's WQE
		// carries it so).
		if length != 8 && (length != 0 || len(wr.SGList) != 0) {
			return fmt.Errorf("%v needs 8 bytes of data, got %d: %w", wr.Opcode, length, ErrInvalid)
		}
		if wr.RemoteAddr%8 != 0 {
			return fmt.Errorf("%v at remote address %#x: not 8-byte aligned: %w", wr.Opcode, wr.RemoteAddr, ErrInvalid)
		}
	}
	if wr.SendFlags&SendInline != 0 {
		if wr.Opcode == WRRDMARead {
			return fmt.Errorf("inline RDMA READ: %w", ErrInvalid)
		}
		if length > uint64(qp.init.Cap.MaxInlineData) {
			return fmt.Errorf("%d bytes of inline data, QP %#x allows %d: %w", length, qp.qpn, qp.init.Cap.MaxInlineData, ErrInvalid)
		}
	}
	return nil
}

// PostRecv posts receive work requests (ibv_post_recv). The QP must not
// be in RESET; in ERR the requests complete with WRFlushErr. Like PostSend
// it copies the requests and returns a *PostError for the first one it
// could not post. Safe for concurrent use; no allocation unless it fails.
func (qp *QP) PostRecv(wrs []RecvWR) error {
	d := qp.dev
	if d.closed.Load() {
		return &PostError{Index: 0, Err: ErrClosed}
	}
	if st := qp.State(); st == QPStateReset {
		return &PostError{Index: 0, Err: fmt.Errorf("post recv to QP %#x in %v: %w", qp.qpn, st, ErrInvalidState)}
	}
	if qp.srq != nil {
		return &PostError{Index: 0, Err: fmt.Errorf("post recv to QP %#x: it receives through SRQ %d: %w", qp.qpn, qp.srq.handle, ErrInvalid)}
	}
	if qp.isXRC() {
		return &PostError{Index: 0, Err: fmt.Errorf("post recv to XRC QP %#x: it has no receive queue: %w", qp.qpn, ErrInvalid)}
	}
	capWR := uint32(qp.init.Cap.MaxRecvWR)
	qp.rqMu.Lock()
	prod := qp.rqProd.Load()
	start := prod
	var perr error
	for i := range wrs {
		wr := &wrs[i]
		if len(wr.SGList) > qp.init.Cap.MaxRecvSGE {
			perr = &PostError{Index: i, Err: fmt.Errorf("%d SGEs, QP %#x allows %d: %w", len(wr.SGList), qp.qpn, qp.init.Cap.MaxRecvSGE, ErrInvalid)}
			break
		}
		if prod-qp.rqCons.Load() >= capWR {
			perr = &PostError{Index: i, Err: fmt.Errorf("receive queue of QP %#x full (%d WRs): %w", qp.qpn, capWR, ErrNoResources)}
			break
		}
		w := qp.rq.slot(prod)
		w.wrID = wr.WRID
		w.sgeBuf = sgeSlots(w.sgeBuf, len(wr.SGList))
		w.sge = w.sgeBuf[:len(wr.SGList)]
		copy(w.sge, wr.SGList)
		w.length = 0
		for _, s := range wr.SGList {
			w.length += uint64(s.Length)
		}
		prod++
	}
	qp.rqProd.Store(prod)
	qp.rqMu.Unlock()
	// Only a QP in ERR needs the engine to look at new receives (to flush
	// them); the responder finds the others when a SEND arrives. Reading
	// the state after publishing pairs with enterError, which stores the
	// state before flushing.
	if prod != start && qp.State() == QPStateErr {
		d.eng.signal(qp, evRQ)
	}
	return perr
}
