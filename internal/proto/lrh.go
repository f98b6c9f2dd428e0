package proto

import "encoding/binary"

// Local Route Header (IBA Vol 1 section 7.7):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   VL  | LVer  |   SL  |rsv|LNH|      Destination LID          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  rsv5   |  PktLen (11 bits)   |        Source LID             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// PktLen counts 4-byte words from the first byte of the LRH through the
// ICRC; it excludes the VCRC.
const (
	lrhVLLVer = 0
	lrhSLLNH  = 1
	lrhDLID   = 2
	lrhPktLen = 4
	lrhSLID   = 6

	// LRHSize is the size of the LRH.
	LRHSize = 8
	// VCRCSize is the size of the variant CRC that ends every IB packet.
	VCRCSize = 2
	// ICRCSize is the size of the invariant CRC.
	ICRCSize = 4
)

// LNH values: what follows the LRH (IBA 7.7.4).
const (
	LNHRaw       = 0 // raw packet, no IBA transport
	LNHIPv6Raw   = 1 // IP non-IBA transport
	LNHIBALocal  = 2 // BTH follows
	LNHIBAGlobal = 3 // GRH follows, then BTH
)

// LIDs with special meaning (IBA 4.1.3).
const (
	LIDReserved       = 0x0000
	LIDUnicastMax     = 0xBFFF
	LIDMulticastBase  = 0xC000
	LIDMulticastLast  = 0xFFFE
	LIDPermissive     = 0xFFFF
	VL15              = 15 // the management VL: SMPs only, not flow-controlled
	LRHLinkVersion    = 0
	LRHMaxPacketWords = 0x7FF
)

// LRH is a view of a Local Route Header.
type LRH []byte

// VL returns the virtual lane.
func (h LRH) VL() uint8 { return h[lrhVLLVer] >> 4 }

// LVer returns the link version (0).
func (h LRH) LVer() uint8 { return h[lrhVLLVer] & 0x0F }

// SL returns the service level.
func (h LRH) SL() uint8 { return h[lrhSLLNH] >> 4 }

// LNH returns the link next header.
func (h LRH) LNH() uint8 { return h[lrhSLLNH] & 3 }

// DLID returns the destination LID.
func (h LRH) DLID() uint16 { return binary.BigEndian.Uint16(h[lrhDLID:]) }

// PktLen returns the packet length in 4-byte words (LRH through ICRC).
func (h LRH) PktLen() uint16 { return binary.BigEndian.Uint16(h[lrhPktLen:]) & 0x7FF }

// SLID returns the source LID.
func (h LRH) SLID() uint16 { return binary.BigEndian.Uint16(h[lrhSLID:]) }

// SetVL rewrites the virtual lane (switches remap SL to VL per hop; the VCRC
// must then be recomputed, the ICRC stays valid).
func (h LRH) SetVL(vl uint8) { h[lrhVLLVer] = vl<<4 | h[lrhVLLVer]&0x0F }

// LRHFields holds the fields of an LRH to encode.
type LRHFields struct {
	VL, LVer, SL, LNH uint8
	DLID, SLID        uint16
	PktLen            uint16
}

// Encode writes every field of f; h must hold LRHSize bytes.
func (h LRH) Encode(f *LRHFields) {
	h[lrhVLLVer] = f.VL<<4 | f.LVer&0x0F
	h[lrhSLLNH] = f.SL<<4 | f.LNH&3
	binary.BigEndian.PutUint16(h[lrhDLID:], f.DLID)
	binary.BigEndian.PutUint16(h[lrhPktLen:], f.PktLen&0x7FF)
	binary.BigEndian.PutUint16(h[lrhSLID:], f.SLID)
}
