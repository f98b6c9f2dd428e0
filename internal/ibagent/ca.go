package ibagent

import "github.com/PacketFive/hinic/internal/proto"

// CAPort is the port of a one-port channel adapter as its SMA sees it.
// Its methods lock what they share with other goroutines.
type CAPort interface {
	// NodeInfo is the CA's NodeInfo (LocalPortNum 1).
	NodeInfo() proto.NodeInfoFields
	// NodeDescription is the CA's NodeDescription.
	NodeDescription() string
	// PortGUID is the port's GUID, GUIDInfo's only entry.
	PortGUID() uint64
	// PortInfo is the port's current PortInfo.
	PortInfo() proto.PortInfoFields
	// SetPortInfo applies an SM's PortInfo Set: it checks f against the
	// port's current PortInfo with CheckPortInfoSet, stores it with
	// ApplyPortInfoSet, changes the port state and raises the node's
	// events; it returns the MAD status (a rejected Set changes nothing).
	SetPortInfo(f proto.PortInfoFields) uint16
	// PKeys runs fn on the port's P_Key table (one block), which fn may
	// change (a Set).
	PKeys(fn func(t *[proto.PKeyTableEntriesPerBlock]uint16))
}

// CAAttr answers the attributes of a CA's SMA in place (Node.Attr):
// NodeInfo, NodeDescription, PortInfo, P_KeyTable (block 0) and
// GUIDInfo (block 0, the port GUID), as Linux HCA drivers and ibsim's
// CA do. NodeInfo, NodeDescription and GUIDInfo are read-only.
func CAAttr(p CAPort, m proto.SMP, set, maskMKey bool) uint16 {
	data := m.Data()
	am := m.AttributeModifier()
	switch m.AttributeID() {
	case proto.SMPAttrNodeInfo:
		if set {
			return proto.MADStatusMethodAttrUnsupported
		}
		ni := p.NodeInfo()
		proto.NodeInfo(data).Encode(&ni)
	case proto.SMPAttrNodeDescription:
		if set {
			return proto.MADStatusMethodAttrUnsupported
		}
		proto.NodeDescription(data).Encode(&proto.NodeDescriptionFields{NodeString: p.NodeDescription()})
	case proto.SMPAttrPortInfo:
		// A CA answers for the receiving port whatever the modifier
		// says, 0 included (IBA 14.2.5.6).
		if n := proto.PortInfoPortNumber(am); n > 1 {
			return proto.MADStatusInvalidField
		}
		status := uint16(proto.MADStatusOK)
		if set {
			status = p.SetPortInfo(proto.PortInfo(data).Fields())
		}
		pi := p.PortInfo()
		if maskMKey {
			pi.MKey = 0
		}
		proto.PortInfo(data).Encode(&pi)
		return status
	case proto.SMPAttrPKeyTable:
		if _, block := proto.PKeyTableAttrModParts(am); block != 0 {
			return proto.MADStatusInvalidField
		}
		t := proto.PKeyTable(data)
		p.PKeys(func(keys *[proto.PKeyTableEntriesPerBlock]uint16) {
			if set {
				for i := range keys {
					keys[i] = t.PKey(i)
				}
			}
			t.Encode(&proto.PKeyTableFields{PKeys: *keys})
		})
	case proto.SMPAttrGUIDInfo:
		if am != 0 {
			return proto.MADStatusInvalidField
		}
		proto.GUIDInfo(data).Encode(&proto.GUIDInfoFields{GUIDs: [8]uint64{p.PortGUID()}})
	default:
		return proto.MADStatusMethodAttrUnsupported
	}
	return proto.MADStatusOK
}

// CheckPortInfoSet returns the status of an SM's PortInfo Set f on a CA
// port whose PortInfo is cur: PortState may stay (NoChange, or the state
// the port is in), go Down (the port retrains to Init), go to Armed only
// from Init and to Active only from Armed; NeighborMTU and OperationalVLs
// may not exceed the port's MTUCap and VLCap, and the LID may not be a
// multicast LID. 0 means the Set may be applied.
func CheckPortInfoSet(cur, f *proto.PortInfoFields) uint16 {
	switch f.PortState {
	case proto.PortStateNoChange, proto.PortStateDown:
	case proto.PortStateArmed:
		if cur.PortState != proto.PortStateInit && cur.PortState != proto.PortStateArmed {
			return proto.MADStatusInvalidField
		}
	case proto.PortStateActive:
		if cur.PortState != proto.PortStateArmed && cur.PortState != proto.PortStateActive {
			return proto.MADStatusInvalidField
		}
	default:
		return proto.MADStatusInvalidField
	}
	if (f.NeighborMTU != 0 && f.NeighborMTU > cur.MTUCap) || f.OperationalVLs > cur.VLCap || f.LID >= proto.LIDMulticastBase {
		return proto.MADStatusInvalidField
	}
	return proto.MADStatusOK
}

// ApplyPortInfoSet stores in pi the fields of a checked PortInfo Set f
// that an SM sets (M_Key and its lease, GID prefix, LID, master SM, LMC,
// subnet timeout; the link fields of ApplyLinkFields). The port state is
// the caller's to change.
func ApplyPortInfoSet(pi, f *proto.PortInfoFields) {
	pi.MKey = f.MKey
	pi.MKeyProtectBits = f.MKeyProtectBits
	pi.MKeyLeasePeriod = f.MKeyLeasePeriod
	pi.MKeyViolations = f.MKeyViolations
	pi.GIDPrefix = f.GIDPrefix
	pi.LID = f.LID
	pi.MasterSMLID = f.MasterSMLID
	pi.MasterSMSL = f.MasterSMSL
	pi.LMC = f.LMC
	pi.SubnetTimeOut = f.SubnetTimeOut
	ApplyLinkFields(pi, f)
}

// ApplyLinkFields stores the link fields of a checked PortInfo Set f in
// pi, those whose 0 means "no change" in a Set (IBA 14.2.5.6):
// NeighborMTU, OperationalVLs and LinkDownDefaultState. A CA's and a
// switch port's Sets both apply them so.
func ApplyLinkFields(pi, f *proto.PortInfoFields) {
	if f.NeighborMTU != 0 {
		pi.NeighborMTU = f.NeighborMTU
	}
	if f.OperationalVLs != 0 {
		pi.OperationalVLs = f.OperationalVLs
	}
	if f.LinkDownDefaultState != 0 {
		pi.LinkDownDefaultState = f.LinkDownDefaultState
	}
}
