package proto

import "encoding/binary"

// IPv4 header (RFC 791 section 3.1):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version|  IHL  |    DSCP   |ECN|          Total Length         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Identification        |Flags|      Fragment Offset    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Time to Live |    Protocol   |         Header Checksum       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       Source Address                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Destination Address                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
const (
	ipv4VerIHL   = 0
	ipv4TOS      = 1
	ipv4TotalLen = 2
	ipv4ID       = 4
	ipv4FlagsOff = 6
	ipv4TTL      = 8
	ipv4Protocol = 9
	ipv4Checksum = 10
	ipv4Src      = 12
	ipv4Dst      = 16

	// IPv4MinHeaderSize is the size of an IPv4 header without options.
	IPv4MinHeaderSize = 20
	// IPProtocolUDP is the IP protocol number of UDP.
	IPProtocolUDP = 17
)

// ECN codepoints (RFC 3168 section 5), the low two bits of the IPv4 TOS
// byte and of the IPv6 Traffic Class.
const (
	ECNNotECT = 0b00
	ECNECT1   = 0b01
	ECNECT0   = 0b10
	ECNCE     = 0b11
)

// IPv4 is a view of an IPv4 header including its options.
type IPv4 []byte

// ParseIPv4 checks version, header length and total length against b and
// returns a view of the header. b may extend past the IP packet (Ethernet
// padding); TotalLength bounds the packet. When the header is complete but b
// ends before TotalLength (a capture cut short), the view is returned along
// with ErrTruncated.
func ParseIPv4(b []byte) (IPv4, error) {
	if len(b) < IPv4MinHeaderSize {
		return nil, ErrTruncated
	}
	h := IPv4(b)
	if h.Version() != 4 {
		return nil, ErrMalformed
	}
	hl := h.HeaderLen()
	if hl < IPv4MinHeaderSize {
		return nil, ErrMalformed
	}
	if len(b) < hl {
		return nil, ErrTruncated
	}
	tl := int(h.TotalLength())
	if tl < hl {
		return nil, ErrMalformed
	}
	if len(b) < tl {
		return h[:hl], ErrTruncated
	}
	return h[:hl], nil
}

// Version returns the IP version (4).
func (h IPv4) Version() uint8 { return h[ipv4VerIHL] >> 4 }

// HeaderLen returns IHL in bytes.
func (h IPv4) HeaderLen() int { return int(h[ipv4VerIHL]&0x0F) * 4 }

// TOS returns the whole type-of-service byte (DSCP and ECN).
func (h IPv4) TOS() uint8 { return h[ipv4TOS] }

// DSCP returns the differentiated services codepoint.
func (h IPv4) DSCP() uint8 { return h[ipv4TOS] >> 2 }

// ECN returns the ECN codepoint.
func (h IPv4) ECN() uint8 { return h[ipv4TOS] & 3 }

// TotalLength returns the length of the IP packet, header included.
func (h IPv4) TotalLength() uint16 { return binary.BigEndian.Uint16(h[ipv4TotalLen:]) }

// ID returns the identification field.
func (h IPv4) ID() uint16 { return binary.BigEndian.Uint16(h[ipv4ID:]) }

// Flags returns the three flag bits (reserved, DF, MF).
func (h IPv4) Flags() uint8 { return h[ipv4FlagsOff] >> 5 }

// FragmentOffset returns the fragment offset in 8-byte units.
func (h IPv4) FragmentOffset() uint16 {
	return binary.BigEndian.Uint16(h[ipv4FlagsOff:]) & 0x1FFF
}

// TTL returns the time to live.
func (h IPv4) TTL() uint8 { return h[ipv4TTL] }

// Protocol returns the payload's IP protocol number.
func (h IPv4) Protocol() uint8 { return h[ipv4Protocol] }

// Checksum returns the header checksum as stored.
func (h IPv4) Checksum() uint16 { return binary.BigEndian.Uint16(h[ipv4Checksum:]) }

// Src returns the source address (a view).
func (h IPv4) Src() []byte { return h[ipv4Src : ipv4Src+4] }

// Dst returns the destination address (a view).
func (h IPv4) Dst() []byte { return h[ipv4Dst : ipv4Dst+4] }

// CalculateChecksum computes the header checksum as if the stored one were 0.
func (h IPv4) CalculateChecksum() uint16 {
	hl := h.HeaderLen()
	var sum uint32
	for i := 0; i+1 < hl; i += 2 {
		if i == ipv4Checksum {
			continue
		}
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xFFFF {
		sum = sum&0xFFFF + sum>>16
	}
	return ^uint16(sum)
}

// IsChecksumValid reports whether the stored header checksum is correct.
func (h IPv4) IsChecksumValid() bool { return h.Checksum() == h.CalculateChecksum() }

// SetECN rewrites the ECN codepoint and updates the checksum. Switches use it
// to mark CE; the RoCEv2 ICRC masks the TOS byte, so it stays valid.
func (h IPv4) SetECN(ecn uint8) {
	h[ipv4TOS] = h[ipv4TOS]&^3 | ecn&3
	h.UpdateChecksum()
}

// SetTTL rewrites the TTL and updates the checksum.
func (h IPv4) SetTTL(ttl uint8) {
	h[ipv4TTL] = ttl
	h.UpdateChecksum()
}

// UpdateChecksum stores the correct header checksum.
func (h IPv4) UpdateChecksum() {
	binary.BigEndian.PutUint16(h[ipv4Checksum:], h.CalculateChecksum())
}

// IPv4Fields holds the fields of an option-less IPv4 header to encode.
type IPv4Fields struct {
	TOS         uint8 // DSCP<<2 | ECN
	TotalLength uint16
	ID          uint16
	Flags       uint8 // 3 bits; 0b010 is Don't Fragment
	FragOffset  uint16
	TTL         uint8
	Protocol    uint8
	Src, Dst    [4]byte
}

// Encode writes every field of f and the header checksum; h must hold
// IPv4MinHeaderSize bytes.
func (h IPv4) Encode(f *IPv4Fields) {
	h[ipv4VerIHL] = 4<<4 | IPv4MinHeaderSize/4
	h[ipv4TOS] = f.TOS
	binary.BigEndian.PutUint16(h[ipv4TotalLen:], f.TotalLength)
	binary.BigEndian.PutUint16(h[ipv4ID:], f.ID)
	binary.BigEndian.PutUint16(h[ipv4FlagsOff:], uint16(f.Flags&7)<<13|f.FragOffset&0x1FFF)
	h[ipv4TTL] = f.TTL
	h[ipv4Protocol] = f.Protocol
	copy(h[ipv4Src:], f.Src[:])
	copy(h[ipv4Dst:], f.Dst[:])
	h.UpdateChecksum()
}
