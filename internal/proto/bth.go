package proto

import "encoding/binary"

// Base Transport Header (IBA Vol 1 section 9.2):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    OpCode     |S|M|Pad| TVer  |            P_Key              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|F|B|   resv6   |                  DestQP                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|A|    resv7    |                    PSN                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// S solicited event, M MigReq, Pad pad count, F FECN, B BECN (byte 4 is the
// "resv8a" the ICRC masks), A AckReq.
const (
	bthOpcode = 0
	bthFlags  = 1
	bthPKey   = 2
	bthResv8a = 4
	bthDestQP = 4
	bthPSN    = 8

	// BTHSize is the size of the BTH.
	BTHSize = 12
	// QPNMask masks a 24-bit queue pair number.
	QPNMask = 0xFFFFFF
	// PKeyDefault is the default partition key (full membership).
	PKeyDefault = 0xFFFF
)

// BTH is a view of a Base Transport Header.
type BTH []byte

// Opcode returns the opcode.
func (h BTH) Opcode() Opcode { return Opcode(h[bthOpcode]) }

// SE returns the solicited-event bit.
func (h BTH) SE() bool { return h[bthFlags]&0x80 != 0 }

// MigReq returns the migration-request bit.
func (h BTH) MigReq() bool { return h[bthFlags]&0x40 != 0 }

// PadCnt returns the number of pad bytes (0-3) before the ICRC.
func (h BTH) PadCnt() int { return int(h[bthFlags]>>4) & 3 }

// TVer returns the transport header version (0).
func (h BTH) TVer() uint8 { return h[bthFlags] & 0x0F }

// PKey returns the partition key.
func (h BTH) PKey() uint16 { return binary.BigEndian.Uint16(h[bthPKey:]) }

// FECN returns the forward explicit congestion notification bit.
func (h BTH) FECN() bool { return h[bthResv8a]&0x80 != 0 }

// BECN returns the backward explicit congestion notification bit.
func (h BTH) BECN() bool { return h[bthResv8a]&0x40 != 0 }

// DestQP returns the destination queue pair number.
func (h BTH) DestQP() uint32 { return binary.BigEndian.Uint32(h[bthDestQP:]) & QPNMask }

// AckReq returns the acknowledge-request bit.
func (h BTH) AckReq() bool { return h[bthPSN]&0x80 != 0 }

// PSN returns the packet sequence number.
func (h BTH) PSN() PSN { return PSN(binary.BigEndian.Uint32(h[bthPSN:]) & PSNMask) }

// SetFECN sets or clears FECN (masked by the ICRC).
func (h BTH) SetFECN(v bool) { setBit(&h[bthResv8a], 0x80, v) }

// SetBECN sets or clears BECN (masked by the ICRC).
func (h BTH) SetBECN(v bool) { setBit(&h[bthResv8a], 0x40, v) }

func setBit(b *byte, mask byte, v bool) {
	if v {
		*b |= mask
	} else {
		*b &^= mask
	}
}

// BTHFields holds the fields of a BTH to encode.
type BTHFields struct {
	Opcode     Opcode
	SE, MigReq bool
	PadCnt     uint8
	TVer       uint8
	PKey       uint16
	FECN, BECN bool
	DestQP     uint32
	AckReq     bool
	PSN        PSN
}

// Encode writes every field of f (reserved bits zero); h must hold BTHSize
// bytes.
func (h BTH) Encode(f *BTHFields) {
	h[bthOpcode] = uint8(f.Opcode)
	fl := f.PadCnt&3<<4 | f.TVer&0x0F
	if f.SE {
		fl |= 0x80
	}
	if f.MigReq {
		fl |= 0x40
	}
	h[bthFlags] = fl
	binary.BigEndian.PutUint16(h[bthPKey:], f.PKey)
	binary.BigEndian.PutUint32(h[bthDestQP:], f.DestQP&QPNMask)
	var r8 byte
	if f.FECN {
		r8 |= 0x80
	}
	if f.BECN {
		r8 |= 0x40
	}
	h[bthResv8a] = r8
	psn := uint32(f.PSN) & PSNMask
	if f.AckReq {
		psn |= 0x80000000
	}
	binary.BigEndian.PutUint32(h[bthPSN:], psn)
}
