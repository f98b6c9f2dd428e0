package proto

import (
	"encoding/binary"
)

// GUIDInfo (IBA 14.2.5.5, table 149), 64 bytes per block; the attribute
// modifier is the block number:
//
//	offset  bits  field
//	   8*i    64  GUID 8*block + i (i = 0..7); GUID 0 is the port GUID
const (
	// GUIDInfoSize is the size of one GUIDInfo block.
	GUIDInfoSize = 64
	// GUIDInfoEntriesPerBlock is the number of GUIDs per block.
	GUIDInfoEntriesPerBlock = 8
)

// GUIDInfo is a view of one block of the GUIDInfo attribute.
type GUIDInfo []byte

// ParseGUIDInfo checks that b holds GUIDInfoSize bytes and returns a view of
// them.
func ParseGUIDInfo(b []byte) (GUIDInfo, error) {
	if len(b) < GUIDInfoSize {
		return nil, ErrMADTruncated
	}
	return GUIDInfo(b[:GUIDInfoSize]), nil
}

// GUID returns GUID i (0..7).
func (g GUIDInfo) GUID(i int) uint64 { return binary.BigEndian.Uint64(g[8*i:]) }

// SetGUID writes GUID i (0..7).
func (g GUIDInfo) SetGUID(i int, guid uint64) { binary.BigEndian.PutUint64(g[8*i:], guid) }

// GUIDInfoFields holds one GUIDInfo block to encode.
type GUIDInfoFields struct {
	// GUIDs holds the 8 GUIDs of the block.
	GUIDs [GUIDInfoEntriesPerBlock]uint64
}

// Encode writes every entry of f; g must hold GUIDInfoSize bytes.
func (g GUIDInfo) Encode(f *GUIDInfoFields) {
	for i, v := range f.GUIDs {
		binary.BigEndian.PutUint64(g[8*i:], v)
	}
}

// Fields decodes the view into a GUIDInfoFields.
func (g GUIDInfo) Fields() GUIDInfoFields {
	var f GUIDInfoFields
	for i := range f.GUIDs {
		f.GUIDs[i] = g.GUID(i)
	}
	return f
}
