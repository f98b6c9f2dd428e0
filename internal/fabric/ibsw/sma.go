package ibsw

import (
	"github.com/PacketFive/hinic/internal/ibagent"
	"github.com/PacketFive/hinic/internal/proto"
)

// port0SMP lets the SMA answer a LID-routed SMP (class 0x01) addressed to
// the switch's LID or to the permissive LID.
func (s *Switch) port0SMP(in int, pkt []byte, p *proto.Packet, emit func(int, []byte)) {
	if !s.consume(in, pkt, p) {
		return
	}
	smp, err := proto.ParseSMP(p.Payload)
	if err != nil || smp.IsDirectedRoute() {
		// Another class on QP0, or a MAD of the wrong length.
		s.drops.VL15++
		s.ports[in].cnt.VL15Dropped++
		return
	}
	if !s.smaProcess(in, smp) {
		return
	}
	reqDLID, dlid := p.LRH.DLID(), p.LRH.SLID()
	out := s.replyPort(in, reqDLID, dlid)
	if out == 0 {
		return
	}
	if r := s.buildReply(&replyHdr{vl15: true, dlid: dlid, pkey: proto.PKeyDefault}); r != nil {
		s.sendVL15(out, r, emit)
	}
}

// smaProcess runs the SMA (ibagent.ServeSMP) on a request that arrived
// on external port in: it copies the request to s.mad and turns it into
// the answer there. It reports false when the request gets no answer: a
// response or a trap sent to the switch (there is no SM on a switch), a
// method without a response, a BaseVersion other than 1, or an M_Key
// violation.
//
// The M_Key is checked against the switch's M_Key in port 0's PortInfo
// (IBA 14.2.4), on LID-routed and directed-route SMPs alike: a violation
// is counted in M_KeyViolations and Drops.MKey. SMInfo is answered
// "attribute not supported": the switch runs no SM.
func (s *Switch) smaProcess(in int, req proto.SMP) bool {
	copy(s.mad[:], req)
	switch ibagent.ServeSMP(proto.SMP(s.mad[:]), switchSMA{s, in}) {
	case ibagent.Answered:
		return true
	case ibagent.MKeyViolated:
		s.drops.MKey++
	default:
		s.drops.MAD++
	}
	return false
}

// switchSMA is the switch as its SMA's node, for a request that came in
// on external port in.
type switchSMA struct {
	s  *Switch
	in int
}

func (n switchSMA) CheckMKey(method uint8, key uint64) proto.MKeyVerdict {
	return n.s.mkey.Check(&n.s.ports[0].pi, n.s.cfg.Clock.Now(), method, key)
}

func (n switchSMA) Attr(m proto.SMP, set, maskMKey bool) uint16 {
	return n.s.smaAttr(n.in, m, set, maskMKey)
}

// smaAttr answers one Get or Set in place in m.Data() and returns the
// status. maskMKey makes a PortInfo answer carry M_Key 0.
func (s *Switch) smaAttr(in int, m proto.SMP, set, maskMKey bool) uint16 {
	data := m.Data()
	am := m.AttributeModifier()
	switch m.AttributeID() {
	case proto.SMPAttrNodeDescription:
		if set {
			return proto.MADStatusMethodAttrUnsupported
		}
		proto.NodeDescription(data).Encode(&proto.NodeDescriptionFields{NodeString: s.cfg.Description})
	case proto.SMPAttrNodeInfo:
		if set {
			return proto.MADStatusMethodAttrUnsupported
		}
		s.nodeInfo(data, in)
	case proto.SMPAttrSwitchInfo:
		if set {
			if st := s.setSwitchInfo(proto.SwitchInfo(data[:proto.SwitchInfoSize])); st != 0 {
				s.encodeSwitchInfo(data)
				return st
			}
		}
		s.encodeSwitchInfo(data)
	case proto.SMPAttrGUIDInfo:
		// GUIDCap is 1: block 0 holds the port GUID, read-only; a Set
		// of block 0 is answered with it unchanged (IBA 14.2.5.5).
		if am != 0 {
			return proto.MADStatusInvalidField
		}
		var f proto.GUIDInfoFields
		f.GUIDs[0] = s.cfg.NodeGUID
		proto.GUIDInfo(data).Encode(&f)
	case proto.SMPAttrPortInfo:
		n := am &^ proto.PortInfoAMExtendedSpeeds // OpenSM sets bit 31
		if n > uint32(s.cfg.NumPorts) {
			return proto.MADStatusInvalidField
		}
		var st uint16
		if set {
			st = s.setPortInfo(int(n), proto.PortInfo(data))
		}
		f := s.portInfo(int(n), in)
		if maskMKey {
			f.MKey = 0
		}
		proto.PortInfo(data).Encode(&f)
		return st
	case proto.SMPAttrPKeyTable:
		port, block := proto.PKeyTableAttrModParts(am)
		if int(port) > s.cfg.NumPorts {
			return proto.MADStatusInvalidField
		}
		return s.pkeyTable(s.ports[port].pkeys, int(block), proto.PKeyTable(data), set)
	case proto.SMPAttrLinearForwardingTable:
		first := int(am) * proto.LFTEntriesPerBlock
		if am >= uint32(len(s.lft)/proto.LFTEntriesPerBlock) {
			return proto.MADStatusInvalidField
		}
		blk := s.lft[first : first+proto.LFTEntriesPerBlock]
		if set {
			copy(blk, proto.LinearForwardingTable(data).Ports())
		}
		copy(proto.LinearForwardingTable(data).Ports(), blk)
	case proto.SMPAttrMulticastForwardingTable:
		return s.mftBlock(am, proto.MulticastForwardingTable(data), set)
	default:
		// SMInfo (no SM on a switch), SLtoVLMappingTable,
		// VLArbitrationTable, vendor attributes, ...
		return proto.MADStatusMethodAttrUnsupported
	}
	return proto.MADStatusOK
}

// nodeInfo encodes NodeInfo as seen from port in: LocalPortNum is the port
// the SMP arrived on; a switch's PortGUID is its port 0 GUID, whatever the
// port (IBA 14.2.5.3).
func (s *Switch) nodeInfo(data []byte, in int) {
	proto.NodeInfo(data).Encode(&proto.NodeInfoFields{
		BaseVersion:     proto.MADBaseVersion,
		ClassVersion:    proto.SMClassVersion,
		NodeType:        proto.NodeTypeSwitch,
		NumPorts:        uint8(s.cfg.NumPorts),
		SystemImageGUID: s.cfg.SystemImageGUID,
		NodeGUID:        s.cfg.NodeGUID,
		PortGUID:        s.cfg.NodeGUID,
		PartitionCap:    uint16(s.cfg.PartitionCap),
		DeviceID:        s.cfg.DeviceID,
		Revision:        s.cfg.Revision,
		LocalPortNum:    uint8(in),
		VendorID:        s.cfg.VendorID,
	})
}

func (s *Switch) encodeSwitchInfo(data []byte) {
	clear(data)
	proto.SwitchInfo(data[:proto.SwitchInfoSize]).Encode(&s.si)
}

// setSwitchInfo applies the writable SwitchInfo fields (IBA 14.2.5.4):
// LinearFDBTop, DefaultPort, the default multicast ports, LifeTimeValue,
// MulticastFDBTop, and PortStateChange, which is write-1-to-clear. The
// capabilities are read-only and ignored. MulticastFDBTop is stored and
// reported but not enforced (the switch does not advertise
// IsMulticastFDBTopSupported, so OpenSM leaves it alone).
func (s *Switch) setSwitchInfo(d proto.SwitchInfo) uint16 {
	f := d.Fields()
	if int(f.LinearFDBTop) >= len(s.lft) {
		return proto.MADStatusInvalidField
	}
	s.si.LinearFDBTop = f.LinearFDBTop
	s.si.DefaultPort = f.DefaultPort
	s.si.DefaultMulticastPrimaryPort = f.DefaultMulticastPrimaryPort
	s.si.DefaultMulticastNotPrimaryPort = f.DefaultMulticastNotPrimaryPort
	s.si.LifeTimeValue = f.LifeTimeValue
	s.si.MulticastFDBTop = f.MulticastFDBTop
	if f.PortStateChange {
		s.si.PortStateChange = false
	}
	return proto.MADStatusOK
}

// portInfo returns PortInfo of port n as an SMP that arrived on port in
// sees it. External ports report zero in the fields only port 0 carries
// (LID, M_Key, GidPrefix, MasterSMLID, CapabilityMask, ...), as ibsim does.
func (s *Switch) portInfo(n, in int) proto.PortInfoFields {
	f := s.ports[n].pi
	f.LocalPortNum = uint8(in)
	return f
}

// setPortInfo validates a PortInfo Set of port n and, if every field is
// acceptable, applies it; otherwise it changes nothing and returns 0x001C.
//
// Port 0 (base switch port 0) takes the addressing and SM fields: M_Key,
// GidPrefix, LID, MasterSMLID, MasterSMSL, LMC, M_KeyProtectBits,
// M_KeyLeasePeriod, M_KeyViolations (the SM may reset the counter),
// SubnetTimeOut. A Set reaches here only with the right M_Key. Its link fields are fixed: it is always
// Active/LinkUp, so PortState and PhysState in a Set are ignored.
//
// External ports take the link fields: PortState, PortPhysicalState,
// LinkDownDefaultState, the enabled widths and speeds, NeighborMTU,
// OperationalVLs, VLHighLimit, HOQLife, VLStallCount, the partition
// enforcement and raw filter bits and the error thresholds. PortState
// follows the rules ibsim's do_portinfo applies (fabric-facts 1.2):
//
//   - 0 NoChange.
//   - 1 Down: the link retrains at once, so a port with a link comes back
//     in Init (a port without one stays Down).
//   - 3 Armed: only from Init. 4 Active: only from Armed. Anything else,
//     including Armed->Armed and Active->Active, is 0x001C; OpenSM
//     tolerates that answer when it re-activates an Active port
//     (fabric-facts 2.4 step 10).
//   - 2 Init and 5..15 are not values a Set may write: 0x001C.
//
// PortPhysicalState accepts 0 (no change), 2 Polling (re-enables a
// disabled port; the link then trains to Init if the cable is up) and
// 3 Disabled (the port goes Down and stays there whatever the cable does).
// NeighborMTU and OperationalVLs must not exceed MTUCap and VLCap; 0 in
// either means no change. No state change a Set causes raises
// SwitchInfo.PortStateChange (IBA 14.2.5.4: only the link state machine
// does; ibsim agrees).
func (s *Switch) setPortInfo(n int, d proto.PortInfo) uint16 {
	f := d.Fields()
	pt := &s.ports[n]
	if n == 0 {
		if f.LID >= proto.LIDMulticastBase {
			return proto.MADStatusInvalidField
		}
		pi := &pt.pi
		pi.MKey = f.MKey
		pi.GIDPrefix = f.GIDPrefix
		pi.LID = f.LID
		pi.MasterSMLID = f.MasterSMLID
		pi.MasterSMSL = f.MasterSMSL
		pi.LMC = f.LMC
		pi.MKeyProtectBits = f.MKeyProtectBits
		pi.MKeyLeasePeriod = f.MKeyLeasePeriod
		pi.MKeyViolations = f.MKeyViolations
		pi.SubnetTimeOut = f.SubnetTimeOut
		return proto.MADStatusOK
	}

	cur := pt.pi.PortState
	switch f.PortState {
	case proto.PortStateNoChange, proto.PortStateDown:
	case proto.PortStateArmed:
		if cur != proto.PortStateInit {
			return proto.MADStatusInvalidField
		}
	case proto.PortStateActive:
		if cur != proto.PortStateArmed {
			return proto.MADStatusInvalidField
		}
	default:
		return proto.MADStatusInvalidField
	}
	switch f.PortPhysicalState {
	case proto.PortPhysStateNoChange:
	case proto.PortPhysStatePolling:
	case proto.PortPhysStateDisabled:
		if f.PortState == proto.PortStateArmed || f.PortState == proto.PortStateActive {
			return proto.MADStatusInvalidField
		}
	default:
		return proto.MADStatusInvalidField
	}
	if f.LinkDownDefaultState > proto.PortPhysStatePolling {
		return proto.MADStatusInvalidField
	}
	if f.NeighborMTU > s.cfg.MTUCap || f.OperationalVLs > s.cfg.VLCap {
		return proto.MADStatusInvalidField
	}
	width := f.LinkWidthEnabled
	switch width {
	case 0:
		width = pt.pi.LinkWidthEnabled
	case proto.LinkWidthSetToSupported:
		width = linkWidthSupported
	default:
		if width&^linkWidthSupported != 0 {
			return proto.MADStatusInvalidField
		}
	}
	speed := f.LinkSpeedEnabled
	switch speed {
	case 0:
		speed = pt.pi.LinkSpeedEnabled
	case proto.LinkSpeedSetToSupported:
		speed = linkSpeedSupported
	default:
		if speed&^linkSpeedSupported != 0 {
			return proto.MADStatusInvalidField
		}
	}
	// No extended speed is supported: only "none", "set to supported"
	// (which is none) and "no change" are acceptable.
	switch f.LinkSpeedExtEnabled {
	case 0, linkSpeedExtSetToSupported, linkSpeedExtNoChange:
	default:
		return proto.MADStatusInvalidField
	}

	// Every field is acceptable: apply.
	pi := &pt.pi
	pi.LinkWidthEnabled = width
	pi.LinkSpeedEnabled = speed
	ibagent.ApplyLinkFields(pi, &f)
	pt.numVLs = uint8(proto.VLCapNumVLs(pi.OperationalVLs))
	pi.VLHighLimit = f.VLHighLimit
	pi.HOQLife = f.HOQLife
	pi.VLStallCount = f.VLStallCount
	pi.PartitionEnforcementInbound = f.PartitionEnforcementInbound
	pi.PartitionEnforcementOutbound = f.PartitionEnforcementOutbound
	pi.FilterRawInbound = f.FilterRawInbound
	pi.FilterRawOutbound = f.FilterRawOutbound
	pi.LocalPhyErrors = f.LocalPhyErrors
	pi.OverrunErrors = f.OverrunErrors

	switch f.PortPhysicalState {
	case proto.PortPhysStateDisabled:
		pi.PortPhysicalState = proto.PortPhysStateDisabled
		s.retrain(pt)
	case proto.PortPhysStatePolling:
		// Polling re-enables a disabled port; an enabled one is
		// already trained (or training) and is left alone.
		if pi.PortPhysicalState == proto.PortPhysStateDisabled {
			pi.PortPhysicalState = proto.PortPhysStatePolling
			s.retrain(pt)
		}
	}
	switch f.PortState {
	case proto.PortStateDown:
		if pi.PortState != proto.PortStateDown {
			// The link goes down and retrains straight back to
			// Init.
			s.retrain(pt)
		}
	case proto.PortStateArmed, proto.PortStateActive:
		pi.PortState = f.PortState
	}
	return proto.MADStatusOK
}

// pkeyTable answers a P_KeyTable Get or Set of one block of tbl; the
// answer holds the block as it now is, zero beyond the table's end.
func (s *Switch) pkeyTable(tbl []uint16, block int, d proto.PKeyTable, set bool) uint16 {
	first := block * proto.PKeyTableEntriesPerBlock
	if first >= len(tbl) {
		return proto.MADStatusInvalidField
	}
	n := min(proto.PKeyTableEntriesPerBlock, len(tbl)-first)
	if set {
		for i := range n {
			tbl[first+i] = d.PKey(i)
		}
	}
	var f proto.PKeyTableFields
	copy(f.PKeys[:n], tbl[first:first+n])
	d.Encode(&f)
	return proto.MADStatusOK
}

// mftBlock answers a MulticastForwardingTable Get or Set: 32 MLIDs of one
// block, the 16-port slice the position selects. Bits for ports the
// switch does not have are dropped.
func (s *Switch) mftBlock(am uint32, d proto.MulticastForwardingTable, set bool) uint16 {
	pos, block := proto.MFTAttrModParts(am)
	first := int(block) * proto.MFTEntriesPerBlock
	if int(pos) >= s.positions || first >= s.cfg.MulticastFDBCap {
		return proto.MADStatusInvalidField
	}
	valid := uint16(0xFFFF)
	if last := s.cfg.NumPorts - int(pos)*proto.MFTPortsPerPosition; last < 15 {
		valid = uint16(1)<<(last+1) - 1
	}
	var f proto.MulticastForwardingTableFields
	for i := range proto.MFTEntriesPerBlock {
		e := &s.mft[(first+i)*s.positions+int(pos)]
		if set {
			*e = d.PortMask(i) & valid
		}
		f.PortMasks[i] = *e
	}
	d.Encode(&f)
	return proto.MADStatusOK
}
