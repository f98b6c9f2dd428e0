package proto

import "encoding/binary"

// MAC Control frames (IEEE 802.3 clause 31), EtherType 0x8808. HiNIC uses
// two: the 802.3x PAUSE (opcode 0x0001) and the 802.1Qbb priority-based flow
// control frame (opcode 0x0101, IEEE 802.3 Annex 31D):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        Opcode 0x0101          |   reserved    | enable e[7:0] |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           time[0]             |           time[1]             |
//	|              ...              |           time[7]             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Times are in pause quanta of 512 bit times; a zero time with the enable
// bit set resumes that priority (XON).
const (
	// MACControlOpcodePause is the 802.3x PAUSE opcode.
	MACControlOpcodePause = 0x0001
	// MACControlOpcodePFC is the 802.1Qbb class-based flow control opcode.
	MACControlOpcodePFC = 0x0101
	// PFCSize is the size of a PFC PDU: opcode, enable vector, 8 times.
	PFCSize = 20
	// PauseSize is the size of a PAUSE PDU: opcode and one time.
	PauseSize = 4
	// PFCPriorities is the number of priorities PFC controls.
	PFCPriorities = 8
	// PauseQuantumBits is the length of one pause quantum in bit times.
	PauseQuantumBits = 512
)

// PFCDestMAC is the reserved multicast address MAC Control frames go to
// (IEEE 802.1Q table 8-1); bridges never forward it.
var PFCDestMAC = [6]byte{0x01, 0x80, 0xC2, 0x00, 0x00, 0x01}

// MACControl is a view of a MAC Control PDU, starting at its opcode.
type MACControl []byte

func (m MACControl) validate() error {
	switch m.Opcode() {
	case MACControlOpcodePFC:
		if len(m) < PFCSize {
			return ErrTruncated
		}
	case MACControlOpcodePause:
		if len(m) < PauseSize {
			return ErrTruncated
		}
	}
	return nil
}

// Opcode returns the MAC Control opcode.
func (m MACControl) Opcode() uint16 { return binary.BigEndian.Uint16(m) }

// IsPFC reports whether this is a PFC frame.
func (m MACControl) IsPFC() bool { return m.Opcode() == MACControlOpcodePFC }

// IsPause reports whether this is an 802.3x PAUSE frame.
func (m MACControl) IsPause() bool { return m.Opcode() == MACControlOpcodePause }

// PauseTime returns the PAUSE frame's time in quanta.
func (m MACControl) PauseTime() uint16 { return binary.BigEndian.Uint16(m[2:]) }

// PFCEnable returns the PFC priority-enable vector (bit n is priority n).
func (m MACControl) PFCEnable() uint8 { return m[3] }

// PFCTime returns the PFC pause time of priority prio (0-7) in quanta.
func (m MACControl) PFCTime(prio int) uint16 {
	return binary.BigEndian.Uint16(m[4+2*(prio&7):])
}

// PFCFields holds a PFC frame's enable vector and per-priority times.
type PFCFields struct {
	Enable uint8
	Time   [PFCPriorities]uint16
}

// EncodePFC writes a PFC PDU; m must hold PFCSize bytes.
func (m MACControl) EncodePFC(f *PFCFields) {
	binary.BigEndian.PutUint16(m, MACControlOpcodePFC)
	m[2] = 0
	m[3] = f.Enable
	for i, t := range f.Time {
		binary.BigEndian.PutUint16(m[4+2*i:], t)
	}
}

// EncodePause writes an 802.3x PAUSE PDU; m must hold PauseSize bytes.
func (m MACControl) EncodePause(quanta uint16) {
	binary.BigEndian.PutUint16(m, MACControlOpcodePause)
	binary.BigEndian.PutUint16(m[2:], quanta)
}

// BuildPFC writes a complete PFC frame from src to PFCDestMAC into buf,
// zero-padded to the Ethernet minimum, and returns its length.
func BuildPFC(buf []byte, src [6]byte, f *PFCFields) (int, error) {
	if len(buf) < EthernetMinFrameSize {
		return 0, ErrShortBuffer
	}
	clear(buf[:EthernetMinFrameSize])
	Ethernet(buf).Encode(&EthernetFields{Dst: PFCDestMAC, Src: src, EtherType: EtherTypeMACControl})
	MACControl(buf[EthernetHeaderSize:]).EncodePFC(f)
	return EthernetMinFrameSize, nil
}
