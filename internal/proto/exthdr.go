package proto

import "encoding/binary"

// Extension transport headers (IBA Vol 1 section 9.3). In a packet they
// follow the BTH in this order: DETH, RETH, AtomicETH, AETH, AtomicAckETH,
// ImmDt, IETH; the opcode says which are present (see OpcodeInfo).
const (
	// RETHSize is the size of the RDMA extended transport header.
	RETHSize = 16
	// AETHSize is the size of the ACK extended transport header.
	AETHSize = 4
	// AtomicETHSize is the size of the atomic extended transport header.
	AtomicETHSize = 28
	// AtomicAckETHSize is the size of the atomic-acknowledge header.
	AtomicAckETHSize = 8
	// DETHSize is the size of the datagram extended transport header.
	DETHSize = 8
	// ImmDtSize is the size of the immediate data header.
	ImmDtSize = 4
	// IETHSize is the size of the invalidate extended transport header.
	IETHSize = 4
)

// RETH (IBA 9.3.3): VA(64) R_Key(32) DMALength(32).
type RETH []byte

// VA returns the remote virtual address.
func (h RETH) VA() uint64 { return binary.BigEndian.Uint64(h[0:]) }

// RKey returns the remote key.
func (h RETH) RKey() uint32 { return binary.BigEndian.Uint32(h[8:]) }

// DMALength returns the length of the whole RDMA operation in bytes.
func (h RETH) DMALength() uint32 { return binary.BigEndian.Uint32(h[12:]) }

// RETHFields holds the fields of a RETH to encode.
type RETHFields struct {
	VA        uint64
	RKey      uint32
	DMALength uint32
}

// Encode writes f; h must hold RETHSize bytes.
func (h RETH) Encode(f *RETHFields) {
	binary.BigEndian.PutUint64(h[0:], f.VA)
	binary.BigEndian.PutUint32(h[8:], f.RKey)
	binary.BigEndian.PutUint32(h[12:], f.DMALength)
}

// AETH (IBA 9.3.5): Syndrome(8) MSN(24).
//
// Syndrome bit 7 is reserved (0); bits 6-5 select ACK (00), RNR NAK (01),
// reserved (10) or NAK (11); bits 4-0 are the credit count, the RNR timer or
// the NAK code respectively (IBA 9.7.5.2.1, table 46).
type AETH []byte

// AckType is the class of an AETH syndrome.
type AckType uint8

// Syndrome classes.
const (
	AckTypeACK      AckType = 0
	AckTypeRNRNAK   AckType = 1
	AckTypeReserved AckType = 2
	AckTypeNAK      AckType = 3
)

// NAK codes carried in the low five bits of a NAK syndrome.
const (
	NAKPSNSequenceError       = 0
	NAKInvalidRequest         = 1
	NAKRemoteAccessError      = 2
	NAKRemoteOperationalError = 3
	NAKInvalidRDRequest       = 4
	// AETHCreditInvalid is the credit count meaning "no end-to-end flow
	// control" (IBA 9.7.7.2.4); ACKs without credits carry it.
	AETHCreditInvalid = 0x1F

	aethSyndromeTypeShift = 5
	aethSyndromeValueMask = 0x1F
	aethMSNMask           = 0xFFFFFF
)

// Syndrome returns the syndrome byte.
func (h AETH) Syndrome() uint8 { return h[0] }

// MSN returns the message sequence number.
func (h AETH) MSN() uint32 { return binary.BigEndian.Uint32(h[0:]) & aethMSNMask }

// Type returns the syndrome class.
func (h AETH) Type() AckType { return AckType(h[0] >> aethSyndromeTypeShift & 3) }

// Value returns the credit count, RNR timer or NAK code.
func (h AETH) Value() uint8 { return h[0] & aethSyndromeValueMask }

// MakeSyndrome builds a syndrome from a class and its 5-bit value.
func MakeSyndrome(t AckType, value uint8) uint8 {
	return uint8(t&3)<<aethSyndromeTypeShift | value&aethSyndromeValueMask
}

// AETHFields holds the fields of an AETH to encode.
type AETHFields struct {
	Syndrome uint8
	MSN      uint32
}

// Encode writes f; h must hold AETHSize bytes.
func (h AETH) Encode(f *AETHFields) {
	binary.BigEndian.PutUint32(h[0:], uint32(f.Syndrome)<<24|f.MSN&aethMSNMask)
}

// AtomicETH (IBA 9.3.4): VA(64) R_Key(32) SwapData(64) CompareData(64).
// For FETCH_ADD the add value travels in SwapData.
type AtomicETH []byte

// VA returns the remote virtual address (8-byte aligned).
func (h AtomicETH) VA() uint64 { return binary.BigEndian.Uint64(h[0:]) }

// RKey returns the remote key.
func (h AtomicETH) RKey() uint32 { return binary.BigEndian.Uint32(h[8:]) }

// SwapData returns the swap (or add) operand.
func (h AtomicETH) SwapData() uint64 { return binary.BigEndian.Uint64(h[12:]) }

// CompareData returns the compare operand.
func (h AtomicETH) CompareData() uint64 { return binary.BigEndian.Uint64(h[20:]) }

// AtomicETHFields holds the fields of an AtomicETH to encode.
type AtomicETHFields struct {
	VA          uint64
	RKey        uint32
	SwapData    uint64
	CompareData uint64
}

// Encode writes f; h must hold AtomicETHSize bytes.
func (h AtomicETH) Encode(f *AtomicETHFields) {
	binary.BigEndian.PutUint64(h[0:], f.VA)
	binary.BigEndian.PutUint32(h[8:], f.RKey)
	binary.BigEndian.PutUint64(h[12:], f.SwapData)
	binary.BigEndian.PutUint64(h[20:], f.CompareData)
}

// AtomicAckETH (IBA 9.3.6): OrigRemoteData(64).
type AtomicAckETH []byte

// OrigRemoteData returns the value the target held before the atomic.
func (h AtomicAckETH) OrigRemoteData() uint64 { return binary.BigEndian.Uint64(h[0:]) }

// Encode writes the original remote data; h must hold AtomicAckETHSize bytes.
func (h AtomicAckETH) Encode(orig uint64) { binary.BigEndian.PutUint64(h[0:], orig) }

// DETH (IBA 9.3.2): Q_Key(32) resv(8) SrcQP(24).
type DETH []byte

// QKey returns the queue key.
func (h DETH) QKey() uint32 { return binary.BigEndian.Uint32(h[0:]) }

// SrcQP returns the source queue pair number.
func (h DETH) SrcQP() uint32 { return binary.BigEndian.Uint32(h[4:]) & QPNMask }

// DETHFields holds the fields of a DETH to encode.
type DETHFields struct {
	QKey  uint32
	SrcQP uint32
}

// Encode writes f (reserved byte zero); h must hold DETHSize bytes.
func (h DETH) Encode(f *DETHFields) {
	binary.BigEndian.PutUint32(h[0:], f.QKey)
	binary.BigEndian.PutUint32(h[4:], f.SrcQP&QPNMask)
}

// ImmDt (IBA 9.3.7): 32 bits of immediate data, opaque to the transport.
type ImmDt []byte

// Value returns the immediate data as a big-endian number (the byte order
// libibverbs' imm_data has on the wire).
func (h ImmDt) Value() uint32 { return binary.BigEndian.Uint32(h[0:]) }

// Encode writes the immediate data; h must hold ImmDtSize bytes.
func (h ImmDt) Encode(v uint32) { binary.BigEndian.PutUint32(h[0:], v) }

// IETH (IBA 9.3.8): the R_Key to invalidate.
type IETH []byte

// RKey returns the R_Key to invalidate.
func (h IETH) RKey() uint32 { return binary.BigEndian.Uint32(h[0:]) }

// Encode writes the R_Key; h must hold IETHSize bytes.
func (h IETH) Encode(rkey uint32) { binary.BigEndian.PutUint32(h[0:], rkey) }

// XRCETHSize is the size of the XRC extended transport header.
const XRCETHSize = 4

// XRCETH (IBA 9.3.9) names the XRC shared receive queue at the target
// that an XRC request is for. Every XRC request packet (SEND, WRITE, READ
// request, atomic) carries one directly after the BTH; responses do not.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Reserved    |                    XRCSRQ                     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type XRCETH []byte

// xrcSRQMask keeps the 24-bit XRC SRQ number.
const xrcSRQMask = 0xFFFFFF

// XRCSRQ returns the XRC SRQ number. The reserved byte is ignored on
// receipt (IBA 9.3: reserved fields are not checked by the receiver).
func (h XRCETH) XRCSRQ() uint32 { return binary.BigEndian.Uint32(h[0:]) & xrcSRQMask }

// Encode writes the SRQ number (reserved byte zero); h must hold
// XRCETHSize bytes.
func (h XRCETH) Encode(srqn uint32) { binary.BigEndian.PutUint32(h[0:], srqn&xrcSRQMask) }
