package ibswtest

import (
	"github.com/PacketFive/hinic/internal/ibagent"
	"github.com/PacketFive/hinic/internal/proto"
)

// CA defaults.
const (
	// CAPartitionCap is the size of a CA's P_Key table (one block).
	CAPartitionCap = 32
	// CADeviceID and CAVendorID fill the CA's NodeInfo (HiNIC's CA ID,
	// no OUI; not Mellanox).
	CADeviceID = 0xCA10
	CAVendorID = 0xFFFFFF
	// CACapabilityMask is what the CA's PortInfo advertises.
	CACapabilityMask = proto.PortCapIsExtendedSpeedsSupported | proto.PortCapIsClientReregistrationSupported
	// caPort is the CA's only port.
	caPort = 1
)

// CA is a one-port channel adapter: enough of an HCA for a subnet manager
// to discover, address and activate it (its SMA answers NodeInfo,
// NodeDescription, PortInfo, P_KeyTable and GUIDInfo as a Linux HCA driver
// or ibsim's CA does), and for tests to send and receive data packets.
// It stands in for HiNIC's real NIC SMA, which lives elsewhere.
type CA struct {
	NodeGUID    uint64
	PortGUID    uint64
	Description string

	// Received holds copies of the data packets the CA accepted: for
	// its LID, on a data VL, not for QP1, while Active.
	Received [][]byte
	// Dropped counts packets the CA discarded.
	Dropped int
	// OnMAD, when set, receives the management answers meant for an SM
	// behind this port: directed-route SMPs that completed their
	// return path (HopPointer back to 0), and LID-routed SMP and GMP
	// responses addressed to the CA's LID. The slice is the 256-byte MAD,
	// a copy the callee may keep.
	OnMAD func(mad []byte)

	f      *Fabric
	linkUp bool
	pi     proto.PortInfoFields
	pkeys  [CAPartitionCap]uint16
}

// NewCA returns a CA whose port is Down until a cable is connected. Its
// port GUID is nodeGUID+1.
func NewCA(f *Fabric, name string, nodeGUID uint64) *CA {
	c := &CA{NodeGUID: nodeGUID, PortGUID: nodeGUID + 1, Description: name, f: f}
	f.Name(c, name)
	c.pkeys[0] = proto.PKeyDefault
	c.pi = proto.PortInfoFields{
		GIDPrefix:            0xFE80000000000000,
		CapabilityMask:       CACapabilityMask,
		LocalPortNum:         caPort,
		LinkWidthEnabled:     proto.LinkWidth1X | proto.LinkWidth4X,
		LinkWidthSupported:   proto.LinkWidth1X | proto.LinkWidth4X,
		LinkWidthActive:      proto.LinkWidth4X,
		LinkSpeedSupported:   proto.LinkSpeedSDR | proto.LinkSpeedDDR | proto.LinkSpeedQDR,
		LinkSpeedEnabled:     proto.LinkSpeedSDR | proto.LinkSpeedDDR | proto.LinkSpeedQDR,
		LinkSpeedActive:      proto.LinkSpeedQDR,
		PortState:            proto.PortStateDown,
		PortPhysicalState:    proto.PortPhysStatePolling,
		LinkDownDefaultState: proto.PortPhysStatePolling,
		NeighborMTU:          proto.IBMTU2048,
		MTUCap:               proto.IBMTU4096,
		VLCap:                proto.VLCapVL0To7,
		OperationalVLs:       proto.VLCapVL0,
		HOQLife:              0x1F,
		VLStallCount:         7,
		GUIDCap:              1,
		SubnetTimeOut:        0x1F,
	}
	return c
}

// PortInfo returns the CA port's current PortInfo.
func (c *CA) PortInfo() proto.PortInfoFields { return c.pi }

// LID returns the CA port's LID (0 until the SM sets it).
func (c *CA) LID() uint16 { return c.pi.LID }

// SetPortLink implements Node: link up puts the port in Init, down in Down.
func (c *CA) SetPortLink(p int, up bool) {
	if p != caPort || c.linkUp == up {
		return
	}
	c.linkUp = up
	if up {
		c.pi.PortState, c.pi.PortPhysicalState = proto.PortStateInit, proto.PortPhysStateLinkUp
	} else {
		c.pi.PortState, c.pi.PortPhysicalState = proto.PortStateDown, proto.PortPhysStatePolling
	}
}

// Send puts pkt on the CA's cable.
func (c *CA) Send(pkt []byte) { c.f.Send(c, caPort, pkt) }

// SendData sends a UD SEND-only data packet with the given payload from
// the CA's LID to dlid, on VL = SL.
func (c *CA) SendData(dlid uint16, sl uint8, pkey uint16, destQP uint32, payload []byte) {
	f := proto.PacketFields{
		Link:    proto.LinkIB,
		LRH:     proto.LRHFields{VL: sl, SL: sl, DLID: dlid, SLID: c.pi.LID},
		BTH:     proto.BTHFields{Opcode: proto.OpUDSendOnly, PKey: pkey, DestQP: destQP, PSN: 1},
		DETH:    proto.DETHFields{QKey: 0x11111111, SrcQP: 0x42},
		Payload: payload,
	}
	buf := make([]byte, f.Len())
	if _, err := f.Encode(buf); err != nil {
		panic(err) // test helper: a bad payload size is the test's bug
	}
	c.Send(buf)
}

// Ingress implements Node. The CA is an end node: it checks the VCRC and
// the ICRC and drops anything it cannot use.
func (c *CA) Ingress(in int, pkt []byte, emit func(int, []byte)) {
	p, err := proto.Parse(pkt, proto.LinkIB)
	if err != nil || in != caPort || !c.linkUp || !p.VCRCValid() || !p.ICRCValid() || p.BTH == nil {
		c.Dropped++
		return
	}
	lrh := p.LRH
	if lrh.VL() == proto.VL15 {
		if p.BTH.DestQP() != 0 || len(p.Payload) != proto.MADSize {
			c.Dropped++
			return
		}
		smp, err := proto.ParseSMP(p.Payload)
		if err != nil {
			c.Dropped++
			return
		}
		if smp.IsDirectedRoute() {
			c.directed(lrh, smp, emit)
			return
		}
		if lrh.DLID() != proto.LIDPermissive && (c.pi.LID == 0 || lrh.DLID() != c.pi.LID) {
			c.Dropped++
			return
		}
		if smp.IsResponse() {
			c.deliver(p.Payload)
			return
		}
		resp := append([]byte(nil), p.Payload...)
		if !c.sma(resp) {
			c.Dropped++
			return
		}
		emit(caPort, c.smpPacket(lrh.SLID(), resp))
		return
	}
	switch c.pi.PortState {
	case proto.PortStateActive:
	case proto.PortStateArmed:
		c.pi.PortState = proto.PortStateActive // IBA 7.2: first data packet
	default:
		c.Dropped++
		return
	}
	if c.pi.LID == 0 || lrh.DLID() != c.pi.LID {
		c.Dropped++
		return
	}
	if p.BTH.DestQP() == 1 {
		if len(p.Payload) == proto.MADSize && proto.MAD(p.Payload).IsResponse() {
			c.deliver(p.Payload)
		} else {
			c.Dropped++ // no GSI agents on this CA
		}
		return
	}
	c.Received = append(c.Received, append([]byte(nil), pkt...))
}

func (c *CA) deliver(mad []byte) {
	if c.OnMAD == nil {
		c.Dropped++
		return
	}
	c.OnMAD(append([]byte(nil), mad...))
}

// directed applies the CA side of IBA 14.2.2.2: a CA is only ever the end
// of a directed route (C14-9:3, with a permissive DrDLID) or its start
// (C14-13:3, giving the answer to the SM at HopPointer 0).
func (c *CA) directed(lrh proto.LRH, smp proto.SMP, emit func(int, []byte)) {
	hc, hp := smp.HopCount(), smp.HopPointer()
	if smp.Direction() {
		if hp != 1 || smp.DrSLID() != proto.SMPPermissiveLID {
			c.Dropped++
			return
		}
		smp.SetHopPointer(0)
		c.deliver(smp)
		return
	}
	if hc == 0 || hp != hc || smp.DrDLID() != proto.SMPPermissiveLID {
		c.Dropped++
		return
	}
	smp.ReturnPath()[hc] = caPort
	smp.SetHopPointer(hc + 1)
	resp := append([]byte(nil), smp...)
	if !c.sma(resp) {
		c.Dropped++
		return
	}
	r := proto.SMP(resp)
	r.SetHopPointer(hc)
	emit(int(r.ReturnPath()[hc]), c.smpPacket(lrh.SLID(), resp))
}

// LocalMAD answers a HopCount-0 directed-route SMP (or any SMP) the way
// the local device's process_mad does, without a wire: it returns the
// answer MAD (the request unchanged when it gets none). This is how an SM
// reaches its own port.
func (c *CA) LocalMAD(req []byte) []byte {
	resp := append([]byte(nil), req...)
	c.sma(resp)
	if smp := proto.SMP(resp); smp.IsDirectedRoute() && smp.HopCount() == 0 {
		smp.SetHopPointer(0)
	}
	return resp
}

// smpPacket wraps an SMP answer in a VL15 packet addressed back to dlid.
func (c *CA) smpPacket(dlid uint16, mad []byte) []byte {
	slid := c.pi.LID
	if slid == 0 || dlid == proto.LIDPermissive {
		slid = proto.LIDPermissive
	}
	return SMPPacket(dlid, slid, mad)
}

// sma turns the SMP request in m into its answer in place (ibagent's
// SMA and CA attributes; the CA has no M_Key protection) and reports
// whether there is one.
func (c *CA) sma(m []byte) bool {
	return ibagent.ServeSMP(proto.SMP(m), caNode{c}) == ibagent.Answered
}

// caNode is the CA as its SMA sees it (ibagent's Node and CAPort).
type caNode struct{ c *CA }

func (n caNode) CheckMKey(uint8, uint64) proto.MKeyVerdict { return proto.MKeyAllow }

func (n caNode) Attr(m proto.SMP, set, maskMKey bool) uint16 {
	return ibagent.CAAttr(n, m, set, maskMKey)
}

func (n caNode) NodeInfo() proto.NodeInfoFields {
	return proto.NodeInfoFields{
		BaseVersion: 1, ClassVersion: 1, NodeType: proto.NodeTypeCA, NumPorts: 1,
		SystemImageGUID: n.c.NodeGUID, NodeGUID: n.c.NodeGUID, PortGUID: n.c.PortGUID,
		PartitionCap: CAPartitionCap, DeviceID: CADeviceID, Revision: 1,
		LocalPortNum: caPort, VendorID: CAVendorID,
	}
}

func (n caNode) NodeDescription() string        { return n.c.Description }
func (n caNode) PortGUID() uint64               { return n.c.PortGUID }
func (n caNode) PortInfo() proto.PortInfoFields { return n.c.pi }

func (n caNode) PKeys(fn func(*[proto.PKeyTableEntriesPerBlock]uint16)) { fn(&n.c.pkeys) }

// SetPortInfo applies a PortInfo Set with the HCA's state rules
// (ibagent.CheckPortInfoSet): Down retrains to Init while the link is up.
func (n caNode) SetPortInfo(f proto.PortInfoFields) uint16 {
	c := n.c
	if st := ibagent.CheckPortInfoSet(&c.pi, &f); st != proto.MADStatusOK {
		return st
	}
	ibagent.ApplyPortInfoSet(&c.pi, &f)
	switch f.PortState {
	case proto.PortStateDown:
		if c.linkUp {
			c.pi.PortState = proto.PortStateInit
		}
	case proto.PortStateArmed, proto.PortStateActive:
		c.pi.PortState = f.PortState
	}
	return proto.MADStatusOK
}

// SMPPacket builds a VL15 packet (LRH, BTH, DETH to QP0, the MAD, ICRC,
// VCRC) carrying the 256-byte SMP mad from slid to dlid.
func SMPPacket(dlid, slid uint16, mad []byte) []byte {
	f := proto.PacketFields{
		Link:    proto.LinkIB,
		LRH:     proto.LRHFields{VL: proto.VL15, DLID: dlid, SLID: slid},
		BTH:     proto.BTHFields{Opcode: proto.OpUDSendOnly, PKey: proto.PKeyDefault},
		Payload: mad,
	}
	buf := make([]byte, f.Len())
	if _, err := f.Encode(buf); err != nil {
		panic(err) // fixed sizes: cannot fail
	}
	return buf
}

// GMPPacket builds a QP1 packet carrying the GMP mad from slid to dlid on
// VL = SL = sl, from QP1 with the well-known Q_Key.
func GMPPacket(dlid, slid uint16, sl uint8, pkey uint16, mad []byte) []byte {
	f := proto.PacketFields{
		Link:    proto.LinkIB,
		LRH:     proto.LRHFields{VL: sl, SL: sl, DLID: dlid, SLID: slid},
		BTH:     proto.BTHFields{Opcode: proto.OpUDSendOnly, PKey: pkey, DestQP: 1},
		DETH:    proto.DETHFields{QKey: 0x80010000, SrcQP: 1},
		Payload: mad,
	}
	buf := make([]byte, f.Len())
	if _, err := f.Encode(buf); err != nil {
		panic(err)
	}
	return buf
}
