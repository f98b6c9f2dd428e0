package proto

import (
	"encoding/binary"
)

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
