package wire

import (
	"encoding/binary"
	"unicode/utf8"
)

// Hello payload: the first message on a port, a Hello frame whose
// Credits is the sender's initial grant to its peer; the switch answers
// with its own (Status in the header).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     Magic "HLNK" (0x484C4E4B)                 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                           MaxFrame                            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Role      |    NumGPUs    |    PortNum    |    NameLen    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     GPU id 0 (16 bits)  ...  NumGPUs ids                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Name (NameLen octets, UTF-8, <= MaxNameLen)               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// MaxFrame is the largest message, header included, that the sender
// accepts; PortNum is 0 in a request and the switch's port in the answer.
const (
	hOffMagic    = 0
	hOffMaxFrame = 4
	hOffRole     = 8
	hOffNumGPUs  = 9
	hOffPortNum  = 10
	hOffNameLen  = 11
	hOffGPUs     = 12

	// HelloMagic is "HLNK" read big-endian.
	HelloMagic = 0x484C4E4B
	// HelloFixedSize is the hello payload without GPU ids and name.
	HelloFixedSize = hOffGPUs
	// MaxHelloGPUs is the most GPU ids one port may name.
	MaxHelloGPUs = 16
	// MaxNameLen is the longest name.
	MaxNameLen = 64
	// MinMaxFrame and MaxMaxFrame bound the MaxFrame a hello may state.
	MinMaxFrame = HeaderSize + 64
	MaxMaxFrame = HeaderSize + 256<<10

	// RoleGPU is a GPU backend's port; RoleSwitch the switch.
	RoleGPU    = 1
	RoleSwitch = 2
)

// Hello is a view of a hello payload that ParseHello accepted.
type Hello []byte

// Magic returns the magic number.
func (h Hello) Magic() uint32 { return binary.BigEndian.Uint32(h[hOffMagic:]) }

// MaxFrame returns the largest message the sender accepts.
func (h Hello) MaxFrame() uint32 { return binary.BigEndian.Uint32(h[hOffMaxFrame:]) }

// Role returns RoleGPU or RoleSwitch.
func (h Hello) Role() uint8 { return h[hOffRole] }

// NumGPUs returns how many GPU ids follow.
func (h Hello) NumGPUs() int { return int(h[hOffNumGPUs]) }

// PortNum returns the switch port (answers).
func (h Hello) PortNum() uint8 { return h[hOffPortNum] }

// GPU returns GPU id i (< NumGPUs).
func (h Hello) GPU(i int) uint16 { return binary.BigEndian.Uint16(h[hOffGPUs+2*i:]) }

// Name returns the display name; it aliases the payload.
func (h Hello) Name() []byte {
	off := hOffGPUs + 2*h.NumGPUs()
	return h[off : off+int(h[hOffNameLen])]
}

// HelloFields are a hello's fields for AppendHello.
type HelloFields struct {
	MaxFrame uint32
	Role     uint8
	PortNum  uint8
	GPUs     []uint16
	Name     string
}

// Fields returns the hello's fields (it allocates: control plane).
func (h Hello) Fields() HelloFields {
	f := HelloFields{MaxFrame: h.MaxFrame(), Role: h.Role(), PortNum: h.PortNum(), Name: string(h.Name())}
	for i := range h.NumGPUs() {
		f.GPUs = append(f.GPUs, h.GPU(i))
	}
	return f
}

// ParseHello validates a hello payload: the magic, a known role, at most
// MaxHelloGPUs ids and none twice, a UTF-8 name of at most MaxNameLen
// octets, MaxFrame from MinMaxFrame to MaxMaxFrame, and a length
// exactly what NumGPUs and NameLen say.
func ParseHello(p []byte) (Hello, error) {
	if len(p) < HelloFixedSize {
		return nil, ErrTruncated
	}
	h := Hello(p)
	if h.Magic() != HelloMagic || (h.Role() != RoleGPU && h.Role() != RoleSwitch) ||
		h.MaxFrame() < MinMaxFrame || h.MaxFrame() > MaxMaxFrame {
		return nil, ErrMalformed
	}
	n, nameLen := h.NumGPUs(), int(p[hOffNameLen])
	if n > MaxHelloGPUs || nameLen > MaxNameLen {
		return nil, ErrMalformed
	}
	if len(p) != HelloFixedSize+2*n+nameLen {
		return nil, ErrMalformed
	}
	for i := range n {
		for j := range i {
			if h.GPU(i) == h.GPU(j) {
				return nil, ErrMalformed
			}
		}
	}
	if !utf8.Valid(h.Name()) {
		return nil, ErrMalformed
	}
	return h, nil
}

// AppendHello appends the hello payload of f to b. GPUs beyond
// MaxHelloGPUs and name bytes beyond MaxNameLen are cut (ParseHello
// would refuse them).
func AppendHello(b []byte, f *HelloFields) []byte {
	gpus, name := f.GPUs, f.Name
	if len(gpus) > MaxHelloGPUs {
		gpus = gpus[:MaxHelloGPUs]
	}
	if len(name) > MaxNameLen {
		name = name[:MaxNameLen]
	}
	b = binary.BigEndian.AppendUint32(b, HelloMagic)
	b = binary.BigEndian.AppendUint32(b, f.MaxFrame)
	b = append(b, f.Role, uint8(len(gpus)), f.PortNum, uint8(len(name)))
	for _, g := range gpus {
		b = binary.BigEndian.AppendUint16(b, g)
	}
	return append(b, name...)
}

// AppendHelloFrame appends a whole hello frame: a header of TypeHello
// with status and the credit grant, then the hello payload.
func AppendHelloFrame(b []byte, status uint8, credits uint16, f *HelloFields) []byte {
	n := len(b)
	b = append(b, make([]byte, HeaderSize)...)
	b = AppendHello(b, f)
	Header(b[n:]).Encode(&Fields{Type: TypeHello, Status: status, Credits: credits, Length: uint32(len(b) - n - HeaderSize)})
	return b
}
