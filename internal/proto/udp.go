package proto

import "encoding/binary"

// UDP header (RFC 768):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Source Port          |       Destination Port        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            Length             |           Checksum            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
const (
	udpSrcPort  = 0
	udpDstPort  = 2
	udpLength   = 4
	udpChecksum = 6

	// UDPHeaderSize is the size of a UDP header.
	UDPHeaderSize = 8
	// RoCEv2Port is the IANA UDP destination port of RoCEv2 (IBTA Annex
	// A17.3).
	RoCEv2Port = 4791
	// RoCEv2SourcePortBase is the start of the source-port range RoCEv2
	// implementations hash flows into (Linux rxe uses 0xC000 + hash(QPN)).
	RoCEv2SourcePortBase = 0xC000
)

// UDP is a view of a UDP header.
type UDP []byte

// SrcPort returns the source port.
func (u UDP) SrcPort() uint16 { return binary.BigEndian.Uint16(u[udpSrcPort:]) }

// DstPort returns the destination port.
func (u UDP) DstPort() uint16 { return binary.BigEndian.Uint16(u[udpDstPort:]) }

// Length returns the length of header and payload.
func (u UDP) Length() uint16 { return binary.BigEndian.Uint16(u[udpLength:]) }

// Checksum returns the checksum; RoCEv2 senders normally leave it 0.
func (u UDP) Checksum() uint16 { return binary.BigEndian.Uint16(u[udpChecksum:]) }

// UDPFields holds the fields of a UDP header to encode.
type UDPFields struct {
	SrcPort, DstPort uint16
	Length           uint16
	Checksum         uint16
}

// Encode writes every field of f; u must hold UDPHeaderSize bytes.
func (u UDP) Encode(f *UDPFields) {
	binary.BigEndian.PutUint16(u[udpSrcPort:], f.SrcPort)
	binary.BigEndian.PutUint16(u[udpDstPort:], f.DstPort)
	binary.BigEndian.PutUint16(u[udpLength:], f.Length)
	binary.BigEndian.PutUint16(u[udpChecksum:], f.Checksum)
}
