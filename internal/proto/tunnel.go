package proto

import "encoding/binary"

// Tunnel encapsulations of HiSwitch's inter-host links (docs/fabric-wire.md,
// "Links between hosts"). Both are the UDP payload of one datagram; the
// outer IP and UDP headers are the kernel's.
//
// An Ethernet link is VXLAN (RFC 7348 section 5), UDP port 4789:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|R|R|R|R|I|R|R|R|            Reserved                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                VXLAN Network Identifier (VNI) |   Reserved    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|       inner Ethernet frame (no FCS) ...
//
// The I flag must be set; the reserved bits are sent as zero and ignored
// on receipt (RFC 7348 section 5).
//
// An InfiniBand link is HiNIC's IB-over-UDP, UDP port 4792 by default:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|      Magic 0x48 0x49 "HI"     |Version|  Type |   Reserved    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Link identifier (VNI)          |   Reserved    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|       IB packet, LRH through VCRC (Type 0 only) ...
//
// Version is 1. Type 0 carries one IB packet; 1 is a keepalive, 2 asks
// the peer to stop sending packets (XOFF) and 3 lets it resume (XON);
// those three carry nothing after the header.
const (
	// VXLANPort is the IANA port of VXLAN (RFC 7348).
	VXLANPort = 4789
	// IBUDPPort is the default port of HiNIC's IB-over-UDP (not an IANA
	// assignment; both ends configure it).
	IBUDPPort = 4792
	// TunnelHeaderSize is the size of both headers.
	TunnelHeaderSize = 8
	// VXLANFlagI is the "VNI valid" flag.
	VXLANFlagI = 0x08
	// MaxVNI is the largest 24-bit VNI.
	MaxVNI = 1<<24 - 1
	// IBUDPVersion is the IB-over-UDP version.
	IBUDPVersion = 1
	// ibUDPMagic is "HI".
	ibUDPMagic = 0x4849
	// minIBPacket is an LRH and a VCRC, the least an IB packet has.
	minIBPacket = LRHSize + 2
)

// IB-over-UDP datagram types.
const (
	IBUDPData      = 0
	IBUDPKeepalive = 1
	IBUDPXOFF      = 2
	IBUDPXON       = 3
)

// PutVXLAN writes a VXLAN header with the I flag and vni into b[:8].
func PutVXLAN(b []byte, vni uint32) {
	_ = b[TunnelHeaderSize-1]
	binary.BigEndian.PutUint32(b[0:], VXLANFlagI<<24)
	binary.BigEndian.PutUint32(b[4:], (vni&MaxVNI)<<8)
}

// ParseVXLAN checks a VXLAN datagram and returns its VNI and the inner
// Ethernet frame (a view of b). A datagram shorter than the header and
// an Ethernet header is ErrTruncated; one without the I flag
// ErrMalformed.
func ParseVXLAN(b []byte) (vni uint32, inner []byte, err error) {
	if len(b) < TunnelHeaderSize+EthernetHeaderSize {
		return 0, nil, ErrTruncated
	}
	if b[0]&VXLANFlagI == 0 {
		return 0, nil, ErrMalformed
	}
	return binary.BigEndian.Uint32(b[4:]) >> 8, b[TunnelHeaderSize:], nil
}

// PutIBUDP writes an IB-over-UDP header of type typ with vni into b[:8].
func PutIBUDP(b []byte, typ uint8, vni uint32) {
	_ = b[TunnelHeaderSize-1]
	binary.BigEndian.PutUint16(b[0:], ibUDPMagic)
	b[2] = IBUDPVersion<<4 | typ&0x0F
	b[3] = 0
	binary.BigEndian.PutUint32(b[4:], (vni&MaxVNI)<<8)
}

// ParseIBUDP checks an IB-over-UDP datagram and returns its type, VNI
// and, for a data datagram, the IB packet (a view of b). A wrong magic,
// version or type, or a control datagram with a payload, is
// ErrMalformed; a datagram shorter than the header, or a data datagram
// shorter than an LRH and a VCRC, is ErrTruncated.
func ParseIBUDP(b []byte) (typ uint8, vni uint32, pkt []byte, err error) {
	if len(b) < TunnelHeaderSize {
		return 0, 0, nil, ErrTruncated
	}
	if binary.BigEndian.Uint16(b) != ibUDPMagic || b[2]>>4 != IBUDPVersion {
		return 0, 0, nil, ErrMalformed
	}
	typ, vni = b[2]&0x0F, binary.BigEndian.Uint32(b[4:])>>8
	switch typ {
	case IBUDPData:
		if len(b) < TunnelHeaderSize+minIBPacket {
			return 0, 0, nil, ErrTruncated
		}
		return typ, vni, b[TunnelHeaderSize:], nil
	case IBUDPKeepalive, IBUDPXOFF, IBUDPXON:
		if len(b) != TunnelHeaderSize {
			return 0, 0, nil, ErrMalformed
		}
		return typ, vni, nil, nil
	}
	return 0, 0, nil, ErrMalformed
}

// The keepalive of a VXLAN link is an ordinary VXLAN datagram whose inner
// frame goes to the bridge-reserved address 01:80:C2:00:00:0E (never
// forwarded by a bridge, IEEE 802.1Q table 8-1) with the local
// experimental EtherType 0x88B5 (IEEE 802), and carries "HNKA" and a
// 32-bit sequence number, padded to the Ethernet minimum.
const (
	// EtherTypeLocalExperimental is IEEE 802's local experimental
	// EtherType 1.
	EtherTypeLocalExperimental = 0x88B5
	// KeepaliveFrameSize is the keepalive inner frame's size.
	KeepaliveFrameSize = EthernetMinFrameSize
)

// KeepaliveDestMAC is the destination of a VXLAN keepalive frame.
var KeepaliveDestMAC = [6]byte{0x01, 0x80, 0xC2, 0x00, 0x00, 0x0E}

var keepaliveMagic = [4]byte{'H', 'N', 'K', 'A'}

// PutKeepaliveFrame writes a keepalive frame from src with sequence seq
// into b[:KeepaliveFrameSize].
func PutKeepaliveFrame(b []byte, src [6]byte, seq uint32) {
	_ = b[KeepaliveFrameSize-1]
	clear(b[:KeepaliveFrameSize])
	copy(b[0:6], KeepaliveDestMAC[:])
	copy(b[6:12], src[:])
	binary.BigEndian.PutUint16(b[12:], EtherTypeLocalExperimental)
	copy(b[14:18], keepaliveMagic[:])
	binary.BigEndian.PutUint32(b[18:], seq)
}

// IsKeepaliveFrame reports whether an inner Ethernet frame is a VXLAN
// link keepalive.
func IsKeepaliveFrame(f []byte) bool {
	return len(f) >= 22 && [6]byte(f[0:6]) == KeepaliveDestMAC &&
		binary.BigEndian.Uint16(f[12:]) == EtherTypeLocalExperimental && [4]byte(f[14:18]) == keepaliveMagic
}
