// Package wire is the HiLink frame format: the small header every frame
// between a HiGPU port and the HiLink switch carries, and the hello that
// opens a port. There is no Ethernet, no IBA framing, no ICRC and no
// PSN/ACK: HiLink ports are UNIX SOCK_SEQPACKET sockets inside one host,
// one frame per message, and the fabric is lossless and ordered by
// credits. docs/hilink-wire.md describes the format and the exchange.
//
// Header and Hello are views over the caller's buffer with accessors
// named after the fields; Encode writes them; Parse validates a frame
// once and returns sentinel errors without allocating.
//
// wire imports only the standard library.
package wire

import (
	"encoding/binary"
	"errors"
)

// Sentinel errors of Parse and ParseHello, returned unwrapped so that the
// hot path never allocates.
var (
	// ErrTruncated means the message is shorter than its header.
	ErrTruncated = errors.New("hilink: truncated")
	// ErrVersion means the header's version is not Version.
	ErrVersion = errors.New("hilink: unsupported version")
	// ErrType means the frame type is 0 or unknown.
	ErrType = errors.New("hilink: unknown frame type")
	// ErrMalformed means a field contradicts the message: a length that
	// is not the payload's, a reserved flag set, a payload where the type
	// has none.
	ErrMalformed = errors.New("hilink: malformed")
)

// HiLink header:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version|  Type |L| rsv |Status |            Credits            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            SrcGPU             |            DstGPU             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                              Tag                              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                            Length                             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	+                      Address (64 bits)                        +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Payload (Length octets) ...                   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// All numbers are big-endian. L (Last) marks the last frame of a write or
// of a read response; rsv is zero. Credits is a link-level field: the
// frames the sender of this message returns to its peer on this link
// (the switch rewrites it on every hop). The payload starts 8-aligned.
const (
	offVerType = 0
	offFlags   = 1
	offCredits = 2
	offSrcGPU  = 4
	offDstGPU  = 6
	offTag     = 8
	offLength  = 12
	offAddress = 16

	// HeaderSize is the size of the header; the payload follows it.
	HeaderSize = 24
	// Version is the header version this package speaks.
	Version = 1
	// FlagLast marks the last frame of a write or a read response.
	FlagLast = 0x8
	// MaxCredits is the most credits one message can carry.
	MaxCredits = 0xFFFF
	// MaxStatus is the largest Status (four bits).
	MaxStatus = 0xF

	flagsMask = 0xF
)

// Type is a frame type.
type Type uint8

// The frame types (docs/hilink-wire.md). Hello and Credit are
// link-level and never forwarded; the others go from SrcGPU to DstGPU.
const (
	// TypeHello opens a port; its payload is a Hello.
	TypeHello Type = 1
	// TypeCredit only returns credits; it has no payload.
	TypeCredit Type = 2
	// TypeWrite writes its payload at Address of DstGPU's memory.
	TypeWrite Type = 3
	// TypeWriteResp answers the Last frame of a write: Status, and in
	// Length the bytes of the whole write.
	TypeWriteResp Type = 4
	// TypeReadReq asks for Length bytes at Address of DstGPU's memory.
	TypeReadReq Type = 5
	// TypeReadResp carries read data from Address; the last one has
	// FlagLast, an error one no payload.
	TypeReadResp Type = 6

	typeMax = TypeReadResp
)

var typeNames = [...]string{"", "hello", "credit", "write", "write-resp", "read-req", "read-resp"}

// String returns the type's name as docs and status use it.
func (t Type) String() string {
	if t == 0 || t > typeMax {
		return "unknown"
	}
	return typeNames[t]
}

// Forwarded reports whether frames of the type go through the switch to
// another port (data frames), rather than ending on the link.
func (t Type) Forwarded() bool { return t >= TypeWrite && t <= typeMax }

// hasPayload reports whether the type carries Length octets of payload.
func (t Type) hasPayload() bool { return t == TypeHello || t == TypeWrite || t == TypeReadResp }

// Status values of responses and of the switch's hello answer.
const (
	StatusOK          = 0
	StatusVersion     = 1 // hello: unsupported version
	StatusMalformed   = 2 // hello: malformed
	StatusPortBusy    = 3 // hello: the port has a peer
	StatusGPUInUse    = 4 // hello: a GPU id is behind another port
	StatusNoAccess    = 5 // peer access not enabled for the source
	StatusBadAddress  = 6 // the range is not in one allocation
	StatusUnreachable = 7 // the destination GPU is not on the fabric
)

// Header is a view of a HiLink header (at least HeaderSize bytes).
type Header []byte

// Version returns the header version.
func (h Header) Version() uint8 { return h[offVerType] >> 4 }

// Type returns the frame type.
func (h Header) Type() Type { return Type(h[offVerType] & 0xF) }

// Flags returns the four flag bits (FlagLast).
func (h Header) Flags() uint8 { return h[offFlags] >> 4 }

// Last reports FlagLast.
func (h Header) Last() bool { return h.Flags()&FlagLast != 0 }

// Status returns the status of a response or hello answer.
func (h Header) Status() uint8 { return h[offFlags] & 0xF }

// Credits returns the credits the sender returns to its peer.
func (h Header) Credits() uint16 { return binary.BigEndian.Uint16(h[offCredits:]) }

// SrcGPU returns the source GPU id.
func (h Header) SrcGPU() uint16 { return binary.BigEndian.Uint16(h[offSrcGPU:]) }

// DstGPU returns the destination GPU id.
func (h Header) DstGPU() uint16 { return binary.BigEndian.Uint16(h[offDstGPU:]) }

// Tag returns the operation's tag, chosen by the requester and echoed in
// responses.
func (h Header) Tag() uint32 { return binary.BigEndian.Uint32(h[offTag:]) }

// Length returns the payload length (Hello, Write, ReadResp), the bytes
// asked for (ReadReq) or written (WriteResp); 0 for Credit.
func (h Header) Length() uint32 { return binary.BigEndian.Uint32(h[offLength:]) }

// Address returns the device address in DstGPU's memory (requests) or in
// SrcGPU's memory that the data came from (ReadResp).
func (h Header) Address() uint64 { return binary.BigEndian.Uint64(h[offAddress:]) }

// Payload returns the payload of a frame that Parse accepted.
func (h Header) Payload() []byte { return h[HeaderSize:] }

// SetCredits rewrites Credits in place (the switch does on every hop).
func (h Header) SetCredits(n uint16) { binary.BigEndian.PutUint16(h[offCredits:], n) }

// Fields are a header's fields for Encode.
type Fields struct {
	Type    Type
	Flags   uint8 // FlagLast
	Status  uint8
	Credits uint16
	SrcGPU  uint16
	DstGPU  uint16
	Tag     uint32
	Length  uint32
	Address uint64
}

// Encode writes f into h (at least HeaderSize bytes) with Version.
func (h Header) Encode(f *Fields) {
	h[offVerType] = Version<<4 | uint8(f.Type)&0xF
	h[offFlags] = f.Flags<<4 | f.Status&0xF
	binary.BigEndian.PutUint16(h[offCredits:], f.Credits)
	binary.BigEndian.PutUint16(h[offSrcGPU:], f.SrcGPU)
	binary.BigEndian.PutUint16(h[offDstGPU:], f.DstGPU)
	binary.BigEndian.PutUint32(h[offTag:], f.Tag)
	binary.BigEndian.PutUint32(h[offLength:], f.Length)
	binary.BigEndian.PutUint64(h[offAddress:], f.Address)
}

// Fields returns the header's fields.
func (h Header) Fields() Fields {
	return Fields{Type: h.Type(), Flags: h.Flags(), Status: h.Status(), Credits: h.Credits(),
		SrcGPU: h.SrcGPU(), DstGPU: h.DstGPU(), Tag: h.Tag(), Length: h.Length(), Address: h.Address()}
}

// Parse validates one message as a HiLink frame and returns its header
// view. The rules: the version is Version; the type is known; no flag
// but FlagLast, and that only on Write and ReadResp; Hello, Write and
// ReadResp carry exactly Length octets of payload, other types none; a
// Write carries at least one octet, a ReadReq asks for at least one, a
// Credit carries only Credits.
func Parse(msg []byte) (Header, error) {
	if len(msg) < HeaderSize {
		return nil, ErrTruncated
	}
	h := Header(msg)
	if h.Version() != Version {
		return nil, ErrVersion
	}
	t := h.Type()
	if t == 0 || t > typeMax {
		return nil, ErrType
	}
	flags := h.Flags()
	if flags&^FlagLast != 0 || (flags != 0 && t != TypeWrite && t != TypeReadResp) {
		return nil, ErrMalformed
	}
	n := uint64(h.Length())
	payload := uint64(len(msg) - HeaderSize)
	switch {
	case t.hasPayload() && n != payload, !t.hasPayload() && payload != 0:
		return nil, ErrMalformed
	case t == TypeWrite && n == 0, t == TypeReadReq && n == 0:
		return nil, ErrMalformed
	case t == TypeCredit && (h.Status() != 0 || h.SrcGPU() != 0 || h.DstGPU() != 0 || h.Tag() != 0 ||
		n != 0 || h.Address() != 0):
		return nil, ErrMalformed
	}
	return h, nil
}

// Append appends a frame with header f and the payload to b. For the
// types with a payload, f.Length is set to len(payload).
func Append(b []byte, f *Fields, payload []byte) []byte {
	ff := *f
	if ff.Type.hasPayload() {
		ff.Length = uint32(len(payload))
	}
	n := len(b)
	b = append(b, make([]byte, HeaderSize)...)
	Header(b[n:]).Encode(&ff)
	return append(b, payload...)
}
