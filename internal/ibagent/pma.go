package ibagent

import "github.com/PacketFive/hinic/internal/proto"

// PMARespTimeValue is the PMA's ClassPortInfo.RespTimeValue (4.096 µs ×
// 2^18, about one second), what ibsim reports.
const PMARespTimeValue = 0x12

// PMACapabilityMask is the PMA's ClassPortInfo.CapabilityMask for a
// plain CounterSource: only AllPortSelect; no PortXmitWait. An
// ExtendedCounterSource adds PMACapExtendedWidth.
const PMACapabilityMask = proto.PMACapAllPortSelect

// CounterSource is a node's port counters as its PMA reads them.
type CounterSource interface {
	// PortCounters returns the counters of the port PortSelect sel names
	// (proto.PMAPortSelectAll: every port's, summed), after clearing
	// those csel and csel2 select when clear is set (a Set); ok is false
	// when the node has no such port.
	PortCounters(sel uint8, clear bool, csel uint16, csel2 uint8) (f proto.PortCountersFields, ok bool)
}

// ServePMA answers a PerfMgt request in place and returns the status:
// ClassPortInfo (Get) and PortCounters (Get, and Set to clear the
// counters CounterSelect names) for the ports src has (IBA 16.1.3.5), and
// PortCountersExtended (16.1.4.11) when src is an ExtendedCounterSource.
// A method other than Get and Set is 0x0008, a ClassVersion other than
// 1 is 0x0004, another attribute or a Set of ClassPortInfo is 0x000C and
// a port the node does not have is 0x001C.
func ServePMA(m proto.PerfMgtMAD, src CounterSource) uint16 {
	method := m.Method()
	if method != proto.MADMethodGet && method != proto.MADMethodSet {
		return proto.MADStatusMethodUnsupported
	}
	if m.ClassVersion() != proto.PerfMgtClassVersion {
		return proto.MADStatusBadVersion
	}
	data := m.Data()
	ext, hasExt := src.(ExtendedCounterSource)
	switch m.AttributeID() {
	case proto.PMAAttrClassPortInfo:
		if method == proto.MADMethodSet {
			return proto.MADStatusMethodAttrUnsupported
		}
		capMask := uint16(PMACapabilityMask)
		if hasExt {
			capMask |= proto.PMACapExtendedWidth
		}
		clear(data)
		proto.ClassPortInfo(data[:proto.ClassPortInfoSize]).Encode(&proto.ClassPortInfoFields{
			BaseVersion:    proto.MADBaseVersion,
			ClassVersion:   proto.PerfMgtClassVersion,
			CapabilityMask: capMask,
			RespTimeValue:  PMARespTimeValue,
		})
	case proto.PMAAttrPortCountersExtended:
		if !hasExt {
			return proto.MADStatusMethodAttrUnsupported
		}
		pc := proto.PortCountersExtended(data[:proto.PortCountersExtendedSize])
		sel, csel := pc.PortSelect(), pc.CounterSelect()
		f, ok := ext.PortCountersExtended(sel, method == proto.MADMethodSet, csel)
		if !ok {
			return proto.MADStatusInvalidField
		}
		f.PortSelect, f.CounterSelect = sel, csel
		clear(data)
		pc.Encode(&f)
	case proto.PMAAttrPortCounters:
		pc := proto.PortCounters(data[:proto.PortCountersSize])
		sel, csel, csel2 := pc.PortSelect(), pc.CounterSelect(), pc.CounterSelect2()
		f, ok := src.PortCounters(sel, method == proto.MADMethodSet, csel, csel2)
		if !ok {
			return proto.MADStatusInvalidField
		}
		f.PortSelect, f.CounterSelect, f.CounterSelect2 = sel, csel, csel2
		clear(data)
		pc.Encode(&f)
	default:
		return proto.MADStatusMethodAttrUnsupported
	}
	return proto.MADStatusOK
}
