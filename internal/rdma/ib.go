package rdma

import (
	"fmt"
	"github.com/PacketFive/hinic/internal/ibagent"
	"sync"

	"github.com/PacketFive/hinic/internal/proto"
)

// Native InfiniBand link layer (DeviceConfig.LinkLayer =
// LinkLayerInfiniBand). The engine then speaks IB packets, LRH [+ GRH] /
// BTH ... / ICRC / VCRC, addressed by LID, and carries the port's subnet
// management agent (SMA, on QP0) and performance management agent (PMA, on
// QP1) so that a subnet manager can discover the port, give it a LID and
// take it to Active, as an HCA's firmware does.
//
// The port starts in Init with LID 0 (or Active with DeviceConfig.LID,
// the static mode). Data packets (any VL but 15) are accepted and sent
// only in Active; the first one received in Armed makes the port Active
// (IBA 7.2). SMPs pass in Init, Armed and Active.

// IB identity of the NIC in NodeInfo.
const (
	ibVendorID     = 0xFFFFFF // no IEEE OUI (as rxe; HiNIC owns none)
	ibPartitionCap = 32       // P_Key table: one block
	ibQP1QKey      = 0x80010000
	// ibCapabilityMask is PortInfo.CapabilityMask: a CM agent (RDMA CM
	// over QP1), client reregistration, extended speeds.
	ibCapabilityMask = proto.PortCapIsCommunicationManagementSupported |
		proto.PortCapIsClientReregistrationSupported | proto.PortCapIsExtendedSpeedsSupported
)

// Port events of an InfiniBand port (ibv_event_type values).
const (
	// EventLIDChange is IBV_EVENT_LID_CHANGE: the SM gave the port a
	// new LID.
	EventLIDChange AsyncEventType = 11
	// EventSMChange is IBV_EVENT_SM_CHANGE: another SM (a new master
	// SM LID) now manages the port.
	EventSMChange AsyncEventType = 13
	// EventClientReregister is IBV_EVENT_CLIENT_REREGISTER: the SM set
	// PortInfo.ClientReregister, asking the port's SA clients to
	// register again (multicast joins, event subscriptions), as a new
	// master does after its first sweep.
	EventClientReregister AsyncEventType = 17
)

// ibPort is the IB state of port 1: PortInfo and the P_Key table. Only
// the engine goroutine changes it (SMA Sets), under mu; other goroutines
// (QueryPort, QueryPKey) read it under mu, the engine reads it without.
type ibPort struct {
	mu    sync.Mutex
	pi    proto.PortInfoFields
	pkeys [ibPartitionCap]uint16
	// mkey is the M_Key lease timer, under mu like pi (any goroutine
	// reading pi applies its expiry).
	mkey proto.MKeyLease
	// Engine-owned copies for the data path.
	lid   uint16
	state uint8
	// pmaBase are the counter values a PortCounters Set cleared to.
	pmaBase pmaBase
}

type pmaBase struct {
	xmitData, rcvData, xmitPkts, rcvPkts, rcvErrors, vl15Dropped, qp1Dropped uint64
}

func (d *Device) ib() bool { return d.cfg.LinkLayer == LinkLayerInfiniBand }

// linkType is the proto link type of the device's frames.
func (d *Device) linkType() proto.LinkType {
	if d.ib() {
		return proto.LinkIB
	}
	return proto.LinkEthernet
}

// initIB sets up the IB port: GID 0 = subnet prefix + port GUID.
func (d *Device) initIB() error {
	c := &d.cfg
	if c.NodeGUID == 0 {
		return fmt.Errorf("rdma: new device %q: an InfiniBand device needs a NodeGUID: %w", c.Name, ErrInvalid)
	}
	if c.PortGUID == 0 {
		c.PortGUID = c.NodeGUID + 1
	}
	if c.LID >= proto.LIDMulticastBase {
		return fmt.Errorf("rdma: new device %q: LID %#x is not a unicast LID: %w", c.Name, c.LID, ErrInvalid)
	}
	p := &d.port1
	p.pkeys[0] = proto.PKeyDefault
	p.pi = proto.PortInfoFields{
		GIDPrefix:            0xFE80000000000000,
		CapabilityMask:       ibCapabilityMask,
		LocalPortNum:         1,
		LinkWidthEnabled:     proto.LinkWidth1X | proto.LinkWidth4X,
		LinkWidthSupported:   proto.LinkWidth1X | proto.LinkWidth4X,
		LinkWidthActive:      proto.LinkWidth4X,
		LinkSpeedSupported:   proto.LinkSpeedSDR | proto.LinkSpeedDDR | proto.LinkSpeedQDR,
		LinkSpeedEnabled:     proto.LinkSpeedSDR | proto.LinkSpeedDDR | proto.LinkSpeedQDR,
		LinkSpeedActive:      proto.LinkSpeedQDR,
		PortState:            proto.PortStateInit,
		PortPhysicalState:    proto.PortPhysStateLinkUp,
		LinkDownDefaultState: proto.PortPhysStatePolling,
		NeighborMTU:          uint8(d.activeMTU),
		MTUCap:               uint8(d.activeMTU), // the configured MTU: the SM sets no NeighborMTU above it
		VLCap:                proto.VLCapVL0To7,
		OperationalVLs:       proto.VLCapVL0,
		HOQLife:              0x1F,
		VLStallCount:         7,
		GUIDCap:              1,
		SubnetTimeOut:        0x12,
	}
	if c.LID != 0 {
		p.pi.LID, p.pi.MasterSMLID, p.pi.PortState = c.LID, c.SMLID, proto.PortStateActive
		p.pi.OperationalVLs = proto.VLCapVL0To7
	}
	p.lid, p.state = p.pi.LID, p.pi.PortState
	var gid [16]byte
	gid[0], gid[1] = 0xfe, 0x80
	for i := 0; i < 8; i++ {
		gid[8+i] = byte(c.PortGUID >> (56 - 8*i))
	}
	d.addrs.Store(&addrTable{gids: [][16]byte{gid}})
	return nil
}

// portInfo returns a copy of PortInfo (any goroutine), with an M_Key
// lease that ran out applied.
func (d *Device) portInfo() proto.PortInfoFields {
	p := &d.port1
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mkey.Expire(&p.pi, d.clock.Now())
	return p.pi
}

// HostCapabilities are the PortInfo CapabilityMask bits that the port's
// host may claim for the agents it runs (ib_core's modify_port): an SM
// (IsSM, while OpenSM holds issm0), a disabled SM, DevMgt and vendor
// class agents.
const HostCapabilities = proto.PortCapIsSM | proto.PortCapIsSMDisabled |
	proto.PortCapIsDeviceManagementSupported | proto.PortCapIsVendorClassSupported

// SetHostCapabilities makes PortInfo's CapabilityMask the device's own
// bits plus mask, what the host's agents claim now (the whole set, not a
// change): an SM on the subnet then sees IsSM on this port and polls its
// SMInfo. Bits outside HostCapabilities are ErrInvalid; an Ethernet port
// has no PortInfo (ErrUnsupported). Safe for concurrent use.
func (d *Device) SetHostCapabilities(mask uint32) error {
	if !d.ib() {
		return fmt.Errorf("rdma: port capabilities: %w: an Ethernet port has no PortInfo", ErrUnsupported)
	}
	if extra := mask &^ HostCapabilities; extra != 0 {
		return fmt.Errorf("rdma: port capabilities %#x: a host may claim only %#x: %w", extra, uint32(HostCapabilities), ErrInvalid)
	}
	p := &d.port1
	p.mu.Lock()
	p.pi.CapabilityMask = ibCapabilityMask | mask
	p.mu.Unlock()
	return nil
}

// pkeyIndex returns the index of the P_Key table entry pkey matches (same
// low 15 bits, not both limited), or -1. Engine goroutine only: it is on
// the receive path, and the engine is the table's only writer.
func (d *Device) pkeyIndex(pkey uint16) int {
	if !d.ib() {
		if pkey&0x7FFF == pkeyDefault&0x7FFF {
			return 0
		}
		return -1
	}
	for i, k := range d.port1.pkeys {
		if k&0x7FFF != 0 && k&0x7FFF == pkey&0x7FFF && (k&0x8000 != 0 || pkey&0x8000 != 0) {
			return i
		}
	}
	return -1
}

// buildPathIB checks an address vector for an IB port and returns its
// frame template.
func (d *Device) buildPathIB(destQPN uint32, ah *AHAttr, ud bool) (txPath, error) {
	var p txPath
	if ah.PortNum > 1 {
		return p, fmt.Errorf("AV: port %d does not exist: %w", ah.PortNum, ErrInvalid)
	}
	dlid := ah.DLID
	if dlid == 0 {
		return p, fmt.Errorf("AV: DLID 0: %w", ErrInvalid)
	}
	mcast := dlid >= proto.LIDMulticastBase && dlid != proto.LIDPermissive
	if mcast && !ud {
		return p, fmt.Errorf("AV: multicast DLID %#x needs a UD QP: %w", dlid, ErrInvalid)
	}
	if ah.SL > 15 {
		return p, fmt.Errorf("AV: SL %d exceeds 15: %w", ah.SL, ErrInvalid)
	}
	f := &p.f
	f.Link = proto.LinkIB
	f.LRH = proto.LRHFields{SL: ah.SL, DLID: dlid}
	if ah.IsGlobal {
		g := &ah.GRH
		gids := d.gidTable()
		if int(g.SGIDIndex) >= len(gids) {
			return p, fmt.Errorf("AV: SGID index %d outside the %d-entry GID table: %w", g.SGIDIndex, len(gids), ErrInvalid)
		}
		if mcast && g.DGID[0] != 0xff {
			return p, fmt.Errorf("AV: multicast DLID %#x with the unicast DGID %s: %w", dlid, gidString(g.DGID), ErrInvalid)
		}
		hop := g.HopLimit
		if hop == 0 {
			hop = 64
		}
		f.Global = true
		f.GRH = proto.GRHFields{TClass: g.TrafficClass, FlowLabel: g.FlowLabel & 0xFFFFF, NxtHdr: 0x1B, HopLmt: hop,
			SGID: gids[g.SGIDIndex], DGID: g.DGID}
		p.group = g.DGID
	} else if mcast {
		return p, fmt.Errorf("AV: multicast DLID %#x needs a GRH with the group's MGID: %w", dlid, ErrInvalid)
	}
	f.BTH = proto.BTHFields{PKey: pkeyDefault, DestQP: destQPN}
	p.mcast = mcast
	p.loopback = !mcast && dlid == d.port1.lid
	if mcast {
		f.BTH.DestQP = mcastQPN
	}
	return p, nil
}

// ibStamp fills the per-packet LRH fields of an IB frame: our current LID
// and the VL (SL while the SL is one of the data VLs OperationalVLs
// enables, else VL0; VL15 for QP0).
func (qp *QP) ibStamp(f *proto.PacketFields) {
	p := &qp.dev.port1
	f.LRH.SLID = p.lid
	if qp.qpn == 0 {
		f.LRH.VL, f.LRH.SL = proto.VL15, 0
		if f.LRH.SLID == 0 || f.LRH.DLID == proto.LIDPermissive {
			f.LRH.SLID = proto.LIDPermissive
		}
		return
	}
	f.LRH.VL = 0
	if int(f.LRH.SL) < opVLCount(p.pi.OperationalVLs) {
		f.LRH.VL = f.LRH.SL
	}
}

// opVLCount is the number of data VLs an OperationalVLs code enables
// (1: VL0, 2: VL0-1, 3: VL0-3, 4: VL0-7, 5: VL0-14).
func opVLCount(code uint8) int {
	switch code {
	case 1, 2, 3, 4:
		return 1 << (code - 1)
	case 5:
		return 15
	}
	return 1
}

// rxFrameIB validates an IB packet. Management packets go to the SMA or
// PMA (or the special QP's consumer); data packets to the common dispatch.
func (e *engine) rxFrameIB(b *frameBuf) bool {
	d := e.d
	frame := b.b[:b.n]
	pkt, err := proto.Parse(frame, proto.LinkIB)
	if err != nil {
		d.ctr.rxMalformed.Add(1)
		return false
	}
	if !pkt.VCRCValid() {
		d.ctr.rxICRC.Add(1)
		return false
	}
	if pkt.Type != proto.FrameIB || pkt.BTH == nil {
		d.ctr.rxNotRoCE.Add(1) // raw packets: no raw QPs here
		return false
	}
	p := &d.port1
	lrh := pkt.LRH
	dlid := lrh.DLID()
	if lrh.VL() == proto.VL15 {
		e.rxSMP(&pkt, frame)
		return false
	}
	switch p.state {
	case proto.PortStateActive:
	case proto.PortStateArmed:
		d.setPortState(proto.PortStateActive) // IBA 7.2: the first data packet
	default:
		d.ctr.rxWrongState.Add(1)
		return false
	}
	mcast := dlid >= proto.LIDMulticastBase && dlid != proto.LIDPermissive
	if !mcast && (p.lid == 0 || dlid != p.lid) {
		d.ctr.rxNotForUs.Add(1)
		return false
	}
	if !pkt.ICRCValid() {
		d.ctr.rxICRC.Add(1)
		return false
	}
	if d.pkeyIndex(pkt.BTH.PKey()) < 0 {
		d.ctr.rxPKey.Add(1)
		return false
	}
	if pkt.BTH.DestQP() == 1 {
		d.ctr.rxPackets.Add(1)
		d.ctr.rxBytes.Add(uint64(len(frame)))
		e.rxGMP(&pkt)
		return false
	}
	var group [16]byte
	if mcast {
		if pkt.GRH == nil || pkt.GRH.DGID()[0] != 0xff {
			d.ctr.rxMalformed.Add(1)
			return false
		}
		copy(group[:], pkt.GRH.DGID())
	}
	return e.dispatch(b, &pkt, frame, mcast, group, lrh.SLID() == p.lid)
}

// setPortState changes the port state (engine) and raises the event.
func (d *Device) setPortState(s uint8) {
	p := &d.port1
	p.mu.Lock()
	old := p.pi.PortState
	p.pi.PortState = s
	p.state = s
	p.mu.Unlock()
	if old != s {
		switch {
		case s == proto.PortStateActive:
			d.raise(AsyncEvent{Type: EventPortActive, Port: 1})
		case old == proto.PortStateActive:
			d.raise(AsyncEvent{Type: EventPortErr, Port: 1})
		}
	}
}

// SetLinkUp tells an InfiniBand port that its physical link, the fabric
// connection, went down or came back (any goroutine). Down: PortState
// Down and PortPhysicalState Polling (IBA 7.2, 14.2.5.6), which raises
// PORT_ERR if the port was active; data and SMPs find no port until the
// link is back. Up: LinkUp, and PortState Initialize, where the subnet
// manager's next sweep finds the port and takes it through Armed to
// Active, as after a cable re-plug; a port given a static LID (no SM)
// goes straight back to Active. LID, M_Key and the rest of PortInfo are
// kept, as the SM set them. No-op on Ethernet. It waits for the engine.
func (d *Device) SetLinkUp(up bool) {
	if !d.ib() {
		return
	}
	// The port state is the engine's (its receive path reads it without
	// a lock), so the change runs there; a closed engine has no port.
	_ = d.eng.do(func() {
		p := &d.port1
		p.mu.Lock()
		if up {
			p.pi.PortPhysicalState = proto.PortPhysStateLinkUp
		} else {
			p.pi.PortPhysicalState = proto.PortPhysStatePolling
		}
		p.mu.Unlock()
		switch {
		case !up:
			d.setPortState(proto.PortStateDown)
		case d.cfg.LID != 0:
			d.setPortState(proto.PortStateActive)
		default:
			d.setPortState(proto.PortStateInit)
		}
	})
}

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

// pma answers a PerfMgt request in place (ibagent.ServePMA: ClassPortInfo;
// PortCounters Get and Set, for port 1 or all ports) and returns the
// status.
func (d *Device) pma(m proto.PerfMgtMAD) uint16 { return ibagent.ServePMA(m, hca{d}) }

// PortCounters reads port 1's counters (PortSelect 0, 1 or all ports):
// the device's counters less the values a PortCounters Set last cleared
// to.
func (h hca) PortCounters(sel uint8, clear bool, csel uint16, _ uint8) (proto.PortCountersFields, bool) {
	if sel > 1 && sel != proto.PMAPortSelectAll {
		return proto.PortCountersFields{}, false
	}
	cur := h.d.pmaNow()
	b := &h.d.port1.pmaBase
	if clear {
		sel := func(bit uint16, dst *uint64, v uint64) {
			if csel&bit != 0 {
				*dst = v
			}
		}
		sel(proto.PortCountersSelectPortXmitData, &b.xmitData, cur.xmitData)
		sel(proto.PortCountersSelectPortRcvData, &b.rcvData, cur.rcvData)
		sel(proto.PortCountersSelectPortXmitPkts, &b.xmitPkts, cur.xmitPkts)
		sel(proto.PortCountersSelectPortRcvPkts, &b.rcvPkts, cur.rcvPkts)
		sel(proto.PortCountersSelectPortRcvErrors, &b.rcvErrors, cur.rcvErrors)
		sel(proto.PortCountersSelectVL15Dropped, &b.vl15Dropped, cur.vl15Dropped)
	}
	return proto.PortCountersFields{
		PortXmitData:  proto.PMACounterAdd32(0, (cur.xmitData-b.xmitData)/4),
		PortRcvData:   proto.PMACounterAdd32(0, (cur.rcvData-b.rcvData)/4),
		PortXmitPkts:  proto.PMACounterAdd32(0, cur.xmitPkts-b.xmitPkts),
		PortRcvPkts:   proto.PMACounterAdd32(0, cur.rcvPkts-b.rcvPkts),
		PortRcvErrors: proto.PMACounterAdd16(0, cur.rcvErrors-b.rcvErrors),
		VL15Dropped:   proto.PMACounterAdd16(0, cur.vl15Dropped-b.vl15Dropped),
		QP1Dropped:    proto.PMACounterAdd16(0, cur.qp1Dropped),
	}, true
}

func (d *Device) pmaNow() pmaBase {
	c := &d.ctr
	return pmaBase{
		xmitData: c.txBytes.Load(), rcvData: c.rxBytes.Load(),
		xmitPkts: c.txPackets.Load(), rcvPkts: c.rxPackets.Load(),
		rcvErrors:   c.rxICRC.Load() + c.rxMalformed.Load(),
		vl15Dropped: c.vl15Dropped.Load(), qp1Dropped: c.qp1Dropped.Load(),
	}
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
