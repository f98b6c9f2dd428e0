package proto

import "encoding/binary"

// SMP attributes (IBA Vol 1 section 14.2.5), one file each
// (smp_attr_*.go). Each is a view of the 64-byte SMP data (SMP.Data) or of
// an equally laid-out record elsewhere (an SA record embeds several).
// ParseX checks the length once and returns the view cut to XSize; Encode
// writes exactly XSize bytes, zeroing the reserved bits among them, and
// never touches bytes beyond XSize.

// Subnet management packets (IBA Vol 1 section 14.2.1). An SMP is a MAD of
// class MgmtClassSubnLID (LID-routed, 14.2.1.1) or MgmtClassSubnDirectedRoute
// (directed route, 14.2.1.2). Both put the M_Key after the common header
// and 64 bytes of attribute data at offset 64.
//
// LID-routed SMP (IBA 14.2.1.1):
//
//	offset  size  field
//	     0    24  common MAD header (ClassSpecific reserved)
//	    24     8  M_Key
//	    32    32  Reserved
//	    64    64  SMP Data
//	   128   128  Reserved
//
// Directed-route SMP (IBA 14.2.1.2):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  BaseVersion  |   MgmtClass   | ClassVersion  |R|   Method    |   0
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|D|          Status             |  HopPointer   |   HopCount    |   4
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 TransactionID (8 bytes)                       |   8
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          AttributeID          |           Reserved            |  16
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       AttributeModifier                       |  20
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       M_Key (8 bytes)                         |  24
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            DrSLID             |            DrDLID             |  32
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Reserved (28 bytes)                        |  36
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    SMP Data (64 bytes)                        |  64
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                   InitialPath (64 bytes)                      | 128
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                   ReturnPath (64 bytes)                       | 192
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// D is 0 on the way out and 1 on the way back. The paths are indexed by hop
// (IBA 14.2.2): entry 0 is unused, InitialPath[i] is the egress port taken at
// hop i and ReturnPath[i] records the port the SMP arrived on there.
// DrSLID/DrDLID are the LID-routed parts at either end; the permissive LID
// 0xFFFF means "none".
const (
	smpHopPointer  = madClassSpecific
	smpHopCount    = madClassSpecific + 1
	smpMKey        = 24
	smpDrSLID      = 32
	smpDrDLID      = 34
	smpDRReserved  = 36
	smpLIDReserved = 32
	smpData        = 64
	smpInitialPath = 128
	smpReturnPath  = 192

	smpDirectionBit = 0x8000
	smpStatusMask   = 0x7FFF

	// SMPDataOffset is where the 64-byte SMP data starts within the MAD.
	SMPDataOffset = smpData
	// SMPDataSize is the size of the SMP data (one attribute or block).
	SMPDataSize = 64
	// SMPPathSize is the size of InitialPath and of ReturnPath.
	SMPPathSize = 64
	// SMPMaxHopCount is the largest HopCount a directed-route SMP can have.
	SMPMaxHopCount = SMPPathSize - 1
	// SMPPermissiveLID is the permissive LID (0xFFFF) used for DrSLID and
	// DrDLID when the directed route extends to that end.
	SMPPermissiveLID = 0xFFFF
	// SMClassVersion is the ClassVersion of both SMP classes.
	SMClassVersion = 1
)

// SMP attribute IDs (IBA 14.2.5, table 145).
const (
	// SMPAttrNotice is Notice (traps).
	SMPAttrNotice = 0x0002
	// SMPAttrNodeDescription is NodeDescription (14.2.5.2).
	SMPAttrNodeDescription = 0x0010
	// SMPAttrNodeInfo is NodeInfo (14.2.5.3).
	SMPAttrNodeInfo = 0x0011
	// SMPAttrSwitchInfo is SwitchInfo (14.2.5.4).
	SMPAttrSwitchInfo = 0x0012
	// SMPAttrGUIDInfo is GUIDInfo (14.2.5.5).
	SMPAttrGUIDInfo = 0x0014
	// SMPAttrPortInfo is PortInfo (14.2.5.6).
	SMPAttrPortInfo = 0x0015
	// SMPAttrPKeyTable is P_KeyTable (14.2.5.7).
	SMPAttrPKeyTable = 0x0016
	// SMPAttrSLtoVLMappingTable is SLtoVLMappingTable (14.2.5.8).
	SMPAttrSLtoVLMappingTable = 0x0017
	// SMPAttrVLArbitrationTable is VLArbitrationTable (14.2.5.9).
	SMPAttrVLArbitrationTable = 0x0018
	// SMPAttrLinearForwardingTable is LinearForwardingTable (14.2.5.10).
	SMPAttrLinearForwardingTable = 0x0019
	// SMPAttrRandomForwardingTable is RandomForwardingTable (14.2.5.11).
	SMPAttrRandomForwardingTable = 0x001A
	// SMPAttrMulticastForwardingTable is MulticastForwardingTable
	// (14.2.5.12).
	SMPAttrMulticastForwardingTable = 0x001B
	// SMPAttrSMInfo is SMInfo (14.2.5.13).
	SMPAttrSMInfo = 0x0020
	// SMPAttrPortInfoExtended is PortInfoExtended.
	SMPAttrPortInfoExtended = 0x0033
	// SMPAttrMlnxExtendedPortInfo is the Mellanox vendor attribute
	// MlnxExtendedPortInfo that OpenSM queries on Mellanox devices.
	SMPAttrMlnxExtendedPortInfo = 0xFF90
)

// SMP is a view of a subnet management packet, LID-routed or directed
// route. Obtain one with ParseSMP, which checks the length, the class and
// the hop fields; the accessors then never fail. The DR-only accessors read
// raw bytes of a LID-routed SMP (reserved there) and are meaningless for it.
type SMP []byte

// ParseSMP checks that b is one MAD of an SMP class and, for a
// directed-route SMP, that HopCount is at most SMPMaxHopCount and
// HopPointer at most HopCount+1 (so HopCount, and HopPointer below 64,
// index the 64-byte paths safely). It returns ErrMADTruncated or ErrMADTooLong for a wrong
// length, ErrMADClass for another class and ErrMADMalformed for bad hop
// fields.
func ParseSMP(b []byte) (SMP, error) {
	m, err := ParseMAD(b)
	if err != nil {
		return nil, err
	}
	switch m[madMgmtClass] {
	case MgmtClassSubnLID:
	case MgmtClassSubnDirectedRoute:
		hc := m[smpHopCount]
		if hc > SMPMaxHopCount || m[smpHopPointer] > hc+1 {
			return nil, ErrMADMalformed
		}
	default:
		return nil, ErrMADClass
	}
	return SMP(m), nil
}

// MAD returns the SMP as a plain MAD view.
func (s SMP) MAD() MAD { return MAD(s) }

// BaseVersion returns the MAD base version (1).
func (s SMP) BaseVersion() uint8 { return s[madBaseVersion] }

// MgmtClass returns MgmtClassSubnLID or MgmtClassSubnDirectedRoute.
func (s SMP) MgmtClass() uint8 { return s[madMgmtClass] }

// ClassVersion returns the class version (1).
func (s SMP) ClassVersion() uint8 { return s[madClassVersion] }

// Method returns the whole Method byte, R bit included.
func (s SMP) Method() uint8 { return s[madMethod] }

// IsResponse reports whether the R bit of the Method byte is set.
func (s SMP) IsResponse() bool { return s[madMethod]&MADMethodResponse != 0 }

// TransactionID returns the transaction ID.
func (s SMP) TransactionID() uint64 { return MAD(s).TransactionID() }

// AttributeID returns the attribute ID (an SMPAttr constant).
func (s SMP) AttributeID() uint16 { return MAD(s).AttributeID() }

// AttributeModifier returns the attribute modifier.
func (s SMP) AttributeModifier() uint32 { return MAD(s).AttributeModifier() }

// IsDirectedRoute reports whether the SMP is of the directed-route class.
func (s SMP) IsDirectedRoute() bool { return s[madMgmtClass] == MgmtClassSubnDirectedRoute }

// Status returns the status: 15 bits for a directed-route SMP (without the
// D bit), 16 bits for a LID-routed one.
func (s SMP) Status() uint16 {
	st := MAD(s).Status()
	if s.IsDirectedRoute() {
		st &= smpStatusMask
	}
	return st
}

// Direction returns the D bit of a directed-route SMP: false on the way
// out, true on the way back (IBA 14.2.1.2). It is false for a LID-routed
// SMP.
func (s SMP) Direction() bool {
	return s.IsDirectedRoute() && s[madStatus]&(smpDirectionBit>>8) != 0
}

// HopPointer returns the hop pointer of a directed-route SMP.
func (s SMP) HopPointer() uint8 { return s[smpHopPointer] }

// HopCount returns the number of directed-route hops.
func (s SMP) HopCount() uint8 { return s[smpHopCount] }

// MKey returns the 64-bit management key.
func (s SMP) MKey() uint64 { return binary.BigEndian.Uint64(s[smpMKey:]) }

// DrSLID returns the directed-route source LID (SMPPermissiveLID when the
// directed part starts at the requester).
func (s SMP) DrSLID() uint16 { return binary.BigEndian.Uint16(s[smpDrSLID:]) }

// DrDLID returns the directed-route destination LID (SMPPermissiveLID when
// the directed part ends at the responder).
func (s SMP) DrDLID() uint16 { return binary.BigEndian.Uint16(s[smpDrDLID:]) }

// Data returns the 64 bytes of SMP data: the attribute.
func (s SMP) Data() []byte { return s[smpData : smpData+SMPDataSize] }

// InitialPath returns the 64-byte initial path; index i is the egress port
// at hop i, index 0 is unused.
func (s SMP) InitialPath() []byte { return s[smpInitialPath : smpInitialPath+SMPPathSize] }

// ReturnPath returns the 64-byte return path; index i is the port the SMP
// entered at hop i on its way out, index 0 is unused.
func (s SMP) ReturnPath() []byte { return s[smpReturnPath : smpReturnPath+SMPPathSize] }

// SetMethod writes the whole Method byte.
func (s SMP) SetMethod(method uint8) { s[madMethod] = method }

// SetStatus writes the status; for a directed-route SMP only the low 15
// bits are written and the D bit is kept.
func (s SMP) SetStatus(status uint16) {
	if s.IsDirectedRoute() {
		status = status&smpStatusMask | MAD(s).Status()&smpDirectionBit
	}
	MAD(s).SetStatus(status)
}

// SetDirection writes the D bit of a directed-route SMP; it does nothing
// to a LID-routed SMP, where bit 15 belongs to Status.
func (s SMP) SetDirection(returning bool) {
	if s.IsDirectedRoute() {
		madSetBits(&s[madStatus], smpDirectionBit>>8, madBool(returning, smpDirectionBit>>8))
	}
}

// SetHopPointer writes the hop pointer.
func (s SMP) SetHopPointer(hp uint8) { s[smpHopPointer] = hp }

// SetHopCount writes the hop count.
func (s SMP) SetHopCount(hc uint8) { s[smpHopCount] = hc }

// SetMKey writes the management key.
func (s SMP) SetMKey(key uint64) { binary.BigEndian.PutUint64(s[smpMKey:], key) }

// SetDrSLID writes the directed-route source LID.
func (s SMP) SetDrSLID(lid uint16) { binary.BigEndian.PutUint16(s[smpDrSLID:], lid) }

// SetDrDLID writes the directed-route destination LID.
func (s SMP) SetDrDLID(lid uint16) { binary.BigEndian.PutUint16(s[smpDrDLID:], lid) }

// SetAttributeModifier writes the attribute modifier.
func (s SMP) SetAttributeModifier(am uint32) { MAD(s).SetAttributeModifier(am) }

// MakeResponse turns a request into its response in place, as an SMA does
// before answering: Method becomes GetResp (for Get and Set; see
// MADResponseMethod for the others), Status becomes status and, for a
// directed-route SMP, D is set. The TransactionID, attribute, data, hop
// fields and paths are kept: a returning directed-route SMP leaves the
// responder with HopPointer still HopCount+1, and the sender decrements it
// as it transmits (IBA 14.2.2.3). It reports false, leaving s untouched,
// for a method that takes no response.
func (s SMP) MakeResponse(status uint16) bool { return MAD(s).MakeResponse(status) }

// SMPFields holds the fields of an SMP to encode. The DR-only fields are
// ignored when MgmtClass is MgmtClassSubnLID.
type SMPFields struct {
	// BaseVersion is normally MADBaseVersion.
	BaseVersion uint8
	// MgmtClass is MgmtClassSubnLID or MgmtClassSubnDirectedRoute.
	MgmtClass uint8
	// ClassVersion is normally SMClassVersion.
	ClassVersion uint8
	// Method is the whole Method byte, R bit included.
	Method uint8
	// Status is 16 bits when LID-routed, 15 bits when directed route.
	Status uint16
	// Direction is the D bit (DR only).
	Direction bool
	// HopPointer is the hop pointer (DR only).
	HopPointer uint8
	// HopCount is the hop count (DR only).
	HopCount uint8
	// TransactionID is the transaction ID.
	TransactionID uint64
	// AttributeID is the attribute ID.
	AttributeID uint16
	// AttributeModifier is the attribute modifier.
	AttributeModifier uint32
	// MKey is the management key.
	MKey uint64
	// DrSLID is the directed-route source LID (DR only).
	DrSLID uint16
	// DrDLID is the directed-route destination LID (DR only).
	DrDLID uint16
	// InitialPath is the initial path (DR only).
	InitialPath [SMPPathSize]byte
	// ReturnPath is the return path (DR only).
	ReturnPath [SMPPathSize]byte
}

// Encode writes every field of f into everything but the SMP data (bytes
// 64..127, which the attribute's own Encode fills) and zeroes the reserved
// bytes: 18..19 and 36..63 of a directed-route SMP; 6..7, 18..19, 32..63 and
// 128..255 of a LID-routed one, whose DR-only fields are ignored. s must
// hold MADSize bytes.
func (s SMP) Encode(f *SMPFields) {
	dr := f.MgmtClass == MgmtClassSubnDirectedRoute
	h := MADFields{
		BaseVersion:       f.BaseVersion,
		MgmtClass:         f.MgmtClass,
		ClassVersion:      f.ClassVersion,
		Method:            f.Method,
		Status:            f.Status,
		TransactionID:     f.TransactionID,
		AttributeID:       f.AttributeID,
		AttributeModifier: f.AttributeModifier,
	}
	if dr {
		h.Status &= smpStatusMask
		if f.Direction {
			h.Status |= smpDirectionBit
		}
		h.ClassSpecific = uint16(f.HopPointer)<<8 | uint16(f.HopCount)
	}
	MAD(s).Encode(&h)
	binary.BigEndian.PutUint64(s[smpMKey:], f.MKey)
	if !dr {
		clear(s[smpLIDReserved:smpData])
		clear(s[smpInitialPath:MADSize])
		return
	}
	binary.BigEndian.PutUint16(s[smpDrSLID:], f.DrSLID)
	binary.BigEndian.PutUint16(s[smpDrDLID:], f.DrDLID)
	clear(s[smpDRReserved:smpData])
	copy(s[smpInitialPath:], f.InitialPath[:])
	copy(s[smpReturnPath:], f.ReturnPath[:])
}

// Fields decodes everything but the SMP data into an SMPFields. For a
// LID-routed SMP the DR-only fields are left zero.
func (s SMP) Fields() SMPFields {
	f := SMPFields{
		BaseVersion:       s.BaseVersion(),
		MgmtClass:         s.MgmtClass(),
		ClassVersion:      s.ClassVersion(),
		Method:            s.Method(),
		Status:            s.Status(),
		TransactionID:     s.TransactionID(),
		AttributeID:       s.AttributeID(),
		AttributeModifier: s.AttributeModifier(),
		MKey:              s.MKey(),
	}
	if s.IsDirectedRoute() {
		f.Direction = s.Direction()
		f.HopPointer = s.HopPointer()
		f.HopCount = s.HopCount()
		f.DrSLID = s.DrSLID()
		f.DrDLID = s.DrDLID()
		copy(f.InitialPath[:], s.InitialPath())
		copy(f.ReturnPath[:], s.ReturnPath())
	}
	return f
}
