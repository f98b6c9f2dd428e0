package proto

import (
	"bytes"
	"encoding/binary"
	"unicode/utf8"
)

// SMP attributes (IBA Vol 1 section 14.2.5). Each is a view of the 64-byte
// SMP data (SMP.Data) or of an equally laid-out record elsewhere (an SA
// record embeds several). ParseX checks the length once and returns the
// view cut to XSize; Encode writes exactly XSize bytes, zeroing the
// reserved bits among them, and never touches bytes beyond XSize.

// ---------------------------------------------------------------------------
// NodeInfo

// NodeInfo (IBA 14.2.5.3, table 146), 40 bytes:
//
//	offset  bits  field
//	     0     8  BaseVersion
//	     1     8  ClassVersion
//	     2     8  NodeType
//	     3     8  NumPorts
//	     4    64  SystemImageGUID
//	    12    64  NodeGUID
//	    20    64  PortGUID
//	    28    16  PartitionCap
//	    30    16  DeviceID
//	    32    32  Revision
//	    36     8  LocalPortNum
//	    37    24  VendorID
const (
	niBaseVersion     = 0
	niClassVersion    = 1
	niNodeType        = 2
	niNumPorts        = 3
	niSystemImageGUID = 4
	niNodeGUID        = 12
	niPortGUID        = 20
	niPartitionCap    = 28
	niDeviceID        = 30
	niRevision        = 32
	niLocalPortNum    = 36
	niVendorID        = 37

	// NodeInfoSize is the size of NodeInfo.
	NodeInfoSize = 40
)

// NodeType values (IBA 14.2.5.3).
const (
	// NodeTypeCA is a channel adapter.
	NodeTypeCA = 1
	// NodeTypeSwitch is a switch.
	NodeTypeSwitch = 2
	// NodeTypeRouter is a router.
	NodeTypeRouter = 3
)

// NodeInfo is a view of the NodeInfo attribute.
type NodeInfo []byte

// ParseNodeInfo checks that b holds NodeInfoSize bytes and returns a view
// of them.
func ParseNodeInfo(b []byte) (NodeInfo, error) {
	if len(b) < NodeInfoSize {
		return nil, ErrMADTruncated
	}
	return NodeInfo(b[:NodeInfoSize]), nil
}

// BaseVersion returns the MAD base version the node supports.
func (n NodeInfo) BaseVersion() uint8 { return n[niBaseVersion] }

// ClassVersion returns the SM class version the node supports.
func (n NodeInfo) ClassVersion() uint8 { return n[niClassVersion] }

// NodeType returns the node type (a NodeType constant).
func (n NodeInfo) NodeType() uint8 { return n[niNodeType] }

// NumPorts returns the number of physical ports.
func (n NodeInfo) NumPorts() uint8 { return n[niNumPorts] }

// SystemImageGUID returns the system image GUID.
func (n NodeInfo) SystemImageGUID() uint64 {
	return binary.BigEndian.Uint64(n[niSystemImageGUID:])
}

// NodeGUID returns the node GUID.
func (n NodeInfo) NodeGUID() uint64 { return binary.BigEndian.Uint64(n[niNodeGUID:]) }

// PortGUID returns the GUID of the port the SMP was received on (of port 0
// for a switch).
func (n NodeInfo) PortGUID() uint64 { return binary.BigEndian.Uint64(n[niPortGUID:]) }

// PartitionCap returns the number of P_Key table entries per port.
func (n NodeInfo) PartitionCap() uint16 { return binary.BigEndian.Uint16(n[niPartitionCap:]) }

// DeviceID returns the vendor's device ID.
func (n NodeInfo) DeviceID() uint16 { return binary.BigEndian.Uint16(n[niDeviceID:]) }

// Revision returns the device revision.
func (n NodeInfo) Revision() uint32 { return binary.BigEndian.Uint32(n[niRevision:]) }

// LocalPortNum returns the number of the port the SMP was received on.
func (n NodeInfo) LocalPortNum() uint8 { return n[niLocalPortNum] }

// VendorID returns the 24-bit vendor OUI.
func (n NodeInfo) VendorID() uint32 { return madUint24(n[niVendorID:]) }

// SetPortGUID writes PortGUID, which depends on the receiving port.
func (n NodeInfo) SetPortGUID(guid uint64) { binary.BigEndian.PutUint64(n[niPortGUID:], guid) }

// SetLocalPortNum writes LocalPortNum, which depends on the receiving port.
func (n NodeInfo) SetLocalPortNum(port uint8) { n[niLocalPortNum] = port }

// NodeInfoFields holds the fields of NodeInfo to encode.
type NodeInfoFields struct {
	BaseVersion     uint8  // MAD base version supported
	ClassVersion    uint8  // SM class version supported
	NodeType        uint8  // NodeTypeCA, NodeTypeSwitch or NodeTypeRouter
	NumPorts        uint8  // number of physical ports
	SystemImageGUID uint64 // system image GUID
	NodeGUID        uint64 // node GUID
	PortGUID        uint64 // GUID of the receiving port
	PartitionCap    uint16 // P_Key table entries per port
	DeviceID        uint16 // vendor's device ID
	Revision        uint32 // device revision
	LocalPortNum    uint8  // receiving port number
	VendorID        uint32 // 24-bit vendor OUI; the upper 8 bits are ignored
}

// Encode writes every field of f; n must hold NodeInfoSize bytes.
func (n NodeInfo) Encode(f *NodeInfoFields) {
	n[niBaseVersion] = f.BaseVersion
	n[niClassVersion] = f.ClassVersion
	n[niNodeType] = f.NodeType
	n[niNumPorts] = f.NumPorts
	binary.BigEndian.PutUint64(n[niSystemImageGUID:], f.SystemImageGUID)
	binary.BigEndian.PutUint64(n[niNodeGUID:], f.NodeGUID)
	binary.BigEndian.PutUint64(n[niPortGUID:], f.PortGUID)
	binary.BigEndian.PutUint16(n[niPartitionCap:], f.PartitionCap)
	binary.BigEndian.PutUint16(n[niDeviceID:], f.DeviceID)
	binary.BigEndian.PutUint32(n[niRevision:], f.Revision)
	n[niLocalPortNum] = f.LocalPortNum
	madPutUint24(n[niVendorID:], f.VendorID)
}

// Fields decodes the view into a NodeInfoFields.
func (n NodeInfo) Fields() NodeInfoFields {
	return NodeInfoFields{
		BaseVersion:     n.BaseVersion(),
		ClassVersion:    n.ClassVersion(),
		NodeType:        n.NodeType(),
		NumPorts:        n.NumPorts(),
		SystemImageGUID: n.SystemImageGUID(),
		NodeGUID:        n.NodeGUID(),
		PortGUID:        n.PortGUID(),
		PartitionCap:    n.PartitionCap(),
		DeviceID:        n.DeviceID(),
		Revision:        n.Revision(),
		LocalPortNum:    n.LocalPortNum(),
		VendorID:        n.VendorID(),
	}
}

// ---------------------------------------------------------------------------
// NodeDescription

// NodeDescription (IBA 14.2.5.2, table 147), 64 bytes:
//
//	offset  bits  field
//	     0   512  NodeString: UTF-8, padded with NULs when shorter than 64
//	              bytes (a 64-byte string has no terminator)
const (
	// NodeDescriptionSize is the size of NodeDescription.
	NodeDescriptionSize = 64
)

// NodeDescription is a view of the NodeDescription attribute.
type NodeDescription []byte

// ParseNodeDescription checks that b holds NodeDescriptionSize bytes and
// returns a view of them.
func ParseNodeDescription(b []byte) (NodeDescription, error) {
	if len(b) < NodeDescriptionSize {
		return nil, ErrMADTruncated
	}
	return NodeDescription(b[:NodeDescriptionSize]), nil
}

// NodeString returns the description: the bytes before the first NUL, or
// all 64 bytes if there is none. The result aliases the view.
func (d NodeDescription) NodeString() []byte {
	s := d[:NodeDescriptionSize]
	if i := bytes.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// NodeDescriptionFields holds the fields of NodeDescription to encode.
type NodeDescriptionFields struct {
	// NodeString is the description. Encode truncates it to 64 bytes at a
	// UTF-8 character boundary.
	NodeString string
}

// Encode writes f.NodeString, truncated to 64 bytes without splitting a
// UTF-8 character, and pads the rest of the 64 bytes with NULs. d must hold
// NodeDescriptionSize bytes.
func (d NodeDescription) Encode(f *NodeDescriptionFields) {
	s := f.NodeString
	if len(s) > NodeDescriptionSize {
		// Back up over at most UTFMax-1 continuation bytes so as not to
		// split a character; invalid UTF-8 is cut at 64 bytes regardless.
		n := NodeDescriptionSize
		for n > NodeDescriptionSize-utf8.UTFMax+1 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	n := copy(d[:NodeDescriptionSize], s)
	clear(d[n:NodeDescriptionSize])
}

// Fields decodes the view into a NodeDescriptionFields. Unlike the
// accessors it allocates, for the string.
func (d NodeDescription) Fields() NodeDescriptionFields {
	return NodeDescriptionFields{NodeString: string(d.NodeString())}
}

// ---------------------------------------------------------------------------
// SwitchInfo

// SwitchInfo (IBA 14.2.5.4, table 148), 20 bytes (the rest of the SMP data
// is reserved):
//
//	offset  bits  field
//	     0    16  LinearFDBCap
//	     2    16  RandomFDBCap
//	     4    16  MulticastFDBCap
//	     6    16  LinearFDBTop
//	     8     8  DefaultPort
//	     9     8  DefaultMulticastPrimaryPort
//	    10     8  DefaultMulticastNotPrimaryPort
//	    11     5  LifeTimeValue                      (bits 7:3)
//	           1  PortStateChange                    (bit 2)
//	           2  OptimizedSLtoVLMappingProgramming  (bits 1:0)
//	    12    16  LIDsPerPort
//	    14    16  PartitionEnforcementCap
//	    16     1  InboundEnforcementCap              (bit 7)
//	           1  OutboundEnforcementCap             (bit 6)
//	           1  FilterRawInboundCap                (bit 5)
//	           1  FilterRawOutboundCap               (bit 4)
//	           1  EnhancedPort0                      (bit 3)
//	           3  Reserved                           (bits 2:0)
//	    17     8  Reserved
//	    18    16  MulticastFDBTop
const (
	siLinearFDBCap              = 0
	siRandomFDBCap              = 2
	siMulticastFDBCap           = 4
	siLinearFDBTop              = 6
	siDefaultPort               = 8
	siDefMcastPrimaryPort       = 9
	siDefMcastNotPrimaryPort    = 10
	siLifeTime                  = 11
	siLIDsPerPort               = 12
	siPartitionEnforcementCap   = 14
	siEnforcement               = 16
	siReserved                  = 17
	siMulticastFDBTop           = 18
	siPortStateChangeBit        = 0x04
	siOptimizedSLtoVLMask       = 0x03
	siInboundEnforcementCapBit  = 0x80
	siOutboundEnforcementCapBit = 0x40
	siFilterRawInboundCapBit    = 0x20
	siFilterRawOutboundCapBit   = 0x10
	siEnhancedPort0Bit          = 0x08

	// SwitchInfoSize is the size of the defined part of SwitchInfo.
	SwitchInfoSize = 20
)

// SwitchInfo is a view of the SwitchInfo attribute.
type SwitchInfo []byte

// ParseSwitchInfo checks that b holds SwitchInfoSize bytes and returns a
// view of them.
func ParseSwitchInfo(b []byte) (SwitchInfo, error) {
	if len(b) < SwitchInfoSize {
		return nil, ErrMADTruncated
	}
	return SwitchInfo(b[:SwitchInfoSize]), nil
}

// LinearFDBCap returns the number of linear forwarding table entries
// supported.
func (s SwitchInfo) LinearFDBCap() uint16 { return binary.BigEndian.Uint16(s[siLinearFDBCap:]) }

// RandomFDBCap returns the number of random forwarding table entries
// supported.
func (s SwitchInfo) RandomFDBCap() uint16 { return binary.BigEndian.Uint16(s[siRandomFDBCap:]) }

// MulticastFDBCap returns the number of multicast forwarding table entries
// supported.
func (s SwitchInfo) MulticastFDBCap() uint16 {
	return binary.BigEndian.Uint16(s[siMulticastFDBCap:])
}

// LinearFDBTop returns the highest LID in use in the linear forwarding
// table.
func (s SwitchInfo) LinearFDBTop() uint16 { return binary.BigEndian.Uint16(s[siLinearFDBTop:]) }

// DefaultPort returns the port for unicast LIDs not in the table.
func (s SwitchInfo) DefaultPort() uint8 { return s[siDefaultPort] }

// DefaultMulticastPrimaryPort returns the default primary multicast port.
func (s SwitchInfo) DefaultMulticastPrimaryPort() uint8 { return s[siDefMcastPrimaryPort] }

// DefaultMulticastNotPrimaryPort returns the default multicast port for
// packets arriving on the primary port.
func (s SwitchInfo) DefaultMulticastNotPrimaryPort() uint8 { return s[siDefMcastNotPrimaryPort] }

// LifeTimeValue returns the 5-bit switch packet lifetime exponent.
func (s SwitchInfo) LifeTimeValue() uint8 { return s[siLifeTime] >> 3 }

// PortStateChange reports whether a port changed state since the SM last
// cleared the bit.
func (s SwitchInfo) PortStateChange() bool { return s[siLifeTime]&siPortStateChangeBit != 0 }

// OptimizedSLtoVLMappingProgramming returns the 2-bit
// OptimizedSLtoVLMappingProgramming capability.
func (s SwitchInfo) OptimizedSLtoVLMappingProgramming() uint8 {
	return s[siLifeTime] & siOptimizedSLtoVLMask
}

// LIDsPerPort returns the number of LIDs per port.
func (s SwitchInfo) LIDsPerPort() uint16 { return binary.BigEndian.Uint16(s[siLIDsPerPort:]) }

// PartitionEnforcementCap returns the number of P_Key entries per external
// port used for partition enforcement.
func (s SwitchInfo) PartitionEnforcementCap() uint16 {
	return binary.BigEndian.Uint16(s[siPartitionEnforcementCap:])
}

// InboundEnforcementCap reports inbound partition enforcement support.
func (s SwitchInfo) InboundEnforcementCap() bool {
	return s[siEnforcement]&siInboundEnforcementCapBit != 0
}

// OutboundEnforcementCap reports outbound partition enforcement support.
func (s SwitchInfo) OutboundEnforcementCap() bool {
	return s[siEnforcement]&siOutboundEnforcementCapBit != 0
}

// FilterRawInboundCap reports inbound raw packet filtering support.
func (s SwitchInfo) FilterRawInboundCap() bool {
	return s[siEnforcement]&siFilterRawInboundCapBit != 0
}

// FilterRawOutboundCap reports outbound raw packet filtering support.
func (s SwitchInfo) FilterRawOutboundCap() bool {
	return s[siEnforcement]&siFilterRawOutboundCapBit != 0
}

// EnhancedPort0 reports whether switch port 0 is an enhanced port.
func (s SwitchInfo) EnhancedPort0() bool { return s[siEnforcement]&siEnhancedPort0Bit != 0 }

// MulticastFDBTop returns the highest MLID in use in the multicast
// forwarding table.
func (s SwitchInfo) MulticastFDBTop() uint16 {
	return binary.BigEndian.Uint16(s[siMulticastFDBTop:])
}

// SetPortStateChange writes PortStateChange (a switch sets it when a port
// changes state; the SM clears it by writing 1).
func (s SwitchInfo) SetPortStateChange(v bool) {
	madSetBits(&s[siLifeTime], siPortStateChangeBit, madBool(v, siPortStateChangeBit))
}

// SwitchInfoFields holds the fields of SwitchInfo to encode. Sub-byte
// fields are masked to their widths.
type SwitchInfoFields struct {
	LinearFDBCap                      uint16 // linear FDB entries supported
	RandomFDBCap                      uint16 // random FDB entries supported
	MulticastFDBCap                   uint16 // multicast FDB entries supported
	LinearFDBTop                      uint16 // top LID of the linear FDB
	DefaultPort                       uint8  // port for unknown unicast LIDs
	DefaultMulticastPrimaryPort       uint8  // default primary multicast port
	DefaultMulticastNotPrimaryPort    uint8  // default non-primary multicast port
	LifeTimeValue                     uint8  // 5 bits
	PortStateChange                   bool   // a port changed state
	OptimizedSLtoVLMappingProgramming uint8  // 2 bits
	LIDsPerPort                       uint16 // LIDs per port
	PartitionEnforcementCap           uint16 // P_Keys per port for enforcement
	InboundEnforcementCap             bool   // inbound partition enforcement
	OutboundEnforcementCap            bool   // outbound partition enforcement
	FilterRawInboundCap               bool   // inbound raw filtering
	FilterRawOutboundCap              bool   // outbound raw filtering
	EnhancedPort0                     bool   // port 0 is enhanced
	MulticastFDBTop                   uint16 // top MLID of the multicast FDB
}

// Encode writes every field of f and zeroes the reserved bits (byte 16
// bits 2:0 and byte 17); s must hold SwitchInfoSize bytes.
func (s SwitchInfo) Encode(f *SwitchInfoFields) {
	binary.BigEndian.PutUint16(s[siLinearFDBCap:], f.LinearFDBCap)
	binary.BigEndian.PutUint16(s[siRandomFDBCap:], f.RandomFDBCap)
	binary.BigEndian.PutUint16(s[siMulticastFDBCap:], f.MulticastFDBCap)
	binary.BigEndian.PutUint16(s[siLinearFDBTop:], f.LinearFDBTop)
	s[siDefaultPort] = f.DefaultPort
	s[siDefMcastPrimaryPort] = f.DefaultMulticastPrimaryPort
	s[siDefMcastNotPrimaryPort] = f.DefaultMulticastNotPrimaryPort
	s[siLifeTime] = f.LifeTimeValue<<3 | madBool(f.PortStateChange, siPortStateChangeBit) |
		f.OptimizedSLtoVLMappingProgramming&siOptimizedSLtoVLMask
	binary.BigEndian.PutUint16(s[siLIDsPerPort:], f.LIDsPerPort)
	binary.BigEndian.PutUint16(s[siPartitionEnforcementCap:], f.PartitionEnforcementCap)
	s[siEnforcement] = madBool(f.InboundEnforcementCap, siInboundEnforcementCapBit) |
		madBool(f.OutboundEnforcementCap, siOutboundEnforcementCapBit) |
		madBool(f.FilterRawInboundCap, siFilterRawInboundCapBit) |
		madBool(f.FilterRawOutboundCap, siFilterRawOutboundCapBit) |
		madBool(f.EnhancedPort0, siEnhancedPort0Bit)
	s[siReserved] = 0
	binary.BigEndian.PutUint16(s[siMulticastFDBTop:], f.MulticastFDBTop)
}

// Fields decodes the view into a SwitchInfoFields.
func (s SwitchInfo) Fields() SwitchInfoFields {
	return SwitchInfoFields{
		LinearFDBCap:                      s.LinearFDBCap(),
		RandomFDBCap:                      s.RandomFDBCap(),
		MulticastFDBCap:                   s.MulticastFDBCap(),
		LinearFDBTop:                      s.LinearFDBTop(),
		DefaultPort:                       s.DefaultPort(),
		DefaultMulticastPrimaryPort:       s.DefaultMulticastPrimaryPort(),
		DefaultMulticastNotPrimaryPort:    s.DefaultMulticastNotPrimaryPort(),
		LifeTimeValue:                     s.LifeTimeValue(),
		PortStateChange:                   s.PortStateChange(),
		OptimizedSLtoVLMappingProgramming: s.OptimizedSLtoVLMappingProgramming(),
		LIDsPerPort:                       s.LIDsPerPort(),
		PartitionEnforcementCap:           s.PartitionEnforcementCap(),
		InboundEnforcementCap:             s.InboundEnforcementCap(),
		OutboundEnforcementCap:            s.OutboundEnforcementCap(),
		FilterRawInboundCap:               s.FilterRawInboundCap(),
		FilterRawOutboundCap:              s.FilterRawOutboundCap(),
		EnhancedPort0:                     s.EnhancedPort0(),
		MulticastFDBTop:                   s.MulticastFDBTop(),
	}
}

// ---------------------------------------------------------------------------
// PortInfo

// PortInfo (IBA 14.2.5.6, table 150), 64 bytes:
//
//	offset  bits  field
//	     0    64  M_Key
//	     8    64  GidPrefix
//	    16    16  LID
//	    18    16  MasterSMLID
//	    20    32  CapabilityMask
//	    24    16  DiagCode
//	    26    16  M_KeyLeasePeriod
//	    28     8  LocalPortNum
//	    29     8  LinkWidthEnabled
//	    30     8  LinkWidthSupported
//	    31     8  LinkWidthActive
//	    32     4  LinkSpeedSupported         (7:4)  4 PortState             (3:0)
//	    33     4  PortPhysicalState          (7:4)  4 LinkDownDefaultState  (3:0)
//	    34     2  M_KeyProtectBits           (7:6)  3 Reserved (5:3)  3 LMC (2:0)
//	    35     4  LinkSpeedActive            (7:4)  4 LinkSpeedEnabled      (3:0)
//	    36     4  NeighborMTU                (7:4)  4 MasterSMSL            (3:0)
//	    37     4  VLCap                      (7:4)  4 InitType              (3:0)
//	    38     8  VLHighLimit
//	    39     8  VLArbitrationHighCap
//	    40     8  VLArbitrationLowCap
//	    41     4  InitTypeReply              (7:4)  4 MTUCap                (3:0)
//	    42     3  VLStallCount               (7:5)  5 HOQLife               (4:0)
//	    43     4  OperationalVLs             (7:4)
//	           1  PartitionEnforcementInbound  (3)  1 PartitionEnforcementOutbound (2)
//	           1  FilterRawInbound             (1)  1 FilterRawOutbound            (0)
//	    44    16  M_KeyViolations
//	    46    16  P_KeyViolations
//	    48    16  Q_KeyViolations
//	    50     8  GUIDCap
//	    51     1  ClientReregister (7)  2 MulticastPKeyTrapSuppressionEnabled (6:5)
//	           5  SubnetTimeOut (4:0)
//	    52     3  Reserved (7:5)  5 RespTimeValue (4:0)
//	    53     4  LocalPhyErrors (7:4)  4 OverrunErrors (3:0)
//	    54    16  MaxCreditHint
//	    56     8  Reserved
//	    57    24  LinkRoundTripLatency
//	    60    16  CapabilityMask2
//	    62     4  LinkSpeedExtActive (7:4)  4 LinkSpeedExtSupported (3:0)
//	    63     3  Reserved (7:5)  5 LinkSpeedExtEnabled (4:0)
//
// The AttributeModifier of a PortInfo SMP holds the port number in bits 7:0
// (ignored by a CA, which answers for the receiving port) and, from IBA 1.3
// on, SMSupportsExtendedSpeeds in bit 31, which OpenSM sets.
const (
	piMKey                 = 0
	piGIDPrefix            = 8
	piLID                  = 16
	piMasterSMLID          = 18
	piCapabilityMask       = 20
	piDiagCode             = 24
	piMKeyLeasePeriod      = 26
	piLocalPortNum         = 28
	piLinkWidthEnabled     = 29
	piLinkWidthSupported   = 30
	piLinkWidthActive      = 31
	piSpeedState           = 32
	piPhysDownDefault      = 33
	piMKeyProtLMC          = 34
	piSpeedActiveEnabled   = 35
	piNeighborMTUSMSL      = 36
	piVLCapInitType        = 37
	piVLHighLimit          = 38
	piVLArbHighCap         = 39
	piVLArbLowCap          = 40
	piInitTypeReplyMTUCap  = 41
	piVLStallHOQLife       = 42
	piOperVLsEnforcement   = 43
	piMKeyViolations       = 44
	piPKeyViolations       = 46
	piQKeyViolations       = 48
	piGUIDCap              = 50
	piReregSubnetTimeOut   = 51
	piRespTimeValue        = 52
	piPhyOverrunErrors     = 53
	piMaxCreditHint        = 54
	piReserved56           = 56
	piLinkRoundTripLatency = 57
	piCapabilityMask2      = 60
	piSpeedExtActiveSupp   = 62
	piSpeedExtEnabled      = 63

	piPartEnfInboundBit   = 0x08
	piPartEnfOutboundBit  = 0x04
	piFilterRawInboundBit = 0x02
	piFilterRawOutbound   = 0x01
	piClientReregisterBit = 0x80

	// PortInfoSize is the size of PortInfo.
	PortInfoSize = 64
	// PortInfoAMExtendedSpeeds is bit 31 of the PortInfo attribute
	// modifier: SMSupportsExtendedSpeeds.
	PortInfoAMExtendedSpeeds = 1 << 31
)

// PortState values (IBA 14.2.5.6).
const (
	PortStateNoChange = 0 // Set: no state change
	PortStateDown     = 1 // Down (includes Sleep and Polling)
	PortStateInit     = 2 // Initialize
	PortStateArmed    = 3 // Armed
	PortStateActive   = 4 // Active
)

// PortPhysicalState values (IBA 14.2.5.6).
const (
	PortPhysStateNoChange                  = 0 // Set: no state change
	PortPhysStateSleep                     = 1 // Sleep
	PortPhysStatePolling                   = 2 // Polling
	PortPhysStateDisabled                  = 3 // Disabled
	PortPhysStatePortConfigurationTraining = 4 // PortConfigurationTraining
	PortPhysStateLinkUp                    = 5 // LinkUp
	PortPhysStateLinkErrorRecovery         = 6 // LinkErrorRecovery
	PortPhysStatePhyTest                   = 7 // Phy Test
)

// MTU encodings of NeighborMTU and MTUCap (IBA 14.2.5.6) and of the path
// MTU of a QP.
const (
	IBMTU256  = 1 // 256 bytes
	IBMTU512  = 2 // 512 bytes
	IBMTU1024 = 3 // 1024 bytes
	IBMTU2048 = 4 // 2048 bytes
	IBMTU4096 = 5 // 4096 bytes
)

// LinkWidth bits of LinkWidthEnabled, LinkWidthSupported and
// LinkWidthActive (IBA 14.2.5.6). Active holds exactly one bit.
const (
	LinkWidth1X  = 0x01 // 1x
	LinkWidth4X  = 0x02 // 4x
	LinkWidth8X  = 0x04 // 8x
	LinkWidth12X = 0x08 // 12x
	LinkWidth2X  = 0x10 // 2x
	// LinkWidthSetToSupported, written to LinkWidthEnabled, enables every
	// supported width; 0 there means no change.
	LinkWidthSetToSupported = 0xFF
)

// LinkSpeed bits of LinkSpeedSupported, LinkSpeedEnabled and
// LinkSpeedActive (IBA 14.2.5.6).
const (
	LinkSpeedSDR = 0x1 // 2.5 Gb/s per lane
	LinkSpeedDDR = 0x2 // 5.0 Gb/s per lane
	LinkSpeedQDR = 0x4 // 10.0 Gb/s per lane
	// LinkSpeedSetToSupported, written to LinkSpeedEnabled, enables every
	// supported speed; 0 there means no change.
	LinkSpeedSetToSupported = 0xF
)

// LinkSpeedExt bits of LinkSpeedExtSupported, LinkSpeedExtEnabled and
// LinkSpeedExtActive (valid when CapabilityMask has
// PortCapIsExtendedSpeedsSupported).
const (
	LinkSpeedExtFDR = 0x1 // 14.0625 Gb/s per lane
	LinkSpeedExtEDR = 0x2 // 25.78125 Gb/s per lane
	LinkSpeedExtHDR = 0x4 // 53.125 Gb/s per lane
	LinkSpeedExtNDR = 0x8 // 106.25 Gb/s per lane
)

// VLCap and OperationalVLs values (IBA 14.2.5.6): the data VLs in use.
const (
	VLCapVL0     = 1 // VL0
	VLCapVL0To1  = 2 // VL0-VL1
	VLCapVL0To3  = 3 // VL0-VL3
	VLCapVL0To7  = 4 // VL0-VL7
	VLCapVL0To14 = 5 // VL0-VL14
)

// PortInfo CapabilityMask bits (IBA 14.2.5.6, table 150).
const (
	PortCapIsSM                               = 0x00000002 // an SM runs behind this port
	PortCapIsNoticeSupported                  = 0x00000004 // Notice attribute supported
	PortCapIsTrapSupported                    = 0x00000008 // traps supported
	PortCapIsSLMappingSupported               = 0x00000040 // SLtoVLMappingTable supported
	PortCapIsSMDisabled                       = 0x00000400 // the SM is disabled
	PortCapIsExtendedSpeedsSupported          = 0x00004000 // LinkSpeedExt fields valid
	PortCapIsCapabilityMask2Supported         = 0x00008000 // CapabilityMask2 valid
	PortCapIsCommunicationManagementSupported = 0x00010000 // a CM agent is present
	PortCapIsDeviceManagementSupported        = 0x00080000 // a DevMgt agent is present
	PortCapIsVendorClassSupported             = 0x00100000 // vendor classes supported
	PortCapIsClientReregistrationSupported    = 0x02000000 // ClientReregister honoured
)

// IBMTUBytes returns the size in bytes of an MTU encoding (IBMTU256 ..
// IBMTU4096), or 0 for any other value.
func IBMTUBytes(mtu uint8) int {
	if mtu < IBMTU256 || mtu > IBMTU4096 {
		return 0
	}
	return 128 << mtu
}

// IBMTUEnum returns the MTU encoding of a size of exactly 256, 512, 1024,
// 2048 or 4096 bytes, or 0 for any other size.
func IBMTUEnum(size int) uint8 {
	for mtu := uint8(IBMTU256); mtu <= IBMTU4096; mtu++ {
		if 128<<mtu == size {
			return mtu
		}
	}
	return 0
}

// VLCapNumVLs returns the number of data VLs a VLCap or OperationalVLs value
// denotes (1, 2, 4, 8 or 15), or 0 for a value outside VLCapVL0..VLCapVL0To14.
func VLCapNumVLs(v uint8) int {
	switch {
	case v < VLCapVL0 || v > VLCapVL0To14:
		return 0
	case v == VLCapVL0To14:
		return 15
	}
	return 1 << (v - 1)
}

// PortInfoPortNumber returns the port number of a PortInfo attribute
// modifier, bits 7:0, ignoring SMSupportsExtendedSpeeds (bit 31) and the
// reserved bits.
func PortInfoPortNumber(attrMod uint32) uint8 { return uint8(attrMod) }

// PortInfoSMSupportsExtendedSpeeds reports bit 31 of a PortInfo attribute
// modifier.
func PortInfoSMSupportsExtendedSpeeds(attrMod uint32) bool {
	return attrMod&PortInfoAMExtendedSpeeds != 0
}

// PortInfoAttrMod builds a PortInfo attribute modifier.
func PortInfoAttrMod(port uint8, smSupportsExtendedSpeeds bool) uint32 {
	am := uint32(port)
	if smSupportsExtendedSpeeds {
		am |= PortInfoAMExtendedSpeeds
	}
	return am
}

// PortInfo is a view of the PortInfo attribute.
type PortInfo []byte

// ParsePortInfo checks that b holds PortInfoSize bytes and returns a view
// of them.
func ParsePortInfo(b []byte) (PortInfo, error) {
	if len(b) < PortInfoSize {
		return nil, ErrMADTruncated
	}
	return PortInfo(b[:PortInfoSize]), nil
}

// MKey returns M_Key.
func (p PortInfo) MKey() uint64 { return binary.BigEndian.Uint64(p[piMKey:]) }

// GIDPrefix returns GidPrefix, the subnet prefix.
func (p PortInfo) GIDPrefix() uint64 { return binary.BigEndian.Uint64(p[piGIDPrefix:]) }

// LID returns the base LID of the port.
func (p PortInfo) LID() uint16 { return binary.BigEndian.Uint16(p[piLID:]) }

// MasterSMLID returns the LID of the master SM.
func (p PortInfo) MasterSMLID() uint16 { return binary.BigEndian.Uint16(p[piMasterSMLID:]) }

// CapabilityMask returns the capability mask (PortCap bits).
func (p PortInfo) CapabilityMask() uint32 {
	return binary.BigEndian.Uint32(p[piCapabilityMask:])
}

// DiagCode returns the diagnostic code.
func (p PortInfo) DiagCode() uint16 { return binary.BigEndian.Uint16(p[piDiagCode:]) }

// MKeyLeasePeriod returns M_KeyLeasePeriod in seconds.
func (p PortInfo) MKeyLeasePeriod() uint16 {
	return binary.BigEndian.Uint16(p[piMKeyLeasePeriod:])
}

// LocalPortNum returns the number of the port the SMP was received on.
func (p PortInfo) LocalPortNum() uint8 { return p[piLocalPortNum] }

// LinkWidthEnabled returns the enabled link widths (LinkWidth bits).
func (p PortInfo) LinkWidthEnabled() uint8 { return p[piLinkWidthEnabled] }

// LinkWidthSupported returns the supported link widths (LinkWidth bits).
func (p PortInfo) LinkWidthSupported() uint8 { return p[piLinkWidthSupported] }

// LinkWidthActive returns the active link width (one LinkWidth bit).
func (p PortInfo) LinkWidthActive() uint8 { return p[piLinkWidthActive] }

// LinkSpeedSupported returns the supported link speeds (LinkSpeed bits).
func (p PortInfo) LinkSpeedSupported() uint8 { return p[piSpeedState] >> 4 }

// PortState returns the logical port state (a PortState constant).
func (p PortInfo) PortState() uint8 { return p[piSpeedState] & 0x0F }

// PortPhysicalState returns the physical port state (a PortPhysState
// constant).
func (p PortInfo) PortPhysicalState() uint8 { return p[piPhysDownDefault] >> 4 }

// LinkDownDefaultState returns LinkDownDefaultState (2 Polling, 1 Sleep).
func (p PortInfo) LinkDownDefaultState() uint8 { return p[piPhysDownDefault] & 0x0F }

// MKeyProtectBits returns the 2-bit M_Key protection level.
func (p PortInfo) MKeyProtectBits() uint8 { return p[piMKeyProtLMC] >> 6 }

// LMC returns the 3-bit LID mask control.
func (p PortInfo) LMC() uint8 { return p[piMKeyProtLMC] & 0x07 }

// LinkSpeedActive returns the active link speed (one LinkSpeed bit).
func (p PortInfo) LinkSpeedActive() uint8 { return p[piSpeedActiveEnabled] >> 4 }

// LinkSpeedEnabled returns the enabled link speeds (LinkSpeed bits).
func (p PortInfo) LinkSpeedEnabled() uint8 { return p[piSpeedActiveEnabled] & 0x0F }

// NeighborMTU returns the active MTU towards the neighbour (an IBMTU
// value).
func (p PortInfo) NeighborMTU() uint8 { return p[piNeighborMTUSMSL] >> 4 }

// MasterSMSL returns the SL to use towards the master SM.
func (p PortInfo) MasterSMSL() uint8 { return p[piNeighborMTUSMSL] & 0x0F }

// VLCap returns the data VLs supported (a VLCap value).
func (p PortInfo) VLCap() uint8 { return p[piVLCapInitType] >> 4 }

// InitType returns the InitType bits the SM sends.
func (p PortInfo) InitType() uint8 { return p[piVLCapInitType] & 0x0F }

// VLHighLimit returns the high-priority VL arbitration limit.
func (p PortInfo) VLHighLimit() uint8 { return p[piVLHighLimit] }

// VLArbitrationHighCap returns the number of high-priority VL arbitration
// table entries supported.
func (p PortInfo) VLArbitrationHighCap() uint8 { return p[piVLArbHighCap] }

// VLArbitrationLowCap returns the number of low-priority VL arbitration
// table entries supported.
func (p PortInfo) VLArbitrationLowCap() uint8 { return p[piVLArbLowCap] }

// InitTypeReply returns the InitTypeReply bits.
func (p PortInfo) InitTypeReply() uint8 { return p[piInitTypeReplyMTUCap] >> 4 }

// MTUCap returns the largest MTU supported (an IBMTU value).
func (p PortInfo) MTUCap() uint8 { return p[piInitTypeReplyMTUCap] & 0x0F }

// VLStallCount returns the 3-bit VL stall count.
func (p PortInfo) VLStallCount() uint8 { return p[piVLStallHOQLife] >> 5 }

// HOQLife returns the 5-bit head-of-queue lifetime exponent.
func (p PortInfo) HOQLife() uint8 { return p[piVLStallHOQLife] & 0x1F }

// OperationalVLs returns the data VLs in use (a VLCap value).
func (p PortInfo) OperationalVLs() uint8 { return p[piOperVLsEnforcement] >> 4 }

// PartitionEnforcementInbound reports inbound partition enforcement.
func (p PortInfo) PartitionEnforcementInbound() bool {
	return p[piOperVLsEnforcement]&piPartEnfInboundBit != 0
}

// PartitionEnforcementOutbound reports outbound partition enforcement.
func (p PortInfo) PartitionEnforcementOutbound() bool {
	return p[piOperVLsEnforcement]&piPartEnfOutboundBit != 0
}

// FilterRawInbound reports inbound raw packet filtering.
func (p PortInfo) FilterRawInbound() bool {
	return p[piOperVLsEnforcement]&piFilterRawInboundBit != 0
}

// FilterRawOutbound reports outbound raw packet filtering.
func (p PortInfo) FilterRawOutbound() bool {
	return p[piOperVLsEnforcement]&piFilterRawOutbound != 0
}

// MKeyViolations returns the M_Key violation counter.
func (p PortInfo) MKeyViolations() uint16 {
	return binary.BigEndian.Uint16(p[piMKeyViolations:])
}

// PKeyViolations returns the P_Key violation counter.
func (p PortInfo) PKeyViolations() uint16 {
	return binary.BigEndian.Uint16(p[piPKeyViolations:])
}

// QKeyViolations returns the Q_Key violation counter.
func (p PortInfo) QKeyViolations() uint16 {
	return binary.BigEndian.Uint16(p[piQKeyViolations:])
}

// GUIDCap returns the number of GUID entries supported.
func (p PortInfo) GUIDCap() uint8 { return p[piGUIDCap] }

// ClientReregister reports the ClientReregister bit.
func (p PortInfo) ClientReregister() bool {
	return p[piReregSubnetTimeOut]&piClientReregisterBit != 0
}

// MulticastPKeyTrapSuppressionEnabled returns the 2-bit
// MulticastPKeyTrapSuppressionEnabled field.
func (p PortInfo) MulticastPKeyTrapSuppressionEnabled() uint8 {
	return p[piReregSubnetTimeOut] >> 5 & 0x03
}

// SubnetTimeOut returns the 5-bit subnet timeout exponent.
func (p PortInfo) SubnetTimeOut() uint8 { return p[piReregSubnetTimeOut] & 0x1F }

// RespTimeValue returns the 5-bit response time exponent.
func (p PortInfo) RespTimeValue() uint8 { return p[piRespTimeValue] & 0x1F }

// LocalPhyErrors returns the 4-bit local physical error threshold.
func (p PortInfo) LocalPhyErrors() uint8 { return p[piPhyOverrunErrors] >> 4 }

// OverrunErrors returns the 4-bit overrun error threshold.
func (p PortInfo) OverrunErrors() uint8 { return p[piPhyOverrunErrors] & 0x0F }

// MaxCreditHint returns the maximum credit hint.
func (p PortInfo) MaxCreditHint() uint16 { return binary.BigEndian.Uint16(p[piMaxCreditHint:]) }

// LinkRoundTripLatency returns the 24-bit link round-trip latency.
func (p PortInfo) LinkRoundTripLatency() uint32 { return madUint24(p[piLinkRoundTripLatency:]) }

// CapabilityMask2 returns the second capability mask.
func (p PortInfo) CapabilityMask2() uint16 {
	return binary.BigEndian.Uint16(p[piCapabilityMask2:])
}

// LinkSpeedExtActive returns the active extended link speed.
func (p PortInfo) LinkSpeedExtActive() uint8 { return p[piSpeedExtActiveSupp] >> 4 }

// LinkSpeedExtSupported returns the supported extended link speeds.
func (p PortInfo) LinkSpeedExtSupported() uint8 { return p[piSpeedExtActiveSupp] & 0x0F }

// LinkSpeedExtEnabled returns the 5-bit enabled extended link speeds.
func (p PortInfo) LinkSpeedExtEnabled() uint8 { return p[piSpeedExtEnabled] & 0x1F }

// SetMKey writes M_Key (an SMA zeroes it in a GetResp when the M_Key
// protection level hides it).
func (p PortInfo) SetMKey(key uint64) { binary.BigEndian.PutUint64(p[piMKey:], key) }

// SetLocalPortNum writes LocalPortNum.
func (p PortInfo) SetLocalPortNum(port uint8) { p[piLocalPortNum] = port }

// SetPortState writes the low 4 bits of state to PortState.
func (p PortInfo) SetPortState(state uint8) { madSetBits(&p[piSpeedState], 0x0F, state) }

// SetPortPhysicalState writes the low 4 bits of state to PortPhysicalState.
func (p PortInfo) SetPortPhysicalState(state uint8) {
	madSetBits(&p[piPhysDownDefault], 0xF0, state<<4)
}

// SetClientReregister writes the ClientReregister bit.
func (p PortInfo) SetClientReregister(v bool) {
	madSetBits(&p[piReregSubnetTimeOut], piClientReregisterBit, madBool(v, piClientReregisterBit))
}

// PortInfoFields holds the fields of PortInfo to encode. Sub-byte fields
// are masked to their widths.
type PortInfoFields struct {
	MKey                                uint64 // M_Key
	GIDPrefix                           uint64 // GidPrefix
	LID                                 uint16 // base LID
	MasterSMLID                         uint16 // master SM LID
	CapabilityMask                      uint32 // PortCap bits
	DiagCode                            uint16 // diagnostic code
	MKeyLeasePeriod                     uint16 // M_KeyLeasePeriod
	LocalPortNum                        uint8  // receiving port
	LinkWidthEnabled                    uint8  // LinkWidth bits
	LinkWidthSupported                  uint8  // LinkWidth bits
	LinkWidthActive                     uint8  // LinkWidth bit
	LinkSpeedSupported                  uint8  // 4 bits, LinkSpeed bits
	PortState                           uint8  // 4 bits
	PortPhysicalState                   uint8  // 4 bits
	LinkDownDefaultState                uint8  // 4 bits
	MKeyProtectBits                     uint8  // 2 bits
	LMC                                 uint8  // 3 bits
	LinkSpeedActive                     uint8  // 4 bits
	LinkSpeedEnabled                    uint8  // 4 bits
	NeighborMTU                         uint8  // 4 bits, IBMTU value
	MasterSMSL                          uint8  // 4 bits
	VLCap                               uint8  // 4 bits
	InitType                            uint8  // 4 bits
	VLHighLimit                         uint8  // high-priority limit
	VLArbitrationHighCap                uint8  // high-priority table entries
	VLArbitrationLowCap                 uint8  // low-priority table entries
	InitTypeReply                       uint8  // 4 bits
	MTUCap                              uint8  // 4 bits, IBMTU value
	VLStallCount                        uint8  // 3 bits
	HOQLife                             uint8  // 5 bits
	OperationalVLs                      uint8  // 4 bits
	PartitionEnforcementInbound         bool   // inbound P_Key enforcement
	PartitionEnforcementOutbound        bool   // outbound P_Key enforcement
	FilterRawInbound                    bool   // inbound raw filtering
	FilterRawOutbound                   bool   // outbound raw filtering
	MKeyViolations                      uint16 // M_Key violations
	PKeyViolations                      uint16 // P_Key violations
	QKeyViolations                      uint16 // Q_Key violations
	GUIDCap                             uint8  // GUID entries supported
	ClientReregister                    bool   // ask clients to reregister
	MulticastPKeyTrapSuppressionEnabled uint8  // 2 bits
	SubnetTimeOut                       uint8  // 5 bits
	RespTimeValue                       uint8  // 5 bits
	LocalPhyErrors                      uint8  // 4 bits
	OverrunErrors                       uint8  // 4 bits
	MaxCreditHint                       uint16 // maximum credit hint
	LinkRoundTripLatency                uint32 // 24 bits
	CapabilityMask2                     uint16 // second capability mask
	LinkSpeedExtActive                  uint8  // 4 bits
	LinkSpeedExtSupported               uint8  // 4 bits
	LinkSpeedExtEnabled                 uint8  // 5 bits
}

// Encode writes every field of f and zeroes the reserved bits (byte 34
// bits 5:3, byte 52 bits 7:5, byte 56, byte 63 bits 7:5); p must hold
// PortInfoSize bytes.
func (p PortInfo) Encode(f *PortInfoFields) {
	binary.BigEndian.PutUint64(p[piMKey:], f.MKey)
	binary.BigEndian.PutUint64(p[piGIDPrefix:], f.GIDPrefix)
	binary.BigEndian.PutUint16(p[piLID:], f.LID)
	binary.BigEndian.PutUint16(p[piMasterSMLID:], f.MasterSMLID)
	binary.BigEndian.PutUint32(p[piCapabilityMask:], f.CapabilityMask)
	binary.BigEndian.PutUint16(p[piDiagCode:], f.DiagCode)
	binary.BigEndian.PutUint16(p[piMKeyLeasePeriod:], f.MKeyLeasePeriod)
	p[piLocalPortNum] = f.LocalPortNum
	p[piLinkWidthEnabled] = f.LinkWidthEnabled
	p[piLinkWidthSupported] = f.LinkWidthSupported
	p[piLinkWidthActive] = f.LinkWidthActive
	p[piSpeedState] = f.LinkSpeedSupported<<4 | f.PortState&0x0F
	p[piPhysDownDefault] = f.PortPhysicalState<<4 | f.LinkDownDefaultState&0x0F
	p[piMKeyProtLMC] = f.MKeyProtectBits<<6 | f.LMC&0x07
	p[piSpeedActiveEnabled] = f.LinkSpeedActive<<4 | f.LinkSpeedEnabled&0x0F
	p[piNeighborMTUSMSL] = f.NeighborMTU<<4 | f.MasterSMSL&0x0F
	p[piVLCapInitType] = f.VLCap<<4 | f.InitType&0x0F
	p[piVLHighLimit] = f.VLHighLimit
	p[piVLArbHighCap] = f.VLArbitrationHighCap
	p[piVLArbLowCap] = f.VLArbitrationLowCap
	p[piInitTypeReplyMTUCap] = f.InitTypeReply<<4 | f.MTUCap&0x0F
	p[piVLStallHOQLife] = f.VLStallCount<<5 | f.HOQLife&0x1F
	p[piOperVLsEnforcement] = f.OperationalVLs<<4 |
		madBool(f.PartitionEnforcementInbound, piPartEnfInboundBit) |
		madBool(f.PartitionEnforcementOutbound, piPartEnfOutboundBit) |
		madBool(f.FilterRawInbound, piFilterRawInboundBit) |
		madBool(f.FilterRawOutbound, piFilterRawOutbound)
	binary.BigEndian.PutUint16(p[piMKeyViolations:], f.MKeyViolations)
	binary.BigEndian.PutUint16(p[piPKeyViolations:], f.PKeyViolations)
	binary.BigEndian.PutUint16(p[piQKeyViolations:], f.QKeyViolations)
	p[piGUIDCap] = f.GUIDCap
	p[piReregSubnetTimeOut] = madBool(f.ClientReregister, piClientReregisterBit) |
		f.MulticastPKeyTrapSuppressionEnabled&0x03<<5 | f.SubnetTimeOut&0x1F
	p[piRespTimeValue] = f.RespTimeValue & 0x1F
	p[piPhyOverrunErrors] = f.LocalPhyErrors<<4 | f.OverrunErrors&0x0F
	binary.BigEndian.PutUint16(p[piMaxCreditHint:], f.MaxCreditHint)
	p[piReserved56] = 0
	madPutUint24(p[piLinkRoundTripLatency:], f.LinkRoundTripLatency)
	binary.BigEndian.PutUint16(p[piCapabilityMask2:], f.CapabilityMask2)
	p[piSpeedExtActiveSupp] = f.LinkSpeedExtActive<<4 | f.LinkSpeedExtSupported&0x0F
	p[piSpeedExtEnabled] = f.LinkSpeedExtEnabled & 0x1F
}

// Fields decodes the view into a PortInfoFields.
func (p PortInfo) Fields() PortInfoFields {
	return PortInfoFields{
		MKey:                                p.MKey(),
		GIDPrefix:                           p.GIDPrefix(),
		LID:                                 p.LID(),
		MasterSMLID:                         p.MasterSMLID(),
		CapabilityMask:                      p.CapabilityMask(),
		DiagCode:                            p.DiagCode(),
		MKeyLeasePeriod:                     p.MKeyLeasePeriod(),
		LocalPortNum:                        p.LocalPortNum(),
		LinkWidthEnabled:                    p.LinkWidthEnabled(),
		LinkWidthSupported:                  p.LinkWidthSupported(),
		LinkWidthActive:                     p.LinkWidthActive(),
		LinkSpeedSupported:                  p.LinkSpeedSupported(),
		PortState:                           p.PortState(),
		PortPhysicalState:                   p.PortPhysicalState(),
		LinkDownDefaultState:                p.LinkDownDefaultState(),
		MKeyProtectBits:                     p.MKeyProtectBits(),
		LMC:                                 p.LMC(),
		LinkSpeedActive:                     p.LinkSpeedActive(),
		LinkSpeedEnabled:                    p.LinkSpeedEnabled(),
		NeighborMTU:                         p.NeighborMTU(),
		MasterSMSL:                          p.MasterSMSL(),
		VLCap:                               p.VLCap(),
		InitType:                            p.InitType(),
		VLHighLimit:                         p.VLHighLimit(),
		VLArbitrationHighCap:                p.VLArbitrationHighCap(),
		VLArbitrationLowCap:                 p.VLArbitrationLowCap(),
		InitTypeReply:                       p.InitTypeReply(),
		MTUCap:                              p.MTUCap(),
		VLStallCount:                        p.VLStallCount(),
		HOQLife:                             p.HOQLife(),
		OperationalVLs:                      p.OperationalVLs(),
		PartitionEnforcementInbound:         p.PartitionEnforcementInbound(),
		PartitionEnforcementOutbound:        p.PartitionEnforcementOutbound(),
		FilterRawInbound:                    p.FilterRawInbound(),
		FilterRawOutbound:                   p.FilterRawOutbound(),
		MKeyViolations:                      p.MKeyViolations(),
		PKeyViolations:                      p.PKeyViolations(),
		QKeyViolations:                      p.QKeyViolations(),
		GUIDCap:                             p.GUIDCap(),
		ClientReregister:                    p.ClientReregister(),
		MulticastPKeyTrapSuppressionEnabled: p.MulticastPKeyTrapSuppressionEnabled(),
		SubnetTimeOut:                       p.SubnetTimeOut(),
		RespTimeValue:                       p.RespTimeValue(),
		LocalPhyErrors:                      p.LocalPhyErrors(),
		OverrunErrors:                       p.OverrunErrors(),
		MaxCreditHint:                       p.MaxCreditHint(),
		LinkRoundTripLatency:                p.LinkRoundTripLatency(),
		CapabilityMask2:                     p.CapabilityMask2(),
		LinkSpeedExtActive:                  p.LinkSpeedExtActive(),
		LinkSpeedExtSupported:               p.LinkSpeedExtSupported(),
		LinkSpeedExtEnabled:                 p.LinkSpeedExtEnabled(),
	}
}

// ---------------------------------------------------------------------------
// LinearForwardingTable

// LinearForwardingTable (IBA 14.2.5.10, table 154), 64 bytes per block; the
// attribute modifier is the block number:
//
//	offset  bits  field
//	     i     8  Port: egress port for LID 64*block + i (i = 0..63);
//	              LFTPortDrop (0xFF) drops packets for that LID
const (
	// LinearForwardingTableSize is the size of one LFT block.
	LinearForwardingTableSize = 64
	// LFTEntriesPerBlock is the number of LIDs per LFT block.
	LFTEntriesPerBlock = 64
	// LFTPortDrop is the port entry that marks a LID invalid (dropped).
	LFTPortDrop = 0xFF
)

// LFTBlockLID returns the LID of entry i of LFT block block.
func LFTBlockLID(block uint32, i int) uint16 {
	return uint16(block*LFTEntriesPerBlock + uint32(i))
}

// LFTLIDBlock returns the LFT block (attribute modifier) and the entry
// within it that hold lid.
func LFTLIDBlock(lid uint16) (block uint32, i int) {
	return uint32(lid) / LFTEntriesPerBlock, int(lid % LFTEntriesPerBlock)
}

// LinearForwardingTable is a view of one block of the
// LinearForwardingTable attribute.
type LinearForwardingTable []byte

// ParseLinearForwardingTable checks that b holds LinearForwardingTableSize
// bytes and returns a view of them.
func ParseLinearForwardingTable(b []byte) (LinearForwardingTable, error) {
	if len(b) < LinearForwardingTableSize {
		return nil, ErrMADTruncated
	}
	return LinearForwardingTable(b[:LinearForwardingTableSize]), nil
}

// Port returns the egress port of entry i (0..63).
func (t LinearForwardingTable) Port(i int) uint8 { return t[i] }

// Ports returns the 64 port entries, aliasing the view.
func (t LinearForwardingTable) Ports() []byte { return t[:LFTEntriesPerBlock] }

// SetPort writes the egress port of entry i (0..63).
func (t LinearForwardingTable) SetPort(i int, port uint8) { t[i] = port }

// LinearForwardingTableFields holds one LFT block to encode.
type LinearForwardingTableFields struct {
	// Ports holds the egress port for each of the 64 LIDs of the block.
	Ports [LFTEntriesPerBlock]uint8
}

// Encode writes every entry of f; t must hold LinearForwardingTableSize
// bytes.
func (t LinearForwardingTable) Encode(f *LinearForwardingTableFields) { copy(t, f.Ports[:]) }

// Fields decodes the view into a LinearForwardingTableFields.
func (t LinearForwardingTable) Fields() LinearForwardingTableFields {
	var f LinearForwardingTableFields
	copy(f.Ports[:], t)
	return f
}

// ---------------------------------------------------------------------------
// MulticastForwardingTable

// MulticastForwardingTable (IBA 14.2.5.12, table 156), 64 bytes per block:
//
//	offset  bits  field
//	   2*i    16  PortMask for MLID 0xC000 + 32*block + i (i = 0..31): bit j
//	              set means forward to port 16*position + j
//
// The attribute modifier selects the block and the 16-port slice:
//
//	bits 31:28  PortMask position (ports 16*position .. 16*position+15)
//	bits 27:9   reserved
//	bits  8:0   block number
const (
	// MulticastForwardingTableSize is the size of one MFT block.
	MulticastForwardingTableSize = 64
	// MFTEntriesPerBlock is the number of MLIDs per MFT block.
	MFTEntriesPerBlock = 32
	// MFTPortsPerPosition is the number of ports in one PortMask.
	MFTPortsPerPosition = 16
	// MFTMLIDBase is the first multicast LID, entry 0 of block 0.
	MFTMLIDBase = 0xC000

	mftAMPositionShift = 28
	mftAMBlockMask     = 0x1FF
)

// MFTAttrMod builds a MulticastForwardingTable attribute modifier from the
// port-mask position (4 bits) and the block number (9 bits); excess bits
// are dropped.
func MFTAttrMod(position uint8, block uint16) uint32 {
	return uint32(position&0x0F)<<mftAMPositionShift | uint32(block)&mftAMBlockMask
}

// MFTAttrModParts splits a MulticastForwardingTable attribute modifier into
// the port-mask position and the block number, ignoring reserved bits.
func MFTAttrModParts(attrMod uint32) (position uint8, block uint16) {
	return uint8(attrMod >> mftAMPositionShift), uint16(attrMod & mftAMBlockMask)
}

// MFTBlockMLID returns the MLID of entry i of MFT block block.
func MFTBlockMLID(block uint16, i int) uint16 {
	return MFTMLIDBase + block*MFTEntriesPerBlock + uint16(i)
}

// MFTMLIDBlock returns the MFT block and entry that hold mlid; ok is false
// when mlid is below MFTMLIDBase (not multicast).
func MFTMLIDBlock(mlid uint16) (block uint16, i int, ok bool) {
	if mlid < MFTMLIDBase {
		return 0, 0, false
	}
	off := mlid - MFTMLIDBase
	return off / MFTEntriesPerBlock, int(off % MFTEntriesPerBlock), true
}

// MulticastForwardingTable is a view of one block of the
// MulticastForwardingTable attribute.
type MulticastForwardingTable []byte

// ParseMulticastForwardingTable checks that b holds
// MulticastForwardingTableSize bytes and returns a view of them.
func ParseMulticastForwardingTable(b []byte) (MulticastForwardingTable, error) {
	if len(b) < MulticastForwardingTableSize {
		return nil, ErrMADTruncated
	}
	return MulticastForwardingTable(b[:MulticastForwardingTableSize]), nil
}

// PortMask returns the 16-bit port mask of entry i (0..31).
func (t MulticastForwardingTable) PortMask(i int) uint16 {
	return binary.BigEndian.Uint16(t[2*i:])
}

// SetPortMask writes the port mask of entry i (0..31).
func (t MulticastForwardingTable) SetPortMask(i int, mask uint16) {
	binary.BigEndian.PutUint16(t[2*i:], mask)
}

// MulticastForwardingTableFields holds one MFT block to encode.
type MulticastForwardingTableFields struct {
	// PortMasks holds the port mask of each of the 32 MLIDs of the block.
	PortMasks [MFTEntriesPerBlock]uint16
}

// Encode writes every entry of f; t must hold MulticastForwardingTableSize
// bytes.
func (t MulticastForwardingTable) Encode(f *MulticastForwardingTableFields) {
	for i, m := range f.PortMasks {
		binary.BigEndian.PutUint16(t[2*i:], m)
	}
}

// Fields decodes the view into a MulticastForwardingTableFields.
func (t MulticastForwardingTable) Fields() MulticastForwardingTableFields {
	var f MulticastForwardingTableFields
	for i := range f.PortMasks {
		f.PortMasks[i] = t.PortMask(i)
	}
	return f
}

// ---------------------------------------------------------------------------
// P_KeyTable

// P_KeyTable (IBA 14.2.5.7, table 151), 64 bytes per block:
//
//	offset  bits  field
//	   2*i     1  Membership type of P_Key 32*block + i: 1 full, 0 limited
//	          15  P_Key base value
//
// The attribute modifier is (port << 16) | block; a CA ignores the port and
// answers for the receiving port, a switch uses it for external ports.
const (
	// PKeyTableSize is the size of one P_KeyTable block.
	PKeyTableSize = 64
	// PKeyTableEntriesPerBlock is the number of P_Keys per block.
	PKeyTableEntriesPerBlock = 32
	// PKeyMembershipFull is the full-membership bit of a P_Key.
	PKeyMembershipFull = 0x8000
	// PKeyBaseMask masks the 15-bit base value of a P_Key.
	PKeyBaseMask = 0x7FFF
)

// PKeyTableAttrMod builds a P_KeyTable attribute modifier.
func PKeyTableAttrMod(port, block uint16) uint32 { return uint32(port)<<16 | uint32(block) }

// PKeyTableAttrModParts splits a P_KeyTable attribute modifier into the
// port number (bits 31:16) and the block number (bits 15:0).
func PKeyTableAttrModParts(attrMod uint32) (port, block uint16) {
	return uint16(attrMod >> 16), uint16(attrMod)
}

// PKeyTable is a view of one block of the P_KeyTable attribute.
type PKeyTable []byte

// ParsePKeyTable checks that b holds PKeyTableSize bytes and returns a view
// of them.
func ParsePKeyTable(b []byte) (PKeyTable, error) {
	if len(b) < PKeyTableSize {
		return nil, ErrMADTruncated
	}
	return PKeyTable(b[:PKeyTableSize]), nil
}

// PKey returns P_Key i (0..31), membership bit included.
func (t PKeyTable) PKey(i int) uint16 { return binary.BigEndian.Uint16(t[2*i:]) }

// SetPKey writes P_Key i (0..31).
func (t PKeyTable) SetPKey(i int, key uint16) { binary.BigEndian.PutUint16(t[2*i:], key) }

// PKeyTableFields holds one P_KeyTable block to encode.
type PKeyTableFields struct {
	// PKeys holds the 32 P_Keys, membership bit included.
	PKeys [PKeyTableEntriesPerBlock]uint16
}

// Encode writes every entry of f; t must hold PKeyTableSize bytes.
func (t PKeyTable) Encode(f *PKeyTableFields) {
	for i, k := range f.PKeys {
		binary.BigEndian.PutUint16(t[2*i:], k)
	}
}

// Fields decodes the view into a PKeyTableFields.
func (t PKeyTable) Fields() PKeyTableFields {
	var f PKeyTableFields
	for i := range f.PKeys {
		f.PKeys[i] = t.PKey(i)
	}
	return f
}

// ---------------------------------------------------------------------------
// GUIDInfo

// GUIDInfo (IBA 14.2.5.5, table 149), 64 bytes per block; the attribute
// modifier is the block number:
//
//	offset  bits  field
//	   8*i    64  GUID 8*block + i (i = 0..7); GUID 0 is the port GUID
const (
	// GUIDInfoSize is the size of one GUIDInfo block.
	GUIDInfoSize = 64
	// GUIDInfoEntriesPerBlock is the number of GUIDs per block.
	GUIDInfoEntriesPerBlock = 8
)

// GUIDInfo is a view of one block of the GUIDInfo attribute.
type GUIDInfo []byte

// ParseGUIDInfo checks that b holds GUIDInfoSize bytes and returns a view of
// them.
func ParseGUIDInfo(b []byte) (GUIDInfo, error) {
	if len(b) < GUIDInfoSize {
		return nil, ErrMADTruncated
	}
	return GUIDInfo(b[:GUIDInfoSize]), nil
}

// GUID returns GUID i (0..7).
func (g GUIDInfo) GUID(i int) uint64 { return binary.BigEndian.Uint64(g[8*i:]) }

// SetGUID writes GUID i (0..7).
func (g GUIDInfo) SetGUID(i int, guid uint64) { binary.BigEndian.PutUint64(g[8*i:], guid) }

// GUIDInfoFields holds one GUIDInfo block to encode.
type GUIDInfoFields struct {
	// GUIDs holds the 8 GUIDs of the block.
	GUIDs [GUIDInfoEntriesPerBlock]uint64
}

// Encode writes every entry of f; g must hold GUIDInfoSize bytes.
func (g GUIDInfo) Encode(f *GUIDInfoFields) {
	for i, v := range f.GUIDs {
		binary.BigEndian.PutUint64(g[8*i:], v)
	}
}

// Fields decodes the view into a GUIDInfoFields.
func (g GUIDInfo) Fields() GUIDInfoFields {
	var f GUIDInfoFields
	for i := range f.GUIDs {
		f.GUIDs[i] = g.GUID(i)
	}
	return f
}

// ---------------------------------------------------------------------------
// SMInfo

// SMInfo (IBA 14.2.5.13, table 158), 21 bytes (the rest of the SMP data is
// reserved):
//
//	offset  bits  field
//	     0    64  GUID
//	     8    64  SM_Key
//	    16    32  ActCount
//	    20     4  Priority (7:4)
//	           4  SMState  (3:0)
const (
	smiGUID      = 0
	smiSMKey     = 8
	smiActCount  = 16
	smiPrioState = 20
	smiStateMask = 0x0F
	smiPrioShift = 4

	// SMInfoSize is the size of the defined part of SMInfo.
	SMInfoSize = 21
)

// SMState values (IBA 14.4.1).
const (
	SMStateNotActive   = 0 // not active
	SMStateDiscovering = 1 // discovering
	SMStateStandby     = 2 // standby
	SMStateMaster      = 3 // master
)

// SMInfo is a view of the SMInfo attribute.
type SMInfo []byte

// ParseSMInfo checks that b holds SMInfoSize bytes and returns a view of
// them.
func ParseSMInfo(b []byte) (SMInfo, error) {
	if len(b) < SMInfoSize {
		return nil, ErrMADTruncated
	}
	return SMInfo(b[:SMInfoSize]), nil
}

// GUID returns the port GUID of the SM.
func (s SMInfo) GUID() uint64 { return binary.BigEndian.Uint64(s[smiGUID:]) }

// SMKey returns SM_Key.
func (s SMInfo) SMKey() uint64 { return binary.BigEndian.Uint64(s[smiSMKey:]) }

// ActCount returns the activity counter.
func (s SMInfo) ActCount() uint32 { return binary.BigEndian.Uint32(s[smiActCount:]) }

// Priority returns the 4-bit SM priority.
func (s SMInfo) Priority() uint8 { return s[smiPrioState] >> smiPrioShift }

// SMState returns the SM state (an SMState constant).
func (s SMInfo) SMState() uint8 { return s[smiPrioState] & smiStateMask }

// SetSMKey writes SM_Key (an SM zeroes it in answers to unauthenticated
// requesters).
func (s SMInfo) SetSMKey(key uint64) { binary.BigEndian.PutUint64(s[smiSMKey:], key) }

// SetActCount writes ActCount.
func (s SMInfo) SetActCount(n uint32) { binary.BigEndian.PutUint32(s[smiActCount:], n) }

// SetSMState writes the low 4 bits of state to SMState.
func (s SMInfo) SetSMState(state uint8) { madSetBits(&s[smiPrioState], smiStateMask, state) }

// SMInfoFields holds the fields of SMInfo to encode.
type SMInfoFields struct {
	GUID     uint64 // SM port GUID
	SMKey    uint64 // SM_Key
	ActCount uint32 // activity counter
	Priority uint8  // 4 bits
	SMState  uint8  // 4 bits
}

// Encode writes every field of f; s must hold SMInfoSize bytes.
func (s SMInfo) Encode(f *SMInfoFields) {
	binary.BigEndian.PutUint64(s[smiGUID:], f.GUID)
	binary.BigEndian.PutUint64(s[smiSMKey:], f.SMKey)
	binary.BigEndian.PutUint32(s[smiActCount:], f.ActCount)
	s[smiPrioState] = f.Priority<<smiPrioShift | f.SMState&smiStateMask
}

// Fields decodes the view into an SMInfoFields.
func (s SMInfo) Fields() SMInfoFields {
	return SMInfoFields{
		GUID:     s.GUID(),
		SMKey:    s.SMKey(),
		ActCount: s.ActCount(),
		Priority: s.Priority(),
		SMState:  s.SMState(),
	}
}
