package proto

import "encoding/binary"

// PortCountersExtended (IBA 16.1.4.11, table 264), 72 bytes of the
// PerfMgt data, 64-bit counters that do not saturate in practice:
//
//	offset  bits  field
//	     0     8  Reserved
//	     1     8  PortSelect
//	     2    16  CounterSelect (bit i selects counter i below)
//	     4    32  Reserved
//	     8    64  PortXmitData (in units of 4 octets)
//	    16    64  PortRcvData  (in units of 4 octets)
//	    24    64  PortXmitPkts
//	    32    64  PortRcvPkts
//	    40    64  PortUnicastXmitPkts
//	    48    64  PortUnicastRcvPkts
//	    56    64  PortMulticastXmitPkts
//	    64    64  PortMulticastRcvPkts
//
// A Set clears the counters CounterSelect selects (bits 0..7 in the
// order above). A PMA offers the attribute with ClassPortInfo's
// PMACapExtendedWidth (all eight counters).
const (
	pceReserved      = 0
	pcePortSelect    = 1
	pceCounterSelect = 2
	pceReserved1     = 4
	pceCounters      = 8

	// PortCountersExtendedSize is the size of PortCountersExtended.
	PortCountersExtendedSize = 72
	// PortCountersExtendedNum is the number of its counters.
	PortCountersExtendedNum = 8
)

// PortCountersExtended is a view of the PortCountersExtended attribute.
type PortCountersExtended []byte

// ParsePortCountersExtended checks that b holds PortCountersExtendedSize
// bytes and returns a view of them.
func ParsePortCountersExtended(b []byte) (PortCountersExtended, error) {
	if len(b) < PortCountersExtendedSize {
		return nil, ErrMADTruncated
	}
	return PortCountersExtended(b[:PortCountersExtendedSize]), nil
}

// PortSelect returns the port the counters are for.
func (c PortCountersExtended) PortSelect() uint8 { return c[pcePortSelect] }

// CounterSelect returns the select mask (bit i: counter i).
func (c PortCountersExtended) CounterSelect() uint16 {
	return binary.BigEndian.Uint16(c[pceCounterSelect:])
}

// Counter returns counter i (0 PortXmitData .. 7 PortMulticastRcvPkts).
func (c PortCountersExtended) Counter(i int) uint64 {
	return binary.BigEndian.Uint64(c[pceCounters+8*i:])
}

// PortCountersExtendedFields holds the fields of PortCountersExtended to
// encode.
type PortCountersExtendedFields struct {
	PortSelect    uint8  // port, or PMAPortSelectAll
	CounterSelect uint16 // bit i selects Counters[i]
	// Counters are PortXmitData and PortRcvData (4-octet words),
	// PortXmitPkts, PortRcvPkts, PortUnicastXmitPkts,
	// PortUnicastRcvPkts, PortMulticastXmitPkts and
	// PortMulticastRcvPkts.
	Counters [PortCountersExtendedNum]uint64
}

// Encode writes every field of f and zeroes the reserved bytes; c must
// hold PortCountersExtendedSize bytes.
func (c PortCountersExtended) Encode(f *PortCountersExtendedFields) {
	c[pceReserved] = 0
	c[pcePortSelect] = f.PortSelect
	binary.BigEndian.PutUint16(c[pceCounterSelect:], f.CounterSelect)
	binary.BigEndian.PutUint32(c[pceReserved1:], 0)
	for i, v := range f.Counters {
		binary.BigEndian.PutUint64(c[pceCounters+8*i:], v)
	}
}

// Fields decodes the view into a PortCountersExtendedFields.
func (c PortCountersExtended) Fields() PortCountersExtendedFields {
	f := PortCountersExtendedFields{PortSelect: c.PortSelect(), CounterSelect: c.CounterSelect()}
	for i := range f.Counters {
		f.Counters[i] = c.Counter(i)
	}
	return f
}
