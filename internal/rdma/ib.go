package rdma

import (
	"fmt"
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
	EventLIDChange AsyncEventType = 11 // LID_CHANGE
	// EventSMChange is IBV_EVENT_SM_CHANGE: another SM (a new master
	// SM LID) now manages the port.
	EventSMChange AsyncEventType = 13 // SM_CHANGE
	// EventClientReregister is IBV_EVENT_CLIENT_REREGISTER: the SM set
	// PortInfo.ClientReregister, asking the port's SA clients to
	// register again (multicast joins, event subscriptions), as a new
	// master does after its first sweep.
	EventClientReregister AsyncEventType = 17 // CLIENT_REREGISTER
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
