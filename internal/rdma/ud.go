package rdma

import (
	"fmt"
	"sync/atomic"

	"github.com/PacketFive/hinic/internal/proto"
)

// Unreliable datagram (UD) service (IBA 9.8, 10.2.5): single-packet
// messages addressed per work request by an address handle, a remote QPN
// and a Q_Key, with no acknowledgement. A receive buffer gets the 40-byte
// GRH area first, then the payload, as libibverbs applications expect;
// for RoCEv2 over IPv4 the IPv4 header fills the last 20 bytes of that
// area and the first 20 are zero (how ibv_init_ah_from_wc tells the two
// families apart), over IPv6 the area holds the IPv6 header.

// GRHSize is the space at the start of every UD receive buffer.
const GRHSize = 40

// mcastQPN is the destination QPN of a multicast packet (IBA 10.5.2.2).
const mcastQPN = 0xFFFFFF

// udTransitions is the UD column of ib_modify_qp_is_ok's table.
var udTransitions = func() (t transitions) {
	t = baseTransitions()
	t[QPStateReset][QPStateInit] = transition{valid: true, req: QPAttrPKeyIndex | QPAttrPort | QPAttrQKey}
	t[QPStateInit][QPStateInit] = transition{valid: true, opt: QPAttrPKeyIndex | QPAttrPort | QPAttrQKey}
	t[QPStateInit][QPStateRTR] = transition{valid: true, opt: QPAttrPKeyIndex | QPAttrQKey}
	t[QPStateRTR][QPStateRTS] = transition{valid: true, req: QPAttrSQPSN, opt: QPAttrCurState | QPAttrQKey}
	t[QPStateRTS][QPStateRTS] = transition{valid: true, opt: QPAttrCurState | QPAttrQKey}
	t[QPStateRTS][QPStateSQD] = transition{valid: true, opt: QPAttrEnSQDAsyncNotify}
	t[QPStateSQD][QPStateRTS] = transition{valid: true, opt: QPAttrCurState | QPAttrQKey}
	t[QPStateSQD][QPStateSQD] = transition{valid: true, opt: QPAttrPKeyIndex | QPAttrQKey}
	t[QPStateSQE][QPStateRTS] = transition{valid: true, opt: QPAttrCurState | QPAttrQKey}
	return t
}()

// specialTransitions is the table of QP0 and QP1 (IB_QPT_SMI, IB_QPT_GSI):
// UD's, but RESET -> INIT needs only the P_Key index and the Q_Key (the
// port is the QP's own), as in ib_modify_qp_is_ok; ib_mad moves QP1 so.
var specialTransitions = func() (t transitions) {
	t = udTransitions
	t[QPStateReset][QPStateInit] = transition{valid: true, req: QPAttrPKeyIndex | QPAttrQKey, opt: QPAttrPort}
	return t
}()

// isMcastGID reports whether g is a multicast group: ff00::/8, or an
// IPv4-mapped 224.0.0.0/4 address.
func isMcastGID(g [16]byte) bool {
	return g[0] == 0xff || (ipv4Mapped(g) && g[12]&0xf0 == 0xe0)
}

// mcastMAC is the Ethernet group address of a multicast GID (RFC 1112 for
// IPv4, RFC 2464 for IPv6).
func mcastMAC(g [16]byte) [6]byte {
	if ipv4Mapped(g) {
		return [6]byte{0x01, 0x00, 0x5e, g[13] & 0x7f, g[14], g[15]}
	}
	return [6]byte{0x33, 0x33, g[12], g[13], g[14], g[15]}
}

// mcastPath builds the frame template of a send to a multicast group.
func (d *Device) mcastPath(ah *AHAttr, sgid [16]byte) txPath {
	var p txPath
	p.roceHeaders(d.cfg.MAC, mcastMAC(ah.GRH.DGID), sgid, &ah.GRH)
	p.f.BTH.DestQP = mcastQPN
	p.mcast, p.group = true, ah.GRH.DGID
	return p
}

// checkUDSendWR checks a UD work request at post time (checkSendWR has
// checked the opcode and the SGE count).
func (qp *QP) checkUDSendWR(wr *SendWR, length uint64) error {
	if wr.SendFlags&SendInline != 0 && length > uint64(qp.init.Cap.MaxInlineData) {
		return fmt.Errorf("%d bytes of inline data, QP %#x allows %d: %w", length, qp.qpn, qp.init.Cap.MaxInlineData, ErrInvalid)
	}
	ah := wr.AH
	if ah == nil || ah.dead.Load() {
		return fmt.Errorf("UD send without a live address handle: %w", ErrInvalid)
	}
	if ah.pd != qp.pd {
		return fmt.Errorf("address handle of another PD: %w", ErrInvalid)
	}
	if !ah.path.mcast && wr.RemoteQPN > proto.QPNMask {
		return fmt.Errorf("remote QPN %#x exceeds 24 bits: %w", wr.RemoteQPN, ErrInvalid)
	}
	if length > uint64(qp.pmtu) {
		return fmt.Errorf("UD message of %d bytes exceeds the path MTU %d: %w", length, qp.pmtu, ErrInvalid)
	}
	return nil
}

// sendDatagram transmits the WQE of a datagram service (a UD or
// special QP's datagram, a raw packet QP's frame) and returns its
// completion status.
func (qp *QP) sendDatagram(w *sendWQE) WCStatus {
	if qp.init.QPType == QPTypeRawPacket {
		return qp.rawSend(w)
	}
	return qp.udSend(w)
}

// udSend transmits one datagram; it returns the completion status.
func (qp *QP) udSend(w *sendWQE) WCStatus {
	d := qp.dev
	e := &d.eng
	r := &qp.req
	if !qp.resolveSend(w, 0) {
		return WCLocProtErr
	}
	p := &w.ah.path
	f := p.f
	f.UDP.SrcPort = udpSourcePort(qp.qpn)
	f.BTH.Opcode = proto.OpUDSendOnly
	if w.opcode == WRSendWithImm {
		f.BTH.Opcode = proto.OpUDSendOnlyImm
		f.Imm = w.imm
	}
	if !p.mcast {
		f.BTH.DestQP = w.remoteQPN
	}
	f.BTH.PSN = r.sqPSN
	f.BTH.SE = w.flags&SendSolicited != 0
	r.sqPSN = r.sqPSN.Next()
	qkey := w.remoteQKey
	if qkey&0x80000000 != 0 {
		qkey = qp.attr.QKey // IBA 10.2.5: the high bit selects the QP's Q_Key
	}
	f.DETH = proto.DETHFields{QKey: qkey, SrcQP: qp.qpn}
	fb, po := qp.txBeginOn(p, &f, true)
	payload := fb.b[po : po+int(w.length)]
	if !qp.gather(w, 0, payload) {
		if p.loopback {
			e.putBuf(fb)
		}
		return WCLocProtErr
	}
	if qp.qpn == 0 && len(payload) == proto.MADSize {
		if local := qp.smiSend(payload); local {
			if p.loopback {
				e.putBuf(fb)
			}
			d.ctr.udSent.Add(1)
			return WCSuccess
		}
	}
	if p.mcast && e.mcastLocal(p.group, qp) {
		// Other QPs of this device are in the group: they get a copy
		// through the loopback queue, as a NIC's multicast loopback
		// does; the fabric never sends a frame back to its ingress port.
		f.Payload = payload
		if len(e.loopQ)-e.loopHead >= maxLoopQueue {
			d.ctr.rxDropped.Add(1)
		} else if n, err := f.Encode(fb.b[:]); err == nil {
			lb := e.getBuf()
			lb.n = copy(lb.b[:], fb.b[:n])
			e.loopQ = append(e.loopQ, lb)
			d.ctr.loopback.Add(1)
		}
	}
	qp.txEndOn(p, &f, fb, payload)
	d.ctr.udSent.Add(1)
	return WCSuccess
}

// rxUD handles a UD packet: to one QP, or to every QP attached to group
// (when group is not nil).
func (e *engine) rxUD(pkt *proto.Packet, group *[16]byte, fromUs bool) {
	d := e.d
	if pkt.DETH == nil {
		d.ctr.rxMalformed.Add(1)
		return
	}
	if group == nil {
		qp := e.qps[pkt.BTH.DestQP()]
		switch {
		case qp == nil:
			d.ctr.rxUnknownQP.Add(1)
		case !qp.isUD():
			d.ctr.rxUnsupported.Add(1)
		default:
			qp.udReceive(pkt)
		}
		return
	}
	qps := e.mcast[*group]
	if len(qps) == 0 {
		d.ctr.mcastNoListener.Add(1)
		return
	}
	src := pkt.DETH.SrcQP()
	for _, qp := range qps {
		if fromUs && qp.qpn == src {
			continue // the sender does not hear itself
		}
		d.ctr.mcastDelivered.Add(1)
		qp.udReceive(pkt)
	}
}

// udReceive places one datagram in the QP's next receive WR.
func (qp *QP) udReceive(pkt *proto.Packet) {
	if pkt.DETH.QKey() != qp.attr.QKey && qp.qpn != 0 {
		qp.dev.ctr.qkeyViolations.Add(1)
		return
	}
	qp.udPlace(pkt, pkt.Payload)
}

// udPlace places a datagram's payload (its Q_Key already checked) with
// the GRH area and the addressing of pkt.
func (qp *QP) udPlace(pkt *proto.Packet, payload []byte) {
	d := qp.dev
	wc := WC{SrcQP: pkt.DETH.SrcQP()}
	if pkt.ImmDt != nil {
		wc.ImmData, wc.WCFlags = pkt.ImmDt.Value(), WCWithImm
	}
	var area [GRHSize]byte
	grh := area[:]
	switch {
	case pkt.IPv4 != nil:
		copy(grh[20:], pkt.IPv4[:20])
		wc.SL = SLRoCEIPv4
	case pkt.IPv6 != nil:
		copy(grh, pkt.IPv6[:GRHSize])
		wc.SL = SLRoCEIPv6
	case pkt.GRH != nil:
		copy(grh, pkt.GRH[:GRHSize])
	default:
		grh = nil // IB without a GRH: the area is left as it was
	}
	if pkt.LRH != nil {
		wc.SLID, wc.SL = pkt.LRH.SLID(), pkt.LRH.SL()
		if i := d.pkeyIndex(pkt.BTH.PKey()); i > 0 {
			wc.PKeyIndex = uint16(i)
		}
	}
	qp.udDeliver(payload, grh, wc, pkt.BTH.SE())
}

// udDeliver completes the next receive WR with payload after the GRH area
// (filled from grh, WCGRH set, when grh is not nil). wc carries the source
// fields; the rest is filled here.
func (qp *QP) udDeliver(payload, grh []byte, wc WC, solicited bool) {
	d := qp.dev
	if !qp.receiving() {
		return
	}
	w := qp.recvTake()
	if w == nil {
		d.ctr.udNoRecv.Add(1) // no buffer: the datagram is lost, as on the wire
		return
	}
	wc.WRID, wc.Opcode, wc.QPNum = w.wrID, WCRecv, qp.qpn
	if grh != nil {
		wc.WCFlags |= WCGRH
	}
	wc.ByteLen = uint32(GRHSize + len(payload))
	fatal := qp.placeDatagram(w, &wc, grh, GRHSize, payload, &d.ctr.udTooLong)
	qp.completeRecv(&wc, &d.ctr.udReceived, solicited, fatal)
}

// placeDatagram writes a datagram (UD or raw packet) into receive WQE w:
// head at offset 0 when it is not nil, body at bodyOff. A buffer whose
// SGEs do not resolve or cannot be written sets wc.Status to LocProtErr
// and reports a fatal error; one too small for the datagram sets
// LocLenErr, counted in tooLong, and the QP goes on.
func (qp *QP) placeDatagram(w *recvWQE, wc *WC, head []byte, bodyOff int, body []byte, tooLong *atomic.Uint64) (fatal bool) {
	switch {
	case !qp.resolveRecv(w):
		wc.Status = WCLocProtErr
		return true
	case uint64(bodyOff+len(body)) > w.length:
		wc.Status = WCLocLenErr
		tooLong.Add(1)
	case (head != nil && !qp.scatter(w.sge, w.mrs, 0, head)) || !qp.scatter(w.sge, w.mrs, bodyOff, body):
		wc.Status = WCLocProtErr
		return true
	}
	return false
}

// completeRecv ends a datagram receive (UD or raw packet): the receive
// WQE is consumed, its completion pushed (and counted in ok when it
// succeeded), and a fatal error (a protection fault) takes the QP to
// Error with a QP_FATAL event.
func (qp *QP) completeRecv(wc *WC, ok *atomic.Uint64, solicited, fatal bool) {
	qp.recvDone()
	if wc.Status == WCSuccess {
		ok.Add(1)
	}
	qp.recvCQ.push(wc, solicited)
	if fatal {
		qp.enterError()
		qp.dev.raise(AsyncEvent{Type: EventQPFatal, QP: qp})
	}
}

// AttachMcast attaches the UD QP to a multicast group (ibv_attach_mcast):
// datagrams sent to gid reach it from then on. lid is ignored on RoCE.
// Attaching twice is not an error (as in ib_core).
func (qp *QP) AttachMcast(gid [16]byte, lid uint16) error {
	_ = lid
	d := qp.dev
	if qp.init.QPType != QPTypeUD {
		return fmt.Errorf("rdma: attach QP %#x to %s: only UD QPs join groups: %w", qp.qpn, gidString(gid), ErrInvalid)
	}
	if !isMcastGID(gid) {
		return fmt.Errorf("rdma: attach QP %#x: %s is not a multicast GID: %w", qp.qpn, gidString(gid), ErrInvalid)
	}
	var err error
	if e := d.eng.do(func() {
		if qp.destroyed {
			err = fmt.Errorf("rdma: attach QP %#x: destroyed: %w", qp.qpn, ErrInvalid)
			return
		}
		e := &d.eng
		qps := e.mcast[gid]
		for _, q := range qps {
			if q == qp {
				return
			}
		}
		switch {
		case len(qps) == 0 && len(e.mcast) >= d.cfg.MaxMcastGrp:
			err = fmt.Errorf("rdma: attach QP %#x to %s: %d groups (MaxMcastGrp): %w", qp.qpn, gidString(gid), len(e.mcast), ErrNoResources)
			return
		case len(qps) >= d.cfg.MaxMcastQPAttach:
			err = fmt.Errorf("rdma: attach QP %#x to %s: %d QPs attached (MaxMcastQPAttach): %w", qp.qpn, gidString(gid), len(qps), ErrNoResources)
			return
		}
		e.mcast[gid] = append(qps, qp)
		qp.mcast = append(qp.mcast, gid)
	}); e != nil {
		return fmt.Errorf("rdma: attach QP %#x: %w", qp.qpn, e)
	}
	return err
}

// DetachMcast detaches the QP from a group (ibv_detach_mcast).
func (qp *QP) DetachMcast(gid [16]byte, lid uint16) error {
	_ = lid
	d := qp.dev
	var err error
	if e := d.eng.do(func() {
		if !qp.detach(gid) {
			err = fmt.Errorf("rdma: detach QP %#x from %s: not attached: %w", qp.qpn, gidString(gid), ErrInvalid)
		}
	}); e != nil {
		return fmt.Errorf("rdma: detach QP %#x: %w", qp.qpn, e)
	}
	return err
}

// detach removes qp from group gid (engine).
func (qp *QP) detach(gid [16]byte) bool {
	e := &qp.dev.eng
	found := false
	for i, g := range qp.mcast {
		if g == gid {
			qp.mcast = append(qp.mcast[:i], qp.mcast[i+1:]...)
			found = true
			break
		}
	}
	if !found {
		return false
	}
	qps := e.mcast[gid]
	for i, q := range qps {
		if q == qp {
			qps = append(qps[:i], qps[i+1:]...)
			break
		}
	}
	if len(qps) == 0 {
		delete(e.mcast, gid)
	} else {
		e.mcast[gid] = qps
	}
	return true
}

// detachAll leaves every group (engine; QP destroy).
func (qp *QP) detachAll() {
	for len(qp.mcast) > 0 {
		qp.detach(qp.mcast[0])
	}
}

// mcastLocal reports whether a QP of this device other than from is
// attached to group (engine).
func (e *engine) mcastLocal(group [16]byte, from *QP) bool {
	for _, q := range e.mcast[group] {
		if q != from {
			return true
		}
	}
	return false
}

// multicastGroup returns the group GID a multicast frame is sent to.
func multicastGroup(pkt *proto.Packet) (g [16]byte) {
	if pkt.IPv4 != nil {
		g[10], g[11] = 0xff, 0xff
		copy(g[12:], pkt.IPv4.Dst())
		return g
	}
	copy(g[:], pkt.IPv6.Dst())
	return g
}

// fromUs reports whether a frame's source IP is one of our addresses.
func (d *Device) fromUs(pkt *proto.Packet) bool {
	if pkt.IPv4 != nil {
		return d.ownsIPv4(pkt.IPv4.Src())
	}
	return d.ownsGID(pkt.IPv6.Src())
}

// isUD reports whether qp has datagram semantics: UD, or the special QPs
// 0 (SMI) and 1 (GSI).
func (qp *QP) isUD() bool {
	t := qp.init.QPType
	return t == QPTypeUD || t == QPTypeSMI || t == QPTypeGSI
}

// smiSend applies the sending side of the SMI to an SMP posted on QP0
// (IBA 14.2.2.2, C14-9:1): a directed-route SMP with HopCount 0 is for this
// port and is answered here without the wire (it reports true: nothing to
// transmit); one starting a path steps HopPointer to 1 before it leaves.
func (qp *QP) smiSend(mad []byte) bool {
	smp := proto.SMP(mad)
	if !smp.IsDirectedRoute() || smp.Direction() {
		return false
	}
	if smp.HopCount() == 0 {
		resp := make([]byte, proto.MADSize)
		copy(resp, mad)
		if qp.dev.sma(resp) {
			proto.SMP(resp).SetHopPointer(0)
			qp.udDeliver(resp, nil, WC{SLID: qp.dev.port1.lid}, false)
		}
		return true
	}
	if smp.HopPointer() == 0 {
		smp.SetHopPointer(1)
	}
	return false
}
