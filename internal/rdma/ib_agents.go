package rdma

import (
	"fmt"

	"github.com/PacketFive/hinic/internal/ibagent"
	"github.com/PacketFive/hinic/internal/proto"
)

// The port's management agents on native InfiniBand: SMPs on QP0 for
// the SMA, GMPs on QP1 for the PMA (both package ibagent's over the
// port's state and counters) or for QP1's consumer, and SMPs the host
// hands the device (LocalSMP). The link itself is ib.go's.

// rxSMP handles a VL15 packet: an SMP for the SMA, or an answer for the
// SM behind QP0.
func (e *engine) rxSMP(pkt *proto.Packet, frame []byte) {
	d := e.d
	if pkt.BTH.DestQP() != 0 || len(pkt.Payload) != proto.MADSize || !pkt.ICRCValid() {
		d.ctr.vl15Dropped.Add(1)
		return
	}
	smp, err := proto.ParseSMP(pkt.Payload)
	if err != nil {
		d.ctr.vl15Dropped.Add(1)
		return
	}
	d.ctr.rxPackets.Add(1)
	d.ctr.rxBytes.Add(uint64(len(frame)))
	lrh := pkt.LRH
	if smp.IsDirectedRoute() {
		hc, hp := smp.HopCount(), smp.HopPointer()
		if smp.Direction() {
			// The answer to our SM, at the start of its path (C14-13:3).
			if hp != 1 || smp.DrSLID() != proto.SMPPermissiveLID {
				d.ctr.vl15Dropped.Add(1)
				return
			}
			smp.SetHopPointer(0)
			e.toSpecialQP(0, pkt, smp)
			return
		}
		// We are the end of the route (C14-9:3).
		if hc == 0 || hp != hc || smp.DrDLID() != proto.SMPPermissiveLID {
			d.ctr.vl15Dropped.Add(1)
			return
		}
		if e.forSM(smp) {
			// As it arrived: the host's SMI steps the route (ib_mad's
			// smi_handle_dr_smp_recv).
			e.toSpecialQP(0, pkt, smp)
			return
		}
		smp.ReturnPath()[hc] = 1
		smp.SetHopPointer(hc + 1)
		resp := make([]byte, proto.MADSize)
		copy(resp, smp)
		if !d.sma(resp) {
			return
		}
		r := proto.SMP(resp)
		r.SetHopPointer(hc)
		e.sendMAD(0, lrh.SLID(), 0, 0, 0, resp)
		return
	}
	p := &d.port1
	if lrh.DLID() != proto.LIDPermissive && (p.lid == 0 || lrh.DLID() != p.lid) {
		d.ctr.vl15Dropped.Add(1)
		return
	}
	if smp.IsResponse() || e.forSM(smp) {
		e.toSpecialQP(0, pkt, smp)
		return
	}
	resp := make([]byte, proto.MADSize)
	copy(resp, smp)
	if d.sma(resp) {
		e.sendMAD(0, lrh.SLID(), 0, 0, 0, resp)
	}
}

// forSM reports whether an SMP request that reached this port is the
// subnet manager's to answer rather than the SMA's: SMInfo (IBA 14.4.1;
// sminfo, and SMs polling each other) goes to QP0's consumer when there
// is one. Behind QP0 in a guest is ib_mad, which hands it to the SM's
// agent, or answers "unsupported attribute" itself when no SM runs.
func (e *engine) forSM(smp proto.SMP) bool {
	return smp.AttributeID() == proto.SMPAttrSMInfo && e.qps[0] != nil
}

// rxGMP handles a QP1 packet: PerfMgt requests go to the PMA; everything
// else (answers, CM, SA) to the GSI QP's consumer.
func (e *engine) rxGMP(pkt *proto.Packet) {
	d := e.d
	if pkt.DETH == nil || len(pkt.Payload) != proto.MADSize {
		d.ctr.qp1Dropped.Add(1)
		return
	}
	if pkt.DETH.QKey() != ibQP1QKey {
		d.ctr.qkeyViolations.Add(1)
		d.ctr.qp1Dropped.Add(1)
		return
	}
	m := proto.MAD(pkt.Payload)
	if m.MgmtClass() == proto.MgmtClassPerfMgt && !m.IsResponse() {
		resp := make([]byte, proto.MADSize)
		copy(resp, m)
		rm := proto.MAD(resp)
		if rm.BaseVersion() != proto.MADBaseVersion || !rm.MakeResponse(d.pma(proto.PerfMgtMAD(resp))) {
			d.ctr.qp1Dropped.Add(1)
			return
		}
		e.sendMAD(1, pkt.LRH.SLID(), pkt.LRH.SL(), pkt.DETH.SrcQP(), pkt.BTH.PKey(), resp)
		return
	}
	e.toSpecialQP(1, pkt, m)
}

// toSpecialQP hands a management packet to the consumer of QP0 or QP1 as
// a UD receive; without one it is dropped and counted.
func (e *engine) toSpecialQP(qpn uint32, pkt *proto.Packet, payload []byte) {
	qp := e.qps[qpn]
	if qp == nil {
		if qpn == 0 {
			e.d.ctr.vl15Dropped.Add(1)
		} else {
			e.d.ctr.qp1Dropped.Add(1)
		}
		return
	}
	qp.udPlace(pkt, payload)
}

// sendMAD sends a 256-byte MAD from QP qpn (0 or 1) to dlid, as the
// device's own agents answer. QP0 packets go on VL15 without a DETH Q_Key;
// QP1 ones carry the well-known Q_Key to destQP.
func (e *engine) sendMAD(qpn uint32, dlid uint16, sl uint8, destQP uint32, pkey uint16, mad []byte) {
	d := e.d
	p := &d.port1
	f := proto.PacketFields{Link: proto.LinkIB, LRH: proto.LRHFields{SL: sl, DLID: dlid, SLID: p.lid}}
	f.BTH = proto.BTHFields{Opcode: proto.OpUDSendOnly, PKey: pkeyDefault, DestQP: destQP}
	if qpn == 0 {
		f.LRH.VL, f.LRH.SL = proto.VL15, 0
		if p.lid == 0 || dlid == proto.LIDPermissive {
			f.LRH.SLID = proto.LIDPermissive
		}
	} else {
		if pkey != 0 {
			f.BTH.PKey = pkey
		}
		f.DETH = proto.DETHFields{QKey: ibQP1QKey, SrcQP: 1}
		if int(sl) < opVLCount(p.pi.OperationalVLs) {
			f.LRH.VL = sl
		}
	}
	f.Payload = mad
	var path txPath
	path.f.Link = proto.LinkIB
	path.loopback = dlid == p.lid && p.lid != 0
	fb := &e.tx
	if path.loopback {
		fb = e.getBuf()
	}
	n, err := f.Encode(fb.b[:])
	if err != nil {
		d.ctr.txErrors.Add(1)
		if path.loopback {
			e.putBuf(fb)
		}
		return
	}
	if path.loopback {
		fb.n = n
		e.loopQ = append(e.loopQ, fb)
		d.ctr.loopback.Add(1)
	} else if err := d.port.Send(fb.b[:n]); err != nil {
		d.ctr.txErrors.Add(1)
	}
	d.ctr.txPackets.Add(1)
	d.ctr.txBytes.Add(uint64(n))
	d.ctr.madsAnswered.Add(1)
}

// sma turns the SMP request in m into its answer in place (engine): the
// attributes an HCA's SMA answers for an SM (IBA 14.2.5). It reports
// whether m now holds an answer to send: not for a response, a method
// without one (Trap, TrapRepress), or an M_Key violation.
//
// The M_Key in PortInfo is checked first (IBA 14.2.4, the rules of
// proto.MKeyLease, shared with the switch's SMA), whichever way the SMP
// came: LID-routed, directed, or from the host (LocalSMP, QP0 HopCount
// 0), as Linux's software SMAs check process_mad's SMPs. With M_Key 0,
// the power-on value, nothing is checked. A violation is dropped,
// counted in PortInfo.M_KeyViolations and Counters.SMPMKeyDrops, and
// starts the lease, timed by the device's Clock. No Bad M_Key trap is
// sent (the port sends no traps).
func (d *Device) sma(m []byte) bool {
	switch ibagent.ServeSMP(proto.SMP(m), hca{d}) {
	case ibagent.Answered:
		d.ctr.smpsAnswered.Add(1)
		return true
	case ibagent.MKeyViolated:
		d.ctr.smpMKeyDrops.Add(1)
	}
	return false
}

// hca is the device's port 1 as its management agents see it
// (ibagent's Node, CAPort and CounterSource).
type hca struct{ d *Device }

func (h hca) CheckMKey(method uint8, key uint64) proto.MKeyVerdict {
	p := &h.d.port1
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mkey.Check(&p.pi, h.d.clock.Now(), method, key)
}

func (h hca) Attr(m proto.SMP, set, maskMKey bool) uint16 { return ibagent.CAAttr(h, m, set, maskMKey) }

func (h hca) NodeInfo() proto.NodeInfoFields {
	c := &h.d.cfg
	return proto.NodeInfoFields{
		BaseVersion: 1, ClassVersion: 1, NodeType: proto.NodeTypeCA, NumPorts: 1,
		SystemImageGUID: c.NodeGUID, NodeGUID: c.NodeGUID, PortGUID: c.PortGUID,
		PartitionCap: ibPartitionCap, DeviceID: uint16(c.VendorPartID), Revision: c.HWVer,
		LocalPortNum: 1, VendorID: ibVendorID,
	}
}

func (h hca) NodeDescription() string {
	if h.d.cfg.Description != "" {
		return h.d.cfg.Description
	}
	return h.d.cfg.Name
}

func (h hca) PortGUID() uint64 { return h.d.cfg.PortGUID }

func (h hca) PortInfo() proto.PortInfoFields { return h.d.portInfo() }

func (h hca) SetPortInfo(f proto.PortInfoFields) uint16 { return h.d.setPortInfo(f) }

func (h hca) PKeys(fn func(*[proto.PKeyTableEntriesPerBlock]uint16)) {
	p := &h.d.port1
	p.mu.Lock()
	defer p.mu.Unlock()
	fn(&p.pkeys)
}

// setPortInfo applies a PortInfo Set with the IBA state rules (Armed only
// from Init, Active only from Armed, Down retrains to Init) and raises
// LID_CHANGE, SM_CHANGE (a master SM LID other than the one the port
// had), PORT_ACTIVE, and CLIENT_REREGISTER when the Set has the
// ClientReregister bit (the capability mask says the port honours it).
func (d *Device) setPortInfo(f proto.PortInfoFields) uint16 {
	p := &d.port1
	p.mu.Lock()
	if st := ibagent.CheckPortInfoSet(&p.pi, &f); st != proto.MADStatusOK {
		p.mu.Unlock()
		return st
	}
	oldLID, oldSM := p.pi.LID, p.pi.MasterSMLID
	ibagent.ApplyPortInfoSet(&p.pi, &f)
	p.lid = p.pi.LID
	p.mu.Unlock()
	if oldLID != f.LID {
		d.raise(AsyncEvent{Type: EventLIDChange, Port: 1})
	}
	if oldSM != 0 && oldSM != f.MasterSMLID {
		d.raise(AsyncEvent{Type: EventSMChange, Port: 1})
	}
	switch f.PortState {
	case proto.PortStateDown:
		d.setPortState(proto.PortStateInit)
	case proto.PortStateArmed, proto.PortStateActive:
		d.setPortState(f.PortState)
	}
	if f.ClientReregister {
		d.raise(AsyncEvent{Type: EventClientReregister, Port: 1})
	}
	return proto.MADStatusOK
}

// pma answers a PerfMgt request in place (ibagent.ServePMA over the
// port's CAPMA: ClassPortInfo, PortCounters and PortCountersExtended of
// port 1) and returns the status.
func (d *Device) pma(m proto.PerfMgtMAD) uint16 { return ibagent.ServePMA(m, d.pmaSrc) }

// pmaTotals are the engine's own counters as the PMA's totals; a device
// backend with fuller ones (multicast, link losses) sets its own with
// SetPMATotals.
func (d *Device) pmaTotals() ibagent.PortTotals {
	c := &d.ctr
	tx, rx := c.txPackets.Load(), c.rxPackets.Load()
	return ibagent.PortTotals{
		XmitData: c.txBytes.Load(), RcvData: c.rxBytes.Load(), XmitPkts: tx, RcvPkts: rx,
		UnicastXmitPkts: tx, UnicastRcvPkts: rx,
		RcvErrors:    c.rxICRC.Load() + c.rxMalformed.Load(),
		XmitDiscards: c.txErrors.Load(), RcvConstraintErrors: c.rxPKey.Load(),
		VL15Dropped: c.vl15Dropped.Load(), QP1Dropped: c.qp1Dropped.Load(),
	}
}

// SetPMATotals makes the port's PMA read its counters from totals, which
// must be safe to call from any goroutine; both baselines start again
// from 0.
func (d *Device) SetPMATotals(totals func() ibagent.PortTotals) { d.pmaSrc.SetTotals(totals) }

// LocalPerfMgt answers a PerfMgt MAD the host hands the device (a
// driver's process_mad passes the port's own PMA requests to the device,
// as mlx4 forwards them to its firmware), on either link layer, with the
// same PMA and counters as a request from the wire.
//
// mad is a 256-byte MAD. The answer is a new 256-byte MAD, or nil when
// there is none: other classes, responses, BaseVersions other than 1 and
// methods without a response. Errors: ErrInvalid for a MAD of the wrong
// size. Safe for concurrent use.
func (d *Device) LocalPerfMgt(mad []byte) ([]byte, error) {
	if len(mad) != proto.MADSize {
		return nil, fmt.Errorf("rdma: local PerfMgt MAD: %d bytes, want %d: %w", len(mad), proto.MADSize, ErrInvalid)
	}
	m := proto.MAD(mad)
	if m.BaseVersion() != proto.MADBaseVersion || m.MgmtClass() != proto.MgmtClassPerfMgt || m.IsResponse() {
		return nil, nil
	}
	resp := make([]byte, proto.MADSize)
	copy(resp, mad)
	if !proto.MAD(resp).MakeResponse(d.pma(proto.PerfMgtMAD(resp))) {
		return nil, nil
	}
	return resp, nil
}

// LocalSMP answers an SMP that the host hands the device directly, the way
// a driver's process_mad passes an SMP addressed to its own port to the
// HCA (IBA 14.2.2.2: a directed-route SMP with HopCount 0 never reaches
// the wire; ib_mad's smi_check_local_smp sends it to process_mad). The
// port's SMA runs on it as if it had arrived on QP0 from the port itself,
// on the engine goroutine, so Sets change the port (LID, state, P_Keys)
// and raise the same events as an SM's Sets over the wire.
//
// mad is a 256-byte MAD. The answer is a new 256-byte MAD, or nil when
// there is none: responses, classes other than the SMP classes, and
// SMInfo (the subnet manager's attribute) are not the SMA's. A directed-route SMP must be outbound, with HopCount 0,
// HopPointer 0 or 1 (the sender's SMI may have stepped it already,
// C14-9:1) and a permissive DrDLID (C14-9:3); its answer returns with
// HopPointer 0, as at the end of its way back (C14-13:3). Errors:
// ErrUnsupported on an Ethernet (RoCE) port, which has no SMA; ErrInvalid
// for a MAD of the wrong size or a directed-route SMP that does not end
// here; ErrClosed after Close. Safe for concurrent use.
func (d *Device) LocalSMP(mad []byte) ([]byte, error) {
	if !d.ib() {
		return nil, fmt.Errorf("rdma: local SMP: %w: an Ethernet port has no SMA", ErrUnsupported)
	}
	if len(mad) != proto.MADSize {
		return nil, fmt.Errorf("rdma: local SMP: %d bytes, want %d: %w", len(mad), proto.MADSize, ErrInvalid)
	}
	m := proto.MAD(mad)
	if m.BaseVersion() != proto.MADBaseVersion || m.IsResponse() {
		return nil, nil
	}
	smp := proto.SMP(mad)
	if smp.AttributeID() == proto.SMPAttrSMInfo {
		// The SM's (forSM): ib_mad passes a received SMInfo request to
		// process_mad first; declining leaves it to the SM's agent.
		return nil, nil
	}
	switch m.MgmtClass() {
	case proto.MgmtClassSubnLID:
	case proto.MgmtClassSubnDirectedRoute:
		if smp.Direction() || smp.HopCount() != 0 || smp.HopPointer() > 1 ||
			smp.DrDLID() != proto.SMPPermissiveLID {
			return nil, fmt.Errorf("rdma: local SMP: directed route (hop %d of %d, DrDLID %#x, returning %v) does not end at this port: %w",
				smp.HopPointer(), smp.HopCount(), smp.DrDLID(), smp.Direction(), ErrInvalid)
		}
	default:
		return nil, nil
	}
	resp := make([]byte, proto.MADSize)
	copy(resp, mad)
	var answered bool
	if err := d.eng.do(func() { answered = d.sma(resp) }); err != nil {
		return nil, fmt.Errorf("rdma: local SMP: %w", err)
	}
	if !answered {
		return nil, nil // a method without a response (Trap, TrapRepress), an M_Key violation
	}
	if m.MgmtClass() == proto.MgmtClassSubnDirectedRoute {
		proto.SMP(resp).SetHopPointer(0)
	}
	return resp, nil
}
