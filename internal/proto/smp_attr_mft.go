package proto

import (
	"encoding/binary"
)

// MulticastForwardingTable (IBA 14.2.5.12, table 156), 64 bytes per block:
//
//	offset  bits  field
//	   2*i    16  PortMask for MLID 0xC000 + 32*block + i (i = 0..31): bit j
//	              set means forward to port 16*position + j
//
// The attribute modifier selects the block and the 16-port slice:
//
//	bits 31:28  PortMask position (ports 16*position .. 16*position+15)
//	bits 27:9   reserved
//	bits  8:0   block number
const (
	// MulticastForwardingTableSize is the size of one MFT block.
	MulticastForwardingTableSize = 64
	// MFTEntriesPerBlock is the number of MLIDs per MFT block.
	MFTEntriesPerBlock = 32
	// MFTPortsPerPosition is the number of ports in one PortMask.
	MFTPortsPerPosition = 16
	// MFTMLIDBase is the first multicast LID, entry 0 of block 0.
	MFTMLIDBase = 0xC000

	mftAMPositionShift = 28
	mftAMBlockMask     = 0x1FF
)

// MFTAttrMod builds a MulticastForwardingTable attribute modifier from the
// port-mask position (4 bits) and the block number (9 bits); excess bits
// are dropped.
func MFTAttrMod(position uint8, block uint16) uint32 {
	return uint32(position&0x0F)<<mftAMPositionShift | uint32(block)&mftAMBlockMask
}

// MFTAttrModParts splits a MulticastForwardingTable attribute modifier into
// the port-mask position and the block number, ignoring reserved bits.
func MFTAttrModParts(attrMod uint32) (position uint8, block uint16) {
	return uint8(attrMod >> mftAMPositionShift), uint16(attrMod & mftAMBlockMask)
}

// MFTBlockMLID returns the MLID of entry i of MFT block block.
func MFTBlockMLID(block uint16, i int) uint16 {
	return MFTMLIDBase + block*MFTEntriesPerBlock + uint16(i)
}

// MFTMLIDBlock returns the MFT block and entry that hold mlid; ok is false
// when mlid is below MFTMLIDBase (not multicast).
func MFTMLIDBlock(mlid uint16) (block uint16, i int, ok bool) {
	if mlid < MFTMLIDBase {
		return 0, 0, false
	}
	off := mlid - MFTMLIDBase
	return off / MFTEntriesPerBlock, int(off % MFTEntriesPerBlock), true
}

// MulticastForwardingTable is a view of one block of the
// MulticastForwardingTable attribute.
type MulticastForwardingTable []byte

// ParseMulticastForwardingTable checks that b holds
// MulticastForwardingTableSize bytes and returns a view of them.
func ParseMulticastForwardingTable(b []byte) (MulticastForwardingTable, error) {
	if len(b) < MulticastForwardingTableSize {
		return nil, ErrMADTruncated
	}
	return MulticastForwardingTable(b[:MulticastForwardingTableSize]), nil
}

// PortMask returns the 16-bit port mask of entry i (0..31).
func (t MulticastForwardingTable) PortMask(i int) uint16 {
	return binary.BigEndian.Uint16(t[2*i:])
}

// SetPortMask writes the port mask of entry i (0..31).
func (t MulticastForwardingTable) SetPortMask(i int, mask uint16) {
	binary.BigEndian.PutUint16(t[2*i:], mask)
}

// MulticastForwardingTableFields holds one MFT block to encode.
type MulticastForwardingTableFields struct {
	// PortMasks holds the port mask of each of the 32 MLIDs of the block.
	PortMasks [MFTEntriesPerBlock]uint16
}

// Encode writes every entry of f; t must hold MulticastForwardingTableSize
// bytes.
func (t MulticastForwardingTable) Encode(f *MulticastForwardingTableFields) {
	for i, m := range f.PortMasks {
		binary.BigEndian.PutUint16(t[2*i:], m)
	}
}

// Fields decodes the view into a MulticastForwardingTableFields.
func (t MulticastForwardingTable) Fields() MulticastForwardingTableFields {
	var f MulticastForwardingTableFields
	for i := range f.PortMasks {
		f.PortMasks[i] = t.PortMask(i)
	}
	return f
}
