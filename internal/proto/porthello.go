package proto

import (
	"bytes"
	"encoding/binary"
)

// The port hello opens every connection between an emulated NIC port (or
// another switch) and a HiSwitch port: UNIX SOCK_SEQPACKET, one message per
// frame. The NIC sends a Hello as its first message; the switch answers with
// a Hello of its own whose Status says whether the port accepted it. After
// that every message is exactly one frame: an Ethernet frame (no FCS) on an
// Ethernet port, an IB packet from LRH through VCRC on an InfiniBand port.
// docs/fabric-wire.md describes the exchange, and the shared-memory setup
// that may follow it.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     Magic "HNIC" (0x484E4943)                 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           Version             |  LinkLayer    |     Role      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            Status             |            MaxFrame           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        MAC (6 octets)                                         |
//	+                               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                               |   PortNum     |   NameLen     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      Port GUID (8 octets)                     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      Node GUID (8 octets)                     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Name (NameLen octets, UTF-8, <= 64)           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           Features (4 octets, optional, never zero)           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Features follows the name when the sender offers any (a bit set per
// feature, HelloFeature*); a hello without it offers none, so hellos of
// senders that know no features are unchanged. An answer offers only
// features the request offered too.
const (
	helloMagicOff    = 0
	helloVersionOff  = 4
	helloLinkOff     = 6
	helloRoleOff     = 7
	helloStatusOff   = 8
	helloMaxFrameOff = 10
	helloMACOff      = 12
	helloPortNumOff  = 18
	helloNameLenOff  = 19
	helloPortGUIDOff = 20
	helloNodeGUIDOff = 28
	helloNameOff     = 36

	// HelloMagic is "HNIC" read big-endian.
	HelloMagic = 0x484E4943
	// HelloVersion is the version this package speaks.
	HelloVersion = 1
	// HelloMinSize is the size of a hello with an empty name.
	HelloMinSize = helloNameOff
	// HelloMaxName is the longest display name.
	HelloMaxName = 64
	// HelloFeaturesSize is the size of the optional Features field.
	HelloFeaturesSize = 4
	// HelloMaxSize is the size of a hello with the longest name and
	// Features.
	HelloMaxSize = HelloMinSize + HelloMaxName + HelloFeaturesSize
)

// Hello features.
const (
	// HelloFeatureShm offers a shared-memory ring pair instead of the
	// socket for the frames (package shmport, docs/fabric-wire.md). When
	// request and answer both offer it, the requester's next message is
	// the shared-memory setup.
	HelloFeatureShm uint32 = 1 << 0
)

// HelloLink is the link layer a port runs.
type HelloLink uint8

// Link layers of a port.
const (
	HelloLinkEthernet   HelloLink = 1 // Ethernet frames: RoCEv2, ARP, IP, ...
	HelloLinkInfiniBand HelloLink = 2 // native IB packets, LRH through VCRC
)

// String returns "ethernet" or "infiniband".
func (l HelloLink) String() string {
	switch l {
	case HelloLinkEthernet:
		return "ethernet"
	case HelloLinkInfiniBand:
		return "infiniband"
	}
	return "unknown"
}

// HelloRole says what is on the sending end.
type HelloRole uint8

// Roles.
const (
	HelloRoleNIC    HelloRole = 1 // an emulated NIC port
	HelloRoleSwitch HelloRole = 2 // a HiSwitch (its answer, or an inter-switch link)
)

// Hello statuses, in the switch's answer.
const (
	HelloOK              = 0 // accepted; frames may flow
	HelloBadVersion      = 1 // the switch does not speak this version
	HelloWrongLinkLayer  = 2 // the port is configured for the other link layer
	HelloPortBusy        = 3 // another peer holds the port
	HelloMalformed       = 4 // the hello could not be parsed
	HelloFrameTooBig     = 5 // MaxFrame is larger than the port allows
	helloStatusNamesSize = 6
)

var helloStatusNames = [helloStatusNamesSize]string{
	"ok", "unsupported version", "wrong link layer", "port busy", "malformed hello", "frame size too big",
}

// HelloStatusText describes a hello status.
func HelloStatusText(s uint16) string {
	if int(s) < len(helloStatusNames) {
		return helloStatusNames[s]
	}
	return "unknown status"
}

// Hello is a view of a port hello.
type Hello []byte

// ParseHello checks magic, length and name length and returns a view. It
// does not reject other versions: the receiver answers HelloBadVersion.
func ParseHello(b []byte) (Hello, error) {
	if len(b) < HelloMinSize {
		return nil, ErrTruncated
	}
	h := Hello(b)
	if binary.BigEndian.Uint32(b[helloMagicOff:]) != HelloMagic {
		return nil, ErrMalformed
	}
	n := int(b[helloNameLenOff])
	if n > HelloMaxName {
		return nil, ErrMalformed
	}
	switch len(b) {
	case HelloMinSize + n:
	case HelloMinSize + n + HelloFeaturesSize:
		if binary.BigEndian.Uint32(b[HelloMinSize+n:]) == 0 {
			return nil, ErrMalformed // an empty Features is left out
		}
	default:
		return nil, ErrMalformed
	}
	return h, nil
}

// Version returns the protocol version.
func (h Hello) Version() uint16 { return binary.BigEndian.Uint16(h[helloVersionOff:]) }

// LinkLayer returns the port's link layer.
func (h Hello) LinkLayer() HelloLink { return HelloLink(h[helloLinkOff]) }

// Role returns what sent the hello.
func (h Hello) Role() HelloRole { return HelloRole(h[helloRoleOff]) }

// Status returns the status (0 in a NIC's hello).
func (h Hello) Status() uint16 { return binary.BigEndian.Uint16(h[helloStatusOff:]) }

// MaxFrame returns the largest frame the sender will send or accept.
func (h Hello) MaxFrame() uint16 { return binary.BigEndian.Uint16(h[helloMaxFrameOff:]) }

// MAC returns the port's MAC address (Ethernet ports; a view).
func (h Hello) MAC() []byte { return h[helloMACOff : helloMACOff+6] }

// PortNum returns the switch port number (in the switch's answer) or the
// NIC's port number (1-based).
func (h Hello) PortNum() uint8 { return h[helloPortNumOff] }

// PortGUID returns the port GUID.
func (h Hello) PortGUID() uint64 { return binary.BigEndian.Uint64(h[helloPortGUIDOff:]) }

// NodeGUID returns the node GUID.
func (h Hello) NodeGUID() uint64 { return binary.BigEndian.Uint64(h[helloNodeGUIDOff:]) }

// Name returns the display name (a view).
func (h Hello) Name() []byte { return h[helloNameOff : helloNameOff+int(h[helloNameLenOff])] }

// Features returns the features offered (0 when the field is absent).
func (h Hello) Features() uint32 {
	end := helloNameOff + int(h[helloNameLenOff])
	if len(h) < end+HelloFeaturesSize {
		return 0
	}
	return binary.BigEndian.Uint32(h[end:])
}

// HelloFields holds a hello to encode.
type HelloFields struct {
	Version   uint16 // normally HelloVersion
	LinkLayer HelloLink
	Role      HelloRole
	Status    uint16
	MaxFrame  uint16
	MAC       [6]byte
	PortNum   uint8
	PortGUID  uint64
	NodeGUID  uint64
	Name      string // truncated to HelloMaxName bytes
	Features  uint32 // HelloFeature* bits; 0 leaves the field out
}

// Size returns the encoded size.
func (f *HelloFields) Size() int {
	n := HelloMinSize + min(len(f.Name), HelloMaxName)
	if f.Features != 0 {
		n += HelloFeaturesSize
	}
	return n
}

// AppendHello appends the encoded hello to b.
func AppendHello(b []byte, f *HelloFields) []byte {
	n := f.Size()
	start := len(b)
	b = append(b, make([]byte, n)...)
	h := b[start:]
	binary.BigEndian.PutUint32(h[helloMagicOff:], HelloMagic)
	binary.BigEndian.PutUint16(h[helloVersionOff:], f.Version)
	h[helloLinkOff] = uint8(f.LinkLayer)
	h[helloRoleOff] = uint8(f.Role)
	binary.BigEndian.PutUint16(h[helloStatusOff:], f.Status)
	binary.BigEndian.PutUint16(h[helloMaxFrameOff:], f.MaxFrame)
	copy(h[helloMACOff:], f.MAC[:])
	h[helloPortNumOff] = f.PortNum
	nameLen := min(len(f.Name), HelloMaxName)
	h[helloNameLenOff] = uint8(nameLen)
	binary.BigEndian.PutUint64(h[helloPortGUIDOff:], f.PortGUID)
	binary.BigEndian.PutUint64(h[helloNodeGUIDOff:], f.NodeGUID)
	copy(h[helloNameOff:helloNameOff+nameLen], f.Name)
	if f.Features != 0 {
		binary.BigEndian.PutUint32(h[helloNameOff+nameLen:], f.Features)
	}
	return b
}

// Fields decodes the hello.
func (h Hello) Fields() HelloFields {
	f := HelloFields{
		Version: h.Version(), LinkLayer: h.LinkLayer(), Role: h.Role(), Status: h.Status(),
		MaxFrame: h.MaxFrame(), PortNum: h.PortNum(), PortGUID: h.PortGUID(), NodeGUID: h.NodeGUID(),
		Name:     string(bytes.ToValidUTF8(h.Name(), []byte("?"))),
		Features: h.Features(),
	}
	copy(f.MAC[:], h.MAC())
	return f
}
