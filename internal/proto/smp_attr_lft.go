package proto

// LinearForwardingTable (IBA 14.2.5.10, table 154), 64 bytes per block; the
// attribute modifier is the block number:
//
//	offset  bits  field
//	     i     8  Port: egress port for LID 64*block + i (i = 0..63);
//	              LFTPortDrop (0xFF) drops packets for that LID
const (
	// LinearForwardingTableSize is the size of one LFT block.
	LinearForwardingTableSize = 64
	// LFTEntriesPerBlock is the number of LIDs per LFT block.
	LFTEntriesPerBlock = 64
	// LFTPortDrop is the port entry that marks a LID invalid (dropped).
	LFTPortDrop = 0xFF
)

// LFTBlockLID returns the LID of entry i of LFT block block.
func LFTBlockLID(block uint32, i int) uint16 {
	return uint16(block*LFTEntriesPerBlock + uint32(i))
}

// LFTLIDBlock returns the LFT block (attribute modifier) and the entry
// within it that hold lid.
func LFTLIDBlock(lid uint16) (block uint32, i int) {
	return uint32(lid) / LFTEntriesPerBlock, int(lid % LFTEntriesPerBlock)
}

// LinearForwardingTable is a view of one block of the
// LinearForwardingTable attribute.
type LinearForwardingTable []byte

// ParseLinearForwardingTable checks that b holds LinearForwardingTableSize
// bytes and returns a view of them.
func ParseLinearForwardingTable(b []byte) (LinearForwardingTable, error) {
	if len(b) < LinearForwardingTableSize {
		return nil, ErrMADTruncated
	}
	return LinearForwardingTable(b[:LinearForwardingTableSize]), nil
}

// Port returns the egress port of entry i (0..63).
func (t LinearForwardingTable) Port(i int) uint8 { return t[i] }

// Ports returns the 64 port entries, aliasing the view.
func (t LinearForwardingTable) Ports() []byte { return t[:LFTEntriesPerBlock] }

// SetPort writes the egress port of entry i (0..63).
func (t LinearForwardingTable) SetPort(i int, port uint8) { t[i] = port }

// LinearForwardingTableFields holds one LFT block to encode.
type LinearForwardingTableFields struct {
	// Ports holds the egress port for each of the 64 LIDs of the block.
	Ports [LFTEntriesPerBlock]uint8
}

// Encode writes every entry of f; t must hold LinearForwardingTableSize
// bytes.
func (t LinearForwardingTable) Encode(f *LinearForwardingTableFields) { copy(t, f.Ports[:]) }

// Fields decodes the view into a LinearForwardingTableFields.
func (t LinearForwardingTable) Fields() LinearForwardingTableFields {
	var f LinearForwardingTableFields
	copy(f.Ports[:], t)
	return f
}
