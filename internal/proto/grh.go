package proto

import "encoding/binary"

// Global Route Header (IBA Vol 1 section 8.3); also the header RoCEv1 puts
// after Ethernet:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| IPVer |    TClass     |            Flow Label                 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            PayLen             |    NxtHdr     |    HopLmt     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        SGID (16 octets)                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        DGID (16 octets)                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// PayLen counts bytes from the first byte after the GRH through the ICRC.
const (
	grhVerTCFL = 0
	grhPayLen  = 4
	grhNxtHdr  = 6
	grhHopLmt  = 7
	grhSGID    = 8
	grhDGID    = 24

	// GRHSize is the size of the GRH.
	GRHSize = 40
	// GRHNextHeaderIBA is the NxtHdr value for IBA transport (BTH follows).
	GRHNextHeaderIBA = 0x1B
)

// GRH is a view of a Global Route Header.
type GRH []byte

// IPVer returns the IP version field (6).
func (h GRH) IPVer() uint8 { return h[grhVerTCFL] >> 4 }

// TClass returns the traffic class.
func (h GRH) TClass() uint8 { return uint8(binary.BigEndian.Uint16(h[grhVerTCFL:]) >> 4) }

// FlowLabel returns the 20-bit flow label.
func (h GRH) FlowLabel() uint32 { return binary.BigEndian.Uint32(h[grhVerTCFL:]) & 0xFFFFF }

// PayLen returns the payload length (after the GRH, through the ICRC).
func (h GRH) PayLen() uint16 { return binary.BigEndian.Uint16(h[grhPayLen:]) }

// NxtHdr returns the next header (0x1B for IBA transport).
func (h GRH) NxtHdr() uint8 { return h[grhNxtHdr] }

// HopLmt returns the hop limit.
func (h GRH) HopLmt() uint8 { return h[grhHopLmt] }

// SGID returns the source GID (a view).
func (h GRH) SGID() []byte { return h[grhSGID : grhSGID+16] }

// DGID returns the destination GID (a view).
func (h GRH) DGID() []byte { return h[grhDGID : grhDGID+16] }

// GRHFields holds the fields of a GRH to encode.
type GRHFields struct {
	TClass     uint8
	FlowLabel  uint32
	PayLen     uint16
	NxtHdr     uint8
	HopLmt     uint8
	SGID, DGID [16]byte
}

// Encode writes every field of f with IPVer 6; h must hold GRHSize bytes.
func (h GRH) Encode(f *GRHFields) {
	binary.BigEndian.PutUint32(h[grhVerTCFL:], 6<<28|uint32(f.TClass)<<20|f.FlowLabel&0xFFFFF)
	binary.BigEndian.PutUint16(h[grhPayLen:], f.PayLen)
	h[grhNxtHdr] = f.NxtHdr
	h[grhHopLmt] = f.HopLmt
	copy(h[grhSGID:], f.SGID[:])
	copy(h[grhDGID:], f.DGID[:])
}
