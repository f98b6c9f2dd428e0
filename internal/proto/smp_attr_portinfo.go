package proto

import (
	"encoding/binary"
)

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
