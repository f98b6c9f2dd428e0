package rdma

import (
	"fmt"
	"sync/atomic"

	"github.com/PacketFive/hinic/internal/proto"
)

// XRC, the eXtended Reliable Connected service (IBA 9.8, 10.2.x, 11.x).
//
// An XRC domain (XRCD) groups XRC SRQs and XRC target QPs. The sending
// side is an XRC initiator QP (QPTypeXRCIni): an RC requester whose
// requests use the XRC opcodes (RC's at base 0xA0) and name, in the
// XRCETH, the XRC SRQ they are for at the target. The receiving side is
// an XRC target QP (QPTypeXRCTgt): an RC responder without a receive
// queue, CQ or PD of its own. The SRQ the XRCETH names must belong to the
// target QP's XRCD; it supplies the receive WR, the CQ its completion goes
// to and the PD that checks R_Keys. A request naming any other SRQ is
// answered with NAK Invalid Request, a class C responder error (IBA
// 9.9.3) that moves the target QP to ERR.
//
// The engine keeps the XRC SRQs it can be asked for by number in
// engine.xsrqs (engine-owned, changed through eng.do).

// DefaultMaxXRCD is the XRC domains a device allows when
// DeviceConfig.MaxXRCD is 0.
const DefaultMaxXRCD = 256

// XRCD is an XRC domain (ibv_open_xrcd). Safe for concurrent use.
type XRCD struct {
	dev    *Device
	handle uint32
	refs   atomic.Int32 // XRC SRQs and target QPs in the domain
	dead   atomic.Bool
}

// Handle returns a number that identifies the XRCD on its device.
func (x *XRCD) Handle() uint32 { return x.handle }

// AllocXRCD allocates an XRC domain (the kernel's alloc_xrcd).
func (d *Device) AllocXRCD() (*XRCD, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.nXRCD >= d.cfg.MaxXRCD {
		return nil, fmt.Errorf("rdma: alloc XRCD: %d XRCDs allocated (MaxXRCD): %w", d.nXRCD, ErrNoResources)
	}
	d.nXRCD++
	d.xrcdID++
	return &XRCD{dev: d, handle: d.xrcdID}, nil
}

// Dealloc frees the XRCD. It fails with ErrBusy while XRC SRQs or target
// QPs are in it.
func (x *XRCD) Dealloc() error {
	d := x.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if x.dead.Load() {
		return fmt.Errorf("rdma: dealloc XRCD %d: already deallocated: %w", x.handle, ErrInvalid)
	}
	if n := x.refs.Load(); n > 0 {
		return fmt.Errorf("rdma: dealloc XRCD %d: %d SRQs/QPs still use it: %w", x.handle, n, ErrBusy)
	}
	x.dead.Store(true)
	d.nXRCD--
	return nil
}

func (d *Device) checkXRCD(x *XRCD) error {
	switch {
	case x == nil || x.dev != d:
		return fmt.Errorf("XRCD of another device or nil: %w", ErrInvalid)
	case x.dead.Load():
		return fmt.Errorf("XRCD %d deallocated: %w", x.handle, ErrInvalid)
	}
	return nil
}

// xrcSRQNMask keeps an SRQ number to the XRCETH's 24 bits.
const xrcSRQNMask = 0xFFFFFF

// isXRC reports whether the QP is of the XRC service (either side).
func (qp *QP) isXRC() bool {
	return qp.init.QPType == QPTypeXRCIni || qp.init.QPType == QPTypeXRCTgt
}

// isXRCTgt reports whether the QP is an XRC target QP.
func (qp *QP) isXRCTgt() bool { return qp.init.QPType == QPTypeXRCTgt }

// rsrq is the SRQ receives come from: the QP's own, or for an XRC target
// the one the current request named (engine).
func (qp *QP) rsrq() *SRQ {
	if qp.srq != nil {
		return qp.srq
	}
	return qp.xsrq
}

// rcq is the CQ receive completions go to: an XRC target's is its current
// SRQ's (engine).
func (qp *QP) rcq() *CQ {
	if qp.isXRCTgt() {
		return qp.xsrq.cq
	}
	return qp.recvCQ
}

// respPD is the PD remote accesses are checked in: an XRC target's is its
// current SRQ's (IBA 9.8: the XRC SRQ's PD governs the target's memory
// access).
func (qp *QP) respPD() *PD {
	if qp.isXRCTgt() {
		return qp.xsrq.pd
	}
	return qp.pd
}

// rcOpcode maps an XRC opcode to its RC twin, so the requester and the
// responder compare one set of opcodes; others pass unchanged.
func rcOpcode(op proto.Opcode) proto.Opcode {
	if op.Transport() == proto.TransportXRC {
		return op - proto.XRCBase
	}
	return op
}

// xrcSelect looks up the XRC SRQ an XRC request names (IBA 9.8): it
// must exist, be in the target QP's XRCD, and for the later packets of a
// SEND be the one the message started on. On failure it NAKs Invalid
// Request and moves the QP to ERR, and reports false (engine).
func (qp *QP) xrcSelect(pkt *proto.Packet, psn proto.PSN) bool {
	d := qp.dev
	n := pkt.XRCETH.XRCSRQ()
	s := d.eng.xsrqs[n]
	ok := s != nil && !s.dead.Load() && s.xrcd == qp.xrcd
	if ok && qp.resp.op == respSend && qp.srqHeld && s != qp.xsrq {
		ok = false // a SEND's packets all go to one SRQ
	}
	if !ok {
		d.ctr.xrcBadSRQ.Add(1)
		if qp.xsrq == nil || qp.xsrq.dead.Load() {
			// Nothing to complete: the SRQ (and maybe its CQ) is gone.
			qp.resp.op, qp.srqHeld = respIdle, false
		}
		qp.respFatal(psn, proto.NAKInvalidRequest, WCRemInvReqErr)
		return false
	}
	qp.xsrq = s
	return true
}
