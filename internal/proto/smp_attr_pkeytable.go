package proto

import (
	"encoding/binary"
)

// P_KeyTable (IBA 14.2.5.7, table 151), 64 bytes per block:
//
//	offset  bits  field
//	   2*i     1  Membership type of P_Key 32*block + i: 1 full, 0 limited
//	          15  P_Key base value
//
// The attribute modifier is (port << 16) | block; a CA ignores the port and
// answers for the receiving port, a switch uses it for external ports.
const (
	// PKeyTableSize is the size of one P_KeyTable block.
	PKeyTableSize = 64
	// PKeyTableEntriesPerBlock is the number of P_Keys per block.
	PKeyTableEntriesPerBlock = 32
	// PKeyMembershipFull is the full-membership bit of a P_Key.
	PKeyMembershipFull = 0x8000
	// PKeyBaseMask masks the 15-bit base value of a P_Key.
	PKeyBaseMask = 0x7FFF
)

// PKeyTableAttrMod builds a P_KeyTable attribute modifier.
func PKeyTableAttrMod(port, block uint16) uint32 { return uint32(port)<<16 | uint32(block) }

// PKeyTableAttrModParts splits a P_KeyTable attribute modifier into the
// port number (bits 31:16) and the block number (bits 15:0).
func PKeyTableAttrModParts(attrMod uint32) (port, block uint16) {
	return uint16(attrMod >> 16), uint16(attrMod)
}

// PKeyTable is a view of one block of the P_KeyTable attribute.
type PKeyTable []byte

// ParsePKeyTable checks that b holds PKeyTableSize bytes and returns a view
// of them.
func ParsePKeyTable(b []byte) (PKeyTable, error) {
	if len(b) < PKeyTableSize {
		return nil, ErrMADTruncated
	}
	return PKeyTable(b[:PKeyTableSize]), nil
}

// PKey returns P_Key i (0..31), membership bit included.
func (t PKeyTable) PKey(i int) uint16 { return binary.BigEndian.Uint16(t[2*i:]) }

// SetPKey writes P_Key i (0..31).
func (t PKeyTable) SetPKey(i int, key uint16) { binary.BigEndian.PutUint16(t[2*i:], key) }

// PKeyTableFields holds one P_KeyTable block to encode.
type PKeyTableFields struct {
	// PKeys holds the 32 P_Keys, membership bit included.
	PKeys [PKeyTableEntriesPerBlock]uint16
}

// Encode writes every entry of f; t must hold PKeyTableSize bytes.
func (t PKeyTable) Encode(f *PKeyTableFields) {
	for i, k := range f.PKeys {
		binary.BigEndian.PutUint16(t[2*i:], k)
	}
}

// Fields decodes the view into a PKeyTableFields.
func (t PKeyTable) Fields() PKeyTableFields {
	var f PKeyTableFields
	for i := range f.PKeys {
		f.PKeys[i] = t.PKey(i)
	}
	return f
}
