package proto

import "encoding/binary"

// Ethernet II header, optionally with one IEEE 802.1Q tag:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Destination MAC (6 octets)                 |
//	+                               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                               |                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
//	|                      Source MAC (6 octets)                    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     TPID 0x8100 (if tagged)   | PCP |D|        VLAN ID        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          EtherType            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
const (
	ethDst       = 0
	ethSrc       = 6
	ethType      = 12
	ethTagTCI    = 14
	ethTaggedTyp = 16

	// EthernetHeaderSize is the size of an untagged Ethernet II header.
	EthernetHeaderSize = 14
	// VLANTagSize is the size of one 802.1Q tag.
	VLANTagSize = 4
	// EthernetMinFrameSize is the smallest frame on the wire without FCS;
	// shorter frames are padded, so lengths above L2 come from L3 headers.
	EthernetMinFrameSize = 60
)

// EtherTypes used by HiNIC.
const (
	EtherTypeIPv4       = 0x0800
	EtherTypeARP        = 0x0806
	EtherTypeVLAN       = 0x8100
	EtherTypeIPv6       = 0x86DD
	EtherTypeMACControl = 0x8808
	EtherTypeRoCEv1     = 0x8915
	EtherTypeLLDP       = 0x88CC
)

// Ethernet is a view of an Ethernet II header. It must hold at least
// HeaderLen() bytes; ParseEthernet checks that.
type Ethernet []byte

// ParseEthernet checks that b starts with a complete Ethernet header
// (including its 802.1Q tag, if any) and returns a view of it.
func ParseEthernet(b []byte) (Ethernet, error) {
	if len(b) < EthernetHeaderSize {
		return nil, ErrTruncated
	}
	e := Ethernet(b)
	if e.HasVLAN() && len(b) < EthernetHeaderSize+VLANTagSize {
		return nil, ErrTruncated
	}
	return e[:e.HeaderLen()], nil
}

// Dst returns the destination MAC address (a view, not a copy).
func (e Ethernet) Dst() []byte { return e[ethDst : ethDst+6] }

// Src returns the source MAC address (a view, not a copy).
func (e Ethernet) Src() []byte { return e[ethSrc : ethSrc+6] }

// HasVLAN reports whether the header carries an 802.1Q tag.
func (e Ethernet) HasVLAN() bool { return binary.BigEndian.Uint16(e[ethType:]) == EtherTypeVLAN }

// HeaderLen is the header's size: 14, or 18 with a tag.
func (e Ethernet) HeaderLen() int {
	if e.HasVLAN() {
		return EthernetHeaderSize + VLANTagSize
	}
	return EthernetHeaderSize
}

// TCI returns the 802.1Q tag control information, or 0 when untagged.
func (e Ethernet) TCI() uint16 {
	if !e.HasVLAN() {
		return 0
	}
	return binary.BigEndian.Uint16(e[ethTagTCI:])
}

// PCP returns the 802.1Q priority code point (0 when untagged).
func (e Ethernet) PCP() uint8 { return uint8(e.TCI() >> 13) }

// DEI returns the 802.1Q drop-eligible indicator.
func (e Ethernet) DEI() bool { return e.TCI()&0x1000 != 0 }

// VLANID returns the 802.1Q VLAN identifier (0 when untagged).
func (e Ethernet) VLANID() uint16 { return e.TCI() & 0x0FFF }

// EtherType returns the type of the payload, after the tag if there is one.
func (e Ethernet) EtherType() uint16 {
	if e.HasVLAN() {
		return binary.BigEndian.Uint16(e[ethTaggedTyp:])
	}
	return binary.BigEndian.Uint16(e[ethType:])
}

// SetPCP rewrites the priority of a tagged header; it does nothing untagged.
func (e Ethernet) SetPCP(pcp uint8) {
	if e.HasVLAN() {
		tci := binary.BigEndian.Uint16(e[ethTagTCI:])&0x1FFF | uint16(pcp&7)<<13
		binary.BigEndian.PutUint16(e[ethTagTCI:], tci)
	}
}

// EthernetFields holds the fields of an Ethernet header to encode.
type EthernetFields struct {
	Dst, Src  [6]byte
	VLAN      bool // add an 802.1Q tag carrying PCP, DEI and VLANID
	PCP       uint8
	DEI       bool
	VLANID    uint16
	EtherType uint16
}

// Size is the number of bytes Encode writes.
func (f *EthernetFields) Size() int {
	if f.VLAN {
		return EthernetHeaderSize + VLANTagSize
	}
	return EthernetHeaderSize
}

// Encode writes every field of f; e must hold f.Size() bytes.
func (e Ethernet) Encode(f *EthernetFields) {
	copy(e[ethDst:], f.Dst[:])
	copy(e[ethSrc:], f.Src[:])
	if f.VLAN {
		binary.BigEndian.PutUint16(e[ethType:], EtherTypeVLAN)
		tci := uint16(f.PCP&7)<<13 | f.VLANID&0x0FFF
		if f.DEI {
			tci |= 0x1000
		}
		binary.BigEndian.PutUint16(e[ethTagTCI:], tci)
		binary.BigEndian.PutUint16(e[ethTaggedTyp:], f.EtherType)
		return
	}
	binary.BigEndian.PutUint16(e[ethType:], f.EtherType)
}
