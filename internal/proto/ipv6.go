package proto

import "encoding/binary"

// IPv6 header (RFC 8200 section 3):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version| Traffic Class |           Flow Label                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Payload Length        |  Next Header  |   Hop Limit   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                   Source Address (16 octets)                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Destination Address (16 octets)                |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
const (
	ipv6VerTCFL    = 0
	ipv6PayLen     = 4
	ipv6NextHdr    = 6
	ipv6HopLimit   = 7
	ipv6Src        = 8
	ipv6Dst        = 24
	IPv6HeaderSize = 40 // IPv6HeaderSize is the size of the fixed IPv6 header.
)

// IPv6 is a view of the fixed IPv6 header.
type IPv6 []byte

// ParseIPv6 checks version and payload length against b and returns a view
// of the fixed header. b may extend past the packet (Ethernet padding).
// When b ends before the payload does (a capture cut short), the view is
// returned along with ErrTruncated.
func ParseIPv6(b []byte) (IPv6, error) {
	if len(b) < IPv6HeaderSize {
		return nil, ErrTruncated
	}
	h := IPv6(b[:IPv6HeaderSize])
	if h.Version() != 6 {
		return nil, ErrMalformed
	}
	if len(b) < IPv6HeaderSize+int(h.PayloadLength()) {
		return h, ErrTruncated
	}
	return h, nil
}

// Version returns the IP version (6).
func (h IPv6) Version() uint8 { return h[ipv6VerTCFL] >> 4 }

// TrafficClass returns the traffic class (DSCP<<2 | ECN).
func (h IPv6) TrafficClass() uint8 {
	return uint8(binary.BigEndian.Uint16(h[ipv6VerTCFL:]) >> 4)
}

// ECN returns the ECN codepoint of the traffic class.
func (h IPv6) ECN() uint8 { return h.TrafficClass() & 3 }

// FlowLabel returns the 20-bit flow label.
func (h IPv6) FlowLabel() uint32 { return binary.BigEndian.Uint32(h[ipv6VerTCFL:]) & 0xFFFFF }

// PayloadLength returns the length of what follows the fixed header.
func (h IPv6) PayloadLength() uint16 { return binary.BigEndian.Uint16(h[ipv6PayLen:]) }

// NextHeader returns the protocol of what follows the fixed header.
func (h IPv6) NextHeader() uint8 { return h[ipv6NextHdr] }

// HopLimit returns the hop limit.
func (h IPv6) HopLimit() uint8 { return h[ipv6HopLimit] }

// Src returns the source address (a view).
func (h IPv6) Src() []byte { return h[ipv6Src : ipv6Src+16] }

// Dst returns the destination address (a view).
func (h IPv6) Dst() []byte { return h[ipv6Dst : ipv6Dst+16] }

// SetECN rewrites the ECN codepoint; the RoCEv2 ICRC masks it.
func (h IPv6) SetECN(ecn uint8) {
	w := binary.BigEndian.Uint32(h[ipv6VerTCFL:])
	w = w&^(3<<20) | uint32(ecn&3)<<20
	binary.BigEndian.PutUint32(h[ipv6VerTCFL:], w)
}

// SetHopLimit rewrites the hop limit.
func (h IPv6) SetHopLimit(hl uint8) { h[ipv6HopLimit] = hl }

// IPv6Fields holds the fields of a fixed IPv6 header to encode.
type IPv6Fields struct {
	TrafficClass  uint8
	FlowLabel     uint32
	PayloadLength uint16
	NextHeader    uint8
	HopLimit      uint8
	Src, Dst      [16]byte
}

// Encode writes every field of f; h must hold IPv6HeaderSize bytes.
func (h IPv6) Encode(f *IPv6Fields) {
	binary.BigEndian.PutUint32(h[ipv6VerTCFL:], 6<<28|uint32(f.TrafficClass)<<20|f.FlowLabel&0xFFFFF)
	binary.BigEndian.PutUint16(h[ipv6PayLen:], f.PayloadLength)
	h[ipv6NextHdr] = f.NextHeader
	h[ipv6HopLimit] = f.HopLimit
	copy(h[ipv6Src:], f.Src[:])
	copy(h[ipv6Dst:], f.Dst[:])
}
