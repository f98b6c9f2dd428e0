package proto

import (
	"bytes"
	"unicode/utf8"
)

// NodeDescription (IBA 14.2.5.2, table 147), 64 bytes:
//
//	offset  bits  field
//	     0   512  NodeString: UTF-8, padded with NULs when shorter than 64
//	              bytes (a 64-byte string has no terminator)
const (
	// NodeDescriptionSize is the size of NodeDescription.
	NodeDescriptionSize = 64
)

// NodeDescription is a view of the NodeDescription attribute.
type NodeDescription []byte

// ParseNodeDescription checks that b holds NodeDescriptionSize bytes and
// returns a view of them.
func ParseNodeDescription(b []byte) (NodeDescription, error) {
	if len(b) < NodeDescriptionSize {
		return nil, ErrMADTruncated
	}
	return NodeDescription(b[:NodeDescriptionSize]), nil
}

// NodeString returns the description: the bytes before the first NUL, or
// all 64 bytes if there is none. The result aliases the view.
func (d NodeDescription) NodeString() []byte {
	s := d[:NodeDescriptionSize]
	if i := bytes.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// NodeDescriptionFields holds the fields of NodeDescription to encode.
type NodeDescriptionFields struct {
	// NodeString is the description. Encode truncates it to 64 bytes at a
	// UTF-8 character boundary.
	NodeString string
}

// Encode writes f.NodeString, truncated to 64 bytes without splitting a
// UTF-8 character, and pads the rest of the 64 bytes with NULs. d must hold
// NodeDescriptionSize bytes.
func (d NodeDescription) Encode(f *NodeDescriptionFields) {
	s := f.NodeString
	if len(s) > NodeDescriptionSize {
		// Back up over at most UTFMax-1 continuation bytes so as not to
		// split a character; invalid UTF-8 is cut at 64 bytes regardless.
		n := NodeDescriptionSize
		for n > NodeDescriptionSize-utf8.UTFMax+1 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	n := copy(d[:NodeDescriptionSize], s)
	clear(d[n:NodeDescriptionSize])
}

// Fields decodes the view into a NodeDescriptionFields. Unlike the
// accessors it allocates, for the string.
func (d NodeDescription) Fields() NodeDescriptionFields {
	return NodeDescriptionFields{NodeString: string(d.NodeString())}
}
