package shmport

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The setup message is the dialling side's first message after a hello
// exchange in which both sides offered shared memory. It carries the ring
// geometry; its SCM_RIGHTS control message carries the memfd and the four
// eventfds, in the order of the Fd constants. A setup with Entries 0
// declines: both sides stay on the socket, and no descriptors are sent.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     Magic "HSHM" (0x4853484D)                 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           Version             |           Reserved            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Entries (slots per ring, 2^n)                 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 BufSize (bytes per slot buffer)               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 RegionSize (8 octets)                         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// The accepting side answers with an 8-byte message: Magic, a 2-byte
// Status (the Status constants) and 2 reserved bytes. Any status but
// StatusOK leaves both sides on the socket. Numbers are big-endian.
const (
	// SetupMagic is "HSHM" read big-endian.
	SetupMagic = 0x4853484D
	// SetupVersion is the version this package speaks.
	SetupVersion = 1
	// SetupSize is the size of a setup message.
	SetupSize = 24
	// AnswerSize is the size of the answer.
	AnswerSize = 8

	setupMagicOff   = 0
	setupVersionOff = 4
	setupEntriesOff = 8
	setupBufSizeOff = 12
	setupRegionOff  = 16
)

// Descriptor order in the setup's SCM_RIGHTS message.
const (
	FdRegion    = iota // the memfd
	FdUpData           // ring 0 (dialler to acceptor): wakes its consumer
	FdUpSpace          // ring 0: wakes its producer
	FdDownData         // ring 1 (acceptor to dialler): wakes its consumer
	FdDownSpace        // ring 1: wakes its producer
	NumFds
)

// Answer statuses.
const (
	StatusOK        = 0 // the rings are mapped; frames flow through them
	StatusDeclined  = 1 // the dialler sent Entries 0: stay on the socket
	StatusBadSetup  = 2 // malformed setup or geometry out of range
	StatusTooBig    = 3 // the region is larger than the port's budget
	StatusBadFds    = 4 // missing descriptors, or not a sealed memfd and eventfds
	StatusMapFailed = 5 // the acceptor could not map the region
	numStatus       = 6
)

var statusText = [numStatus]string{"ok", "declined", "bad setup", "region over budget", "bad descriptors", "map failed"}

// StatusText describes an answer status.
func StatusText(s uint16) string {
	if int(s) < len(statusText) {
		return statusText[s]
	}
	return "unknown status"
}

// Geometry bounds.
const (
	MinEntries = 16
	MaxEntries = 4096
	MinBufSize = 256
	MaxBufSize = 64 << 10
	// bufAlign keeps every slot buffer on its own cache lines.
	bufAlign = 64
	pageSize = 4096
)

// Errors of the wire and the rings.
var (
	ErrMalformed = errors.New("shmport: malformed message")
	ErrGeometry  = errors.New("shmport: ring geometry out of range")
	ErrCorrupt   = errors.New("shmport: peer's ring index out of range")
	ErrTooBig    = errors.New("shmport: frame larger than a slot")
	ErrClosed    = errors.New("shmport: closed")
)

// Geometry is the shape of a ring pair: Entries slots per ring (a power
// of two), BufSize bytes per slot buffer (a multiple of 64).
type Geometry struct {
	Entries uint32
	BufSize uint32
}

// Validate checks the bounds.
func (g Geometry) Validate() error {
	switch {
	case g.Entries < MinEntries || g.Entries > MaxEntries || g.Entries&(g.Entries-1) != 0:
		return fmt.Errorf("%w: %d entries (want a power of two, %d to %d)", ErrGeometry, g.Entries, MinEntries, MaxEntries)
	case g.BufSize < MinBufSize || g.BufSize > MaxBufSize || g.BufSize%bufAlign != 0:
		return fmt.Errorf("%w: buffer size %d (want a multiple of %d, %d to %d)", ErrGeometry, g.BufSize, bufAlign, MinBufSize, MaxBufSize)
	}
	return nil
}

// GeometryFor returns the geometry of entries slots that hold frames of
// up to maxFrame bytes.
func GeometryFor(entries, maxFrame int) Geometry {
	b := (max(maxFrame, MinBufSize) + bufAlign - 1) &^ (bufAlign - 1)
	return Geometry{Entries: uint32(entries), BufSize: uint32(b)}
}

// Ring layout, from the start of each ring. The indices and the waiting
// words each have a cache line, so the two sides do not share lines they
// both write.
const (
	ringHeadOff     = 0   // u32, written by the producer
	ringTailOff     = 64  // u32, written by the consumer
	ringConsWaitOff = 128 // u32, set by a consumer about to sleep
	ringProdWaitOff = 192 // u32, set by a producer about to sleep
	ringDescOff     = 256 // Entries descriptors
	descSize        = 16  // offset u32, length u32, 8 reserved bytes
)

// ringSize is the size of one ring, control block, descriptors and
// buffers, rounded to pages.
func (g Geometry) ringSize() uint64 {
	n := uint64(ringDescOff) + uint64(g.Entries)*descSize
	n = (n + bufAlign - 1) &^ (bufAlign - 1)
	n += uint64(g.Entries) * uint64(g.BufSize)
	return (n + pageSize - 1) &^ (pageSize - 1)
}

// bufOff is where a ring's buffer area starts.
func (g Geometry) bufOff() uint64 {
	n := uint64(ringDescOff) + uint64(g.Entries)*descSize
	return (n + bufAlign - 1) &^ (bufAlign - 1)
}

// RegionSize is the size of the memfd: two rings.
func (g Geometry) RegionSize() uint64 { return 2 * g.ringSize() }

// Setup is a decoded setup message.
type Setup struct {
	Version    uint16
	Geometry   Geometry
	RegionSize uint64
}

// AppendSetup appends the encoded setup to b.
func AppendSetup(b []byte, s *Setup) []byte {
	var m [SetupSize]byte
	binary.BigEndian.PutUint32(m[setupMagicOff:], SetupMagic)
	binary.BigEndian.PutUint16(m[setupVersionOff:], s.Version)
	binary.BigEndian.PutUint32(m[setupEntriesOff:], s.Geometry.Entries)
	binary.BigEndian.PutUint32(m[setupBufSizeOff:], s.Geometry.BufSize)
	binary.BigEndian.PutUint64(m[setupRegionOff:], s.RegionSize)
	return append(b, m[:]...)
}

// ParseSetup decodes a setup message. It checks the size and magic only;
// Check judges the contents.
func ParseSetup(b []byte) (Setup, error) {
	if len(b) != SetupSize || binary.BigEndian.Uint32(b[setupMagicOff:]) != SetupMagic {
		return Setup{}, ErrMalformed
	}
	return Setup{
		Version: binary.BigEndian.Uint16(b[setupVersionOff:]),
		Geometry: Geometry{Entries: binary.BigEndian.Uint32(b[setupEntriesOff:]),
			BufSize: binary.BigEndian.Uint32(b[setupBufSizeOff:])},
		RegionSize: binary.BigEndian.Uint64(b[setupRegionOff:]),
	}, nil
}

// Declined reports whether the setup declines shared memory.
func (s *Setup) Declined() bool { return s.Geometry.Entries == 0 }

// Check returns the status an acceptor answers a setup with, given the
// largest region it accepts and the largest frame of the port: a slot
// must hold a whole frame.
func (s *Setup) Check(budget uint64, maxFrame int) uint16 {
	switch {
	case s.Version != SetupVersion:
		return StatusBadSetup
	case s.Declined():
		return StatusDeclined
	case s.Geometry.Validate() != nil:
		return StatusBadSetup
	case s.RegionSize != s.Geometry.RegionSize():
		return StatusBadSetup
	case int(s.Geometry.BufSize) < maxFrame:
		return StatusBadSetup
	case s.RegionSize > budget:
		return StatusTooBig
	}
	return StatusOK
}

// AppendAnswer appends an answer with status st to b.
func AppendAnswer(b []byte, st uint16) []byte {
	var m [AnswerSize]byte
	binary.BigEndian.PutUint32(m[0:], SetupMagic)
	binary.BigEndian.PutUint16(m[4:], st)
	return append(b, m[:]...)
}

// ParseAnswer decodes an answer.
func ParseAnswer(b []byte) (uint16, error) {
	if len(b) != AnswerSize || binary.BigEndian.Uint32(b) != SetupMagic {
		return 0, ErrMalformed
	}
	return binary.BigEndian.Uint16(b[4:]), nil
}
