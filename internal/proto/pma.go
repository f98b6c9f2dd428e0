package proto

import (
	"encoding/binary"
	"math"
)

// Performance management MADs (IBA Vol 1 section 16.1), class
// MgmtClassPerfMgt, answered by the performance management agent (PMA) of
// every port:
//
//	offset  size  field
//	     0    24  common MAD header (IBA 13.4.2)
//	    24    40  Reserved
//	    64   192  PerformanceManagement data (the attribute)
const (
	pmaReserved = MADHeaderSize
	pmaData     = 64

	// PerfMgtDataOffset is where the attribute of a PerfMgt MAD starts.
	PerfMgtDataOffset = pmaData
	// PerfMgtDataSize is the size of the attribute area of a PerfMgt MAD.
	PerfMgtDataSize = MADSize - pmaData
	// PerfMgtClassVersion is the ClassVersion of the PerfMgt class.
	PerfMgtClassVersion = 1
)

// PerfMgt attribute IDs (IBA 16.1.2, table 240).
const (
	// PMAAttrClassPortInfo is ClassPortInfo (IBA 13.4.8.1).
	PMAAttrClassPortInfo = 0x0001
	// PMAAttrPortSamplesControl is PortSamplesControl (16.1.3.2).
	PMAAttrPortSamplesControl = 0x0010
	// PMAAttrPortSamplesResult is PortSamplesResult (16.1.3.4).
	PMAAttrPortSamplesResult = 0x0011
	// PMAAttrPortCounters is PortCounters (16.1.3.5).
	PMAAttrPortCounters = 0x0012
	// PMAAttrPortCountersExtended is PortCountersExtended (16.1.4.11).
	PMAAttrPortCountersExtended = 0x001D
)

// PMA ClassPortInfo CapabilityMask bits (IBA 16.1.2, table 241).
const (
	PMACapAllPortSelect        = 0x0100 // PortSelect 0xFF supported
	PMACapExtendedWidth        = 0x0200 // PortCountersExtended, all counters
	PMACapExtendedWidthNoIETF  = 0x0400 // PortCountersExtended without IETF ones
	PMACapPortCountersXmitWait = 0x1000 // PortCounters.PortXmitWait supported
	PMACapIsQP1DropSupported   = 0x8000 // PortCounters.QP1Dropped supported (bit as infiniband-diags defines it)
)

// PMAPortSelectAll is the PortSelect value that addresses every port of a
// switch at once (when the PMA has PMACapAllPortSelect).
const PMAPortSelectAll = 0xFF

// PerfMgtMAD is a view of a performance management MAD. Obtain one with
// ParsePerfMgtMAD.
type PerfMgtMAD []byte

// ParsePerfMgtMAD checks that b is one MAD of class MgmtClassPerfMgt and
// returns a view of it; it returns ErrMADTruncated or ErrMADTooLong for a
// wrong length and ErrMADClass for another class.
func ParsePerfMgtMAD(b []byte) (PerfMgtMAD, error) {
	m, err := ParseMAD(b)
	if err != nil {
		return nil, err
	}
	if m[madMgmtClass] != MgmtClassPerfMgt {
		return nil, ErrMADClass
	}
	return PerfMgtMAD(m), nil
}

// MAD returns the view as a plain MAD, for the header accessors and setters.
func (p PerfMgtMAD) MAD() MAD { return MAD(p) }

// Method returns the whole Method byte, R bit included.
func (p PerfMgtMAD) Method() uint8 { return p[madMethod] }

// ClassVersion returns the class version (1).
func (p PerfMgtMAD) ClassVersion() uint8 { return p[madClassVersion] }

// Status returns the status.
func (p PerfMgtMAD) Status() uint16 { return MAD(p).Status() }

// TransactionID returns the transaction ID.
func (p PerfMgtMAD) TransactionID() uint64 { return MAD(p).TransactionID() }

// AttributeID returns the attribute ID (a PMAAttr constant).
func (p PerfMgtMAD) AttributeID() uint16 { return MAD(p).AttributeID() }

// AttributeModifier returns the attribute modifier.
func (p PerfMgtMAD) AttributeModifier() uint32 { return MAD(p).AttributeModifier() }

// Data returns the 192-byte attribute area.
func (p PerfMgtMAD) Data() []byte { return p[pmaData:MADSize] }

// MakeResponse turns a request into its response in place (see
// MAD.MakeResponse): a Get or a Set becomes a GetResp with the given
// status. It reports false for a method that takes no response.
func (p PerfMgtMAD) MakeResponse(status uint16) bool { return MAD(p).MakeResponse(status) }

// Encode writes the header fields of f and zeroes the reserved bytes 18..19
// and 24..63; the attribute area is not touched. p must hold MADSize bytes.
func (p PerfMgtMAD) Encode(f *MADFields) {
	MAD(p).Encode(f)
	clear(p[pmaReserved:pmaData])
}

// Fields decodes the header into a MADFields.
func (p PerfMgtMAD) Fields() MADFields { return MAD(p).Fields() }

// ---------------------------------------------------------------------------
// PortCounters

// PortCounters (IBA 16.1.3.5, table 247), 44 bytes of the PerfMgt data:
//
//	offset  bits  field
//	     0     8  Reserved
//	     1     8  PortSelect
//	     2    16  CounterSelect
//	     4    16  SymbolErrorCounter
//	     6     8  LinkErrorRecoveryCounter
//	     7     8  LinkDownedCounter
//	     8    16  PortRcvErrors
//	    10    16  PortRcvRemotePhysicalErrors
//	    12    16  PortRcvSwitchRelayErrors
//	    14    16  PortXmitDiscards
//	    16     8  PortXmitConstraintErrors
//	    17     8  PortRcvConstraintErrors
//	    18     8  CounterSelect2
//	    19     4  LocalLinkIntegrityErrors     (7:4)
//	           4  ExcessiveBufferOverrunErrors (3:0)
//	    20    16  QP1Dropped
//	    22    16  VL15Dropped
//	    24    32  PortXmitData (in units of 4 octets)
//	    28    32  PortRcvData  (in units of 4 octets)
//	    32    32  PortXmitPkts
//	    36    32  PortRcvPkts
//	    40    32  PortXmitWait
//
// Every counter stops at its maximum instead of wrapping (use the
// PMACounterAdd helpers). A Set clears the counters selected by
// CounterSelect (PortCountersSelect bits) and CounterSelect2.
const (
	pcReserved                     = 0
	pcPortSelect                   = 1
	pcCounterSelect                = 2
	pcSymbolErrorCounter           = 4
	pcLinkErrorRecoveryCounter     = 6
	pcLinkDownedCounter            = 7
	pcPortRcvErrors                = 8
	pcPortRcvRemotePhysicalErrors  = 10
	pcPortRcvSwitchRelayErrors     = 12
	pcPortXmitDiscards             = 14
	pcPortXmitConstraintErrors     = 16
	pcPortRcvConstraintErrors      = 17
	pcCounterSelect2               = 18
	pcLinkIntegrityBufferOverrun   = 19
	pcQP1Dropped                   = 20
	pcVL15Dropped                  = 22
	pcPortXmitData                 = 24
	pcPortRcvData                  = 28
	pcPortXmitPkts                 = 32
	pcPortRcvPkts                  = 36
	pcPortXmitWait                 = 40
	pcLocalLinkIntegrityErrorShift = 4
	pcNibbleMask                   = 0x0F

	// PortCountersSize is the size of the defined part of PortCounters.
	PortCountersSize = 44
)

// CounterSelect bits of PortCounters (IBA 16.1.3.5): in a Set, each selects
// a counter to clear.
const (
	PortCountersSelectSymbolError                 = 1 << 0  // SymbolErrorCounter
	PortCountersSelectLinkErrorRecovery           = 1 << 1  // LinkErrorRecoveryCounter
	PortCountersSelectLinkDowned                  = 1 << 2  // LinkDownedCounter
	PortCountersSelectPortRcvErrors               = 1 << 3  // PortRcvErrors
	PortCountersSelectPortRcvRemotePhysicalErrors = 1 << 4  // PortRcvRemotePhysicalErrors
	PortCountersSelectPortRcvSwitchRelayErrors    = 1 << 5  // PortRcvSwitchRelayErrors
	PortCountersSelectPortXmitDiscards            = 1 << 6  // PortXmitDiscards
	PortCountersSelectPortXmitConstraintErrors    = 1 << 7  // PortXmitConstraintErrors
	PortCountersSelectPortRcvConstraintErrors     = 1 << 8  // PortRcvConstraintErrors
	PortCountersSelectLocalLinkIntegrityErrors    = 1 << 9  // LocalLinkIntegrityErrors
	PortCountersSelectExcessiveBufferOverrun      = 1 << 10 // ExcessiveBufferOverrunErrors
	PortCountersSelectVL15Dropped                 = 1 << 11 // VL15Dropped
	PortCountersSelectPortXmitData                = 1 << 12 // PortXmitData
	PortCountersSelectPortRcvData                 = 1 << 13 // PortRcvData
	PortCountersSelectPortXmitPkts                = 1 << 14 // PortXmitPkts
	PortCountersSelectPortRcvPkts                 = 1 << 15 // PortRcvPkts
)

// PMACounterAdd32 adds n to a 32-bit counter, stopping at math.MaxUint32.
func PMACounterAdd32(c uint32, n uint64) uint32 {
	if s := uint64(c) + n; s >= uint64(c) && s <= math.MaxUint32 {
		return uint32(s)
	}
	return math.MaxUint32
}

// PMACounterAdd16 adds n to a 16-bit counter, stopping at math.MaxUint16.
func PMACounterAdd16(c uint16, n uint64) uint16 {
	if n < math.MaxUint16-uint64(c) {
		return c + uint16(n)
	}
	return math.MaxUint16
}

// PMACounterAdd8 adds n to an 8-bit counter, stopping at math.MaxUint8.
func PMACounterAdd8(c uint8, n uint64) uint8 {
	if n < math.MaxUint8-uint64(c) {
		return c + uint8(n)
	}
	return math.MaxUint8
}

// PMACounterAdd4 adds n to a 4-bit counter (LocalLinkIntegrityErrors,
// ExcessiveBufferOverrunErrors), stopping at 15; a c above 15 counts as
// already saturated.
func PMACounterAdd4(c uint8, n uint64) uint8 {
	if c < 0x0F && n < 0x0F-uint64(c) {
		return c + uint8(n)
	}
	return 0x0F
}

// PortCounters is a view of the PortCounters attribute.
type PortCounters []byte

// ParsePortCounters checks that b holds PortCountersSize bytes and returns a
// view of them.
func ParsePortCounters(b []byte) (PortCounters, error) {
	if len(b) < PortCountersSize {
		return nil, ErrMADTruncated
	}
	return PortCounters(b[:PortCountersSize]), nil
}

// PortSelect returns the port the counters are for (PMAPortSelectAll for
// all ports).
func (c PortCounters) PortSelect() uint8 { return c[pcPortSelect] }

// CounterSelect returns the CounterSelect mask (PortCountersSelect bits).
func (c PortCounters) CounterSelect() uint16 {
	return binary.BigEndian.Uint16(c[pcCounterSelect:])
}

// SymbolErrorCounter returns SymbolErrorCounter.
func (c PortCounters) SymbolErrorCounter() uint16 {
	return binary.BigEndian.Uint16(c[pcSymbolErrorCounter:])
}

// LinkErrorRecoveryCounter returns LinkErrorRecoveryCounter.
func (c PortCounters) LinkErrorRecoveryCounter() uint8 { return c[pcLinkErrorRecoveryCounter] }

// LinkDownedCounter returns LinkDownedCounter.
func (c PortCounters) LinkDownedCounter() uint8 { return c[pcLinkDownedCounter] }

// PortRcvErrors returns PortRcvErrors.
func (c PortCounters) PortRcvErrors() uint16 {
	return binary.BigEndian.Uint16(c[pcPortRcvErrors:])
}

// PortRcvRemotePhysicalErrors returns PortRcvRemotePhysicalErrors.
func (c PortCounters) PortRcvRemotePhysicalErrors() uint16 {
	return binary.BigEndian.Uint16(c[pcPortRcvRemotePhysicalErrors:])
}

// PortRcvSwitchRelayErrors returns PortRcvSwitchRelayErrors.
func (c PortCounters) PortRcvSwitchRelayErrors() uint16 {
	return binary.BigEndian.Uint16(c[pcPortRcvSwitchRelayErrors:])
}

// PortXmitDiscards returns PortXmitDiscards.
func (c PortCounters) PortXmitDiscards() uint16 {
	return binary.BigEndian.Uint16(c[pcPortXmitDiscards:])
}

// PortXmitConstraintErrors returns PortXmitConstraintErrors.
func (c PortCounters) PortXmitConstraintErrors() uint8 { return c[pcPortXmitConstraintErrors] }

// PortRcvConstraintErrors returns PortRcvConstraintErrors.
func (c PortCounters) PortRcvConstraintErrors() uint8 { return c[pcPortRcvConstraintErrors] }

// CounterSelect2 returns CounterSelect2.
func (c PortCounters) CounterSelect2() uint8 { return c[pcCounterSelect2] }

// LocalLinkIntegrityErrors returns the 4-bit LocalLinkIntegrityErrors.
func (c PortCounters) LocalLinkIntegrityErrors() uint8 {
	return c[pcLinkIntegrityBufferOverrun] >> pcLocalLinkIntegrityErrorShift
}

// ExcessiveBufferOverrunErrors returns the 4-bit
// ExcessiveBufferOverrunErrors.
func (c PortCounters) ExcessiveBufferOverrunErrors() uint8 {
	return c[pcLinkIntegrityBufferOverrun] & pcNibbleMask
}

// QP1Dropped returns QP1Dropped.
func (c PortCounters) QP1Dropped() uint16 { return binary.BigEndian.Uint16(c[pcQP1Dropped:]) }

// VL15Dropped returns VL15Dropped.
func (c PortCounters) VL15Dropped() uint16 { return binary.BigEndian.Uint16(c[pcVL15Dropped:]) }

// PortXmitData returns PortXmitData, in units of 4 octets.
func (c PortCounters) PortXmitData() uint32 {
	return binary.BigEndian.Uint32(c[pcPortXmitData:])
}

// PortRcvData returns PortRcvData, in units of 4 octets.
func (c PortCounters) PortRcvData() uint32 { return binary.BigEndian.Uint32(c[pcPortRcvData:]) }

// PortXmitPkts returns PortXmitPkts.
func (c PortCounters) PortXmitPkts() uint32 {
	return binary.BigEndian.Uint32(c[pcPortXmitPkts:])
}

// PortRcvPkts returns PortRcvPkts.
func (c PortCounters) PortRcvPkts() uint32 { return binary.BigEndian.Uint32(c[pcPortRcvPkts:]) }

// PortXmitWait returns PortXmitWait.
func (c PortCounters) PortXmitWait() uint32 {
	return binary.BigEndian.Uint32(c[pcPortXmitWait:])
}

// PortCountersFields holds the fields of PortCounters to encode.
type PortCountersFields struct {
	PortSelect                   uint8  // port, or PMAPortSelectAll
	CounterSelect                uint16 // PortCountersSelect bits
	SymbolErrorCounter           uint16 // symbol errors
	LinkErrorRecoveryCounter     uint8  // link error recoveries
	LinkDownedCounter            uint8  // link downs
	PortRcvErrors                uint16 // receive errors
	PortRcvRemotePhysicalErrors  uint16 // EBP-marked packets received
	PortRcvSwitchRelayErrors     uint16 // switch relay failures
	PortXmitDiscards             uint16 // transmit discards
	PortXmitConstraintErrors     uint8  // outbound filter drops
	PortRcvConstraintErrors      uint8  // inbound filter drops
	CounterSelect2               uint8  // second select mask
	LocalLinkIntegrityErrors     uint8  // 4 bits
	ExcessiveBufferOverrunErrors uint8  // 4 bits
	QP1Dropped                   uint16 // QP1 MADs dropped
	VL15Dropped                  uint16 // VL15 packets dropped
	PortXmitData                 uint32 // 4-octet words sent
	PortRcvData                  uint32 // 4-octet words received
	PortXmitPkts                 uint32 // packets sent
	PortRcvPkts                  uint32 // packets received
	PortXmitWait                 uint32 // ticks with data but no credits
}

// Encode writes every field of f and zeroes the reserved byte 0; c must
// hold PortCountersSize bytes.
func (c PortCounters) Encode(f *PortCountersFields) {
	c[pcReserved] = 0
	c[pcPortSelect] = f.PortSelect
	binary.BigEndian.PutUint16(c[pcCounterSelect:], f.CounterSelect)
	binary.BigEndian.PutUint16(c[pcSymbolErrorCounter:], f.SymbolErrorCounter)
	c[pcLinkErrorRecoveryCounter] = f.LinkErrorRecoveryCounter
	c[pcLinkDownedCounter] = f.LinkDownedCounter
	binary.BigEndian.PutUint16(c[pcPortRcvErrors:], f.PortRcvErrors)
	binary.BigEndian.PutUint16(c[pcPortRcvRemotePhysicalErrors:], f.PortRcvRemotePhysicalErrors)
	binary.BigEndian.PutUint16(c[pcPortRcvSwitchRelayErrors:], f.PortRcvSwitchRelayErrors)
	binary.BigEndian.PutUint16(c[pcPortXmitDiscards:], f.PortXmitDiscards)
	c[pcPortXmitConstraintErrors] = f.PortXmitConstraintErrors
	c[pcPortRcvConstraintErrors] = f.PortRcvConstraintErrors
	c[pcCounterSelect2] = f.CounterSelect2
	c[pcLinkIntegrityBufferOverrun] = f.LocalLinkIntegrityErrors<<pcLocalLinkIntegrityErrorShift |
		f.ExcessiveBufferOverrunErrors&pcNibbleMask
	binary.BigEndian.PutUint16(c[pcQP1Dropped:], f.QP1Dropped)
	binary.BigEndian.PutUint16(c[pcVL15Dropped:], f.VL15Dropped)
	binary.BigEndian.PutUint32(c[pcPortXmitData:], f.PortXmitData)
	binary.BigEndian.PutUint32(c[pcPortRcvData:], f.PortRcvData)
	binary.BigEndian.PutUint32(c[pcPortXmitPkts:], f.PortXmitPkts)
	binary.BigEndian.PutUint32(c[pcPortRcvPkts:], f.PortRcvPkts)
	binary.BigEndian.PutUint32(c[pcPortXmitWait:], f.PortXmitWait)
}

// Fields decodes the view into a PortCountersFields.
func (c PortCounters) Fields() PortCountersFields {
	return PortCountersFields{
		PortSelect:                   c.PortSelect(),
		CounterSelect:                c.CounterSelect(),
		SymbolErrorCounter:           c.SymbolErrorCounter(),
		LinkErrorRecoveryCounter:     c.LinkErrorRecoveryCounter(),
		LinkDownedCounter:            c.LinkDownedCounter(),
		PortRcvErrors:                c.PortRcvErrors(),
		PortRcvRemotePhysicalErrors:  c.PortRcvRemotePhysicalErrors(),
		PortRcvSwitchRelayErrors:     c.PortRcvSwitchRelayErrors(),
		PortXmitDiscards:             c.PortXmitDiscards(),
		PortXmitConstraintErrors:     c.PortXmitConstraintErrors(),
		PortRcvConstraintErrors:      c.PortRcvConstraintErrors(),
		CounterSelect2:               c.CounterSelect2(),
		LocalLinkIntegrityErrors:     c.LocalLinkIntegrityErrors(),
		ExcessiveBufferOverrunErrors: c.ExcessiveBufferOverrunErrors(),
		QP1Dropped:                   c.QP1Dropped(),
		VL15Dropped:                  c.VL15Dropped(),
		PortXmitData:                 c.PortXmitData(),
		PortRcvData:                  c.PortRcvData(),
		PortXmitPkts:                 c.PortXmitPkts(),
		PortRcvPkts:                  c.PortRcvPkts(),
		PortXmitWait:                 c.PortXmitWait(),
	}
}

// ---------------------------------------------------------------------------
// ClassPortInfo

// ClassPortInfo (IBA 13.4.8.1, table 114), 72 bytes, common to the GSI
// classes (PerfMgt, SA, CM, ...):
//
//	offset  bits  field
//	     0     8  BaseVersion
//	     1     8  ClassVersion
//	     2    16  CapabilityMask
//	     4    27  CapabilityMask2 (31:5)
//	           5  RespTimeValue   (4:0)
//	     8   128  RedirectGID
//	    24     8  RedirectTC (31:24)  4 RedirectSL (23:20)  20 RedirectFL (19:0)
//	    28    16  RedirectLID
//	    30    16  RedirectP_Key
//	    32     8  Reserved   (31:24)  24 RedirectQP (23:0)
//	    36    32  RedirectQ_Key
//	    40   128  TrapGID
//	    56     8  TrapTC     (31:24)  4 TrapSL (23:20)  20 TrapFL (19:0)
//	    60    16  TrapLID
//	    62    16  TrapP_Key
//	    64     8  TrapHL     (31:24)  24 TrapQP (23:0)
//	    68    32  TrapQ_Key
const (
	cpiBaseVersion    = 0
	cpiClassVersion   = 1
	cpiCapabilityMask = 2
	cpiCapMask2Resp   = 4
	cpiRedirectGID    = 8
	cpiRedirectTCSLFL = 24
	cpiRedirectLID    = 28
	cpiRedirectPKey   = 30
	cpiRedirectQP     = 32
	cpiRedirectQKey   = 36
	cpiTrapGID        = 40
	cpiTrapTCSLFL     = 56
	cpiTrapLID        = 60
	cpiTrapPKey       = 62
	cpiTrapHLQP       = 64
	cpiTrapQKey       = 68
	cpiGIDSize        = 16
	cpiRespTimeMask   = 0x1F
	cpiCapMask2Shift  = 5
	cpiFLMask         = 0xFFFFF
	cpiQPMask         = 0xFFFFFF

	// ClassPortInfoSize is the size of ClassPortInfo.
	ClassPortInfoSize = 72
)

// ClassPortInfo is a view of the ClassPortInfo attribute.
type ClassPortInfo []byte

// ParseClassPortInfo checks that b holds ClassPortInfoSize bytes and
// returns a view of them.
func ParseClassPortInfo(b []byte) (ClassPortInfo, error) {
	if len(b) < ClassPortInfoSize {
		return nil, ErrMADTruncated
	}
	return ClassPortInfo(b[:ClassPortInfoSize]), nil
}

// BaseVersion returns the MAD base version supported.
func (c ClassPortInfo) BaseVersion() uint8 { return c[cpiBaseVersion] }

// ClassVersion returns the class version supported.
func (c ClassPortInfo) ClassVersion() uint8 { return c[cpiClassVersion] }

// CapabilityMask returns the class capability mask (for the PMA, PMACap
// bits).
func (c ClassPortInfo) CapabilityMask() uint16 {
	return binary.BigEndian.Uint16(c[cpiCapabilityMask:])
}

// CapabilityMask2 returns the 27-bit CapabilityMask2.
func (c ClassPortInfo) CapabilityMask2() uint32 {
	return binary.BigEndian.Uint32(c[cpiCapMask2Resp:]) >> cpiCapMask2Shift
}

// RespTimeValue returns the 5-bit response time exponent.
func (c ClassPortInfo) RespTimeValue() uint8 { return c[cpiCapMask2Resp+3] & cpiRespTimeMask }

// RedirectGID returns the 16-byte redirect GID, aliasing the view.
func (c ClassPortInfo) RedirectGID() []byte {
	return c[cpiRedirectGID : cpiRedirectGID+cpiGIDSize]
}

// RedirectTC returns the redirect traffic class.
func (c ClassPortInfo) RedirectTC() uint8 { return c[cpiRedirectTCSLFL] }

// RedirectSL returns the 4-bit redirect service level.
func (c ClassPortInfo) RedirectSL() uint8 { return c[cpiRedirectTCSLFL+1] >> 4 }

// RedirectFL returns the 20-bit redirect flow label.
func (c ClassPortInfo) RedirectFL() uint32 {
	return binary.BigEndian.Uint32(c[cpiRedirectTCSLFL:]) & cpiFLMask
}

// RedirectLID returns the redirect LID (0: no redirection).
func (c ClassPortInfo) RedirectLID() uint16 {
	return binary.BigEndian.Uint16(c[cpiRedirectLID:])
}

// RedirectPKey returns RedirectP_Key.
func (c ClassPortInfo) RedirectPKey() uint16 {
	return binary.BigEndian.Uint16(c[cpiRedirectPKey:])
}

// RedirectQP returns the 24-bit redirect QP.
func (c ClassPortInfo) RedirectQP() uint32 {
	return binary.BigEndian.Uint32(c[cpiRedirectQP:]) & cpiQPMask
}

// RedirectQKey returns RedirectQ_Key.
func (c ClassPortInfo) RedirectQKey() uint32 {
	return binary.BigEndian.Uint32(c[cpiRedirectQKey:])
}

// TrapGID returns the 16-byte trap GID, aliasing the view.
func (c ClassPortInfo) TrapGID() []byte { return c[cpiTrapGID : cpiTrapGID+cpiGIDSize] }

// TrapTC returns the trap traffic class.
func (c ClassPortInfo) TrapTC() uint8 { return c[cpiTrapTCSLFL] }

// TrapSL returns the 4-bit trap service level.
func (c ClassPortInfo) TrapSL() uint8 { return c[cpiTrapTCSLFL+1] >> 4 }

// TrapFL returns the 20-bit trap flow label.
func (c ClassPortInfo) TrapFL() uint32 {
	return binary.BigEndian.Uint32(c[cpiTrapTCSLFL:]) & cpiFLMask
}

// TrapLID returns the LID traps are sent to.
func (c ClassPortInfo) TrapLID() uint16 { return binary.BigEndian.Uint16(c[cpiTrapLID:]) }

// TrapPKey returns TrapP_Key.
func (c ClassPortInfo) TrapPKey() uint16 { return binary.BigEndian.Uint16(c[cpiTrapPKey:]) }

// TrapHL returns the trap hop limit.
func (c ClassPortInfo) TrapHL() uint8 { return c[cpiTrapHLQP] }

// TrapQP returns the 24-bit QP traps are sent to.
func (c ClassPortInfo) TrapQP() uint32 {
	return binary.BigEndian.Uint32(c[cpiTrapHLQP:]) & cpiQPMask
}

// TrapQKey returns TrapQ_Key.
func (c ClassPortInfo) TrapQKey() uint32 { return binary.BigEndian.Uint32(c[cpiTrapQKey:]) }

// ClassPortInfoFields holds the fields of ClassPortInfo to encode. Sub-word
// fields are masked to their widths.
type ClassPortInfoFields struct {
	BaseVersion     uint8    // MAD base version supported
	ClassVersion    uint8    // class version supported
	CapabilityMask  uint16   // class capability bits
	CapabilityMask2 uint32   // 27 bits
	RespTimeValue   uint8    // 5 bits
	RedirectGID     [16]byte // redirect GID
	RedirectTC      uint8    // redirect traffic class
	RedirectSL      uint8    // 4 bits
	RedirectFL      uint32   // 20 bits
	RedirectLID     uint16   // redirect LID
	RedirectPKey    uint16   // RedirectP_Key
	RedirectQP      uint32   // 24 bits
	RedirectQKey    uint32   // RedirectQ_Key
	TrapGID         [16]byte // trap GID
	TrapTC          uint8    // trap traffic class
	TrapSL          uint8    // 4 bits
	TrapFL          uint32   // 20 bits
	TrapLID         uint16   // trap LID
	TrapPKey        uint16   // TrapP_Key
	TrapHL          uint8    // trap hop limit
	TrapQP          uint32   // 24 bits
	TrapQKey        uint32   // TrapQ_Key
}

// Encode writes every field of f and zeroes the reserved byte 32; c must
// hold ClassPortInfoSize bytes.
func (c ClassPortInfo) Encode(f *ClassPortInfoFields) {
	c[cpiBaseVersion] = f.BaseVersion
	c[cpiClassVersion] = f.ClassVersion
	binary.BigEndian.PutUint16(c[cpiCapabilityMask:], f.CapabilityMask)
	binary.BigEndian.PutUint32(c[cpiCapMask2Resp:],
		f.CapabilityMask2<<cpiCapMask2Shift|uint32(f.RespTimeValue&cpiRespTimeMask))
	copy(c[cpiRedirectGID:], f.RedirectGID[:])
	binary.BigEndian.PutUint32(c[cpiRedirectTCSLFL:], cpiTCSLFL(f.RedirectTC, f.RedirectSL, f.RedirectFL))
	binary.BigEndian.PutUint16(c[cpiRedirectLID:], f.RedirectLID)
	binary.BigEndian.PutUint16(c[cpiRedirectPKey:], f.RedirectPKey)
	binary.BigEndian.PutUint32(c[cpiRedirectQP:], f.RedirectQP&cpiQPMask)
	binary.BigEndian.PutUint32(c[cpiRedirectQKey:], f.RedirectQKey)
	copy(c[cpiTrapGID:], f.TrapGID[:])
	binary.BigEndian.PutUint32(c[cpiTrapTCSLFL:], cpiTCSLFL(f.TrapTC, f.TrapSL, f.TrapFL))
	binary.BigEndian.PutUint16(c[cpiTrapLID:], f.TrapLID)
	binary.BigEndian.PutUint16(c[cpiTrapPKey:], f.TrapPKey)
	binary.BigEndian.PutUint32(c[cpiTrapHLQP:], uint32(f.TrapHL)<<24|f.TrapQP&cpiQPMask)
	binary.BigEndian.PutUint32(c[cpiTrapQKey:], f.TrapQKey)
}

// cpiTCSLFL packs TC (8 bits), SL (4 bits) and FL (20 bits) into one word.
func cpiTCSLFL(tc, sl uint8, fl uint32) uint32 {
	return uint32(tc)<<24 | uint32(sl&0x0F)<<20 | fl&cpiFLMask
}

// Fields decodes the view into a ClassPortInfoFields.
func (c ClassPortInfo) Fields() ClassPortInfoFields {
	f := ClassPortInfoFields{
		BaseVersion:     c.BaseVersion(),
		ClassVersion:    c.ClassVersion(),
		CapabilityMask:  c.CapabilityMask(),
		CapabilityMask2: c.CapabilityMask2(),
		RespTimeValue:   c.RespTimeValue(),
		RedirectTC:      c.RedirectTC(),
		RedirectSL:      c.RedirectSL(),
		RedirectFL:      c.RedirectFL(),
		RedirectLID:     c.RedirectLID(),
		RedirectPKey:    c.RedirectPKey(),
		RedirectQP:      c.RedirectQP(),
		RedirectQKey:    c.RedirectQKey(),
		TrapTC:          c.TrapTC(),
		TrapSL:          c.TrapSL(),
		TrapFL:          c.TrapFL(),
		TrapLID:         c.TrapLID(),
		TrapPKey:        c.TrapPKey(),
		TrapHL:          c.TrapHL(),
		TrapQP:          c.TrapQP(),
		TrapQKey:        c.TrapQKey(),
	}
	copy(f.RedirectGID[:], c.RedirectGID())
	copy(f.TrapGID[:], c.TrapGID())
	return f
}
