package ibsw

import (
	"math"

	"github.com/PacketFive/hinic/internal/proto"
)

// Counters are the PortCounters of one port (IBA 16.1.3.5), kept 64 bits
// wide like PortCountersExtended so that `hinic fabric status` can show
// totals. The PMA reports them saturated to the widths of PortCounters, so
// a PMA client sees exactly the IBA behaviour: a counter stops at its
// maximum until cleared. Data counters are in units of 4 octets, counted
// over the whole packet from the LRH through the VCRC.
type Counters struct {
	SymbolErrors             uint64 // SymbolErrorCounter (never: no physical layer)
	LinkErrorRecovery        uint64 // LinkErrorRecoveryCounter (never)
	LinkDowned               uint64 // LinkDownedCounter: link up -> down transitions
	RcvErrors                uint64 // PortRcvErrors: malformed packets, bad VCRC, bad ICRC at port 0
	RcvRemotePhysicalErrors  uint64 // PortRcvRemotePhysicalErrors (never)
	RcvSwitchRelayErrors     uint64 // PortRcvSwitchRelayErrors: no route, loop, no VL for the SL
	XmitDiscards             uint64 // PortXmitDiscards: egress port not in a state to send
	XmitConstraintErrors     uint64 // PortXmitConstraintErrors: outbound P_Key / raw filter
	RcvConstraintErrors      uint64 // PortRcvConstraintErrors: inbound P_Key / raw filter
	LocalLinkIntegrityErrors uint64 // (never)
	ExcessiveBufferOverrun   uint64 // (never)
	QP1Dropped               uint64 // QP1Dropped: GMPs for port 0 that were dropped
	VL15Dropped              uint64 // VL15Dropped: SMPs dropped (bad VL15 use, bad directed route)
	XmitData                 uint64 // PortXmitData, 4-octet units
	RcvData                  uint64 // PortRcvData, 4-octet units
	XmitPkts                 uint64 // PortXmitPkts
	RcvPkts                  uint64 // PortRcvPkts (including packets with errors)
	XmitWait                 uint64 // PortXmitWait (never: no flow control is modelled)
}

// Drops counts, switch-wide, why packets were dropped. Each drop is also
// counted in the PortCounters of the port involved.
type Drops struct {
	BadPort         uint64 // Ingress called with a port outside 1..NumPorts
	LinkDown        uint64 // arrived on a port whose link is down or disabled
	Malformed       uint64 // LRH/PktLen/LVer/LNH inconsistent with the bytes
	BadVCRC         uint64 // VCRC mismatch
	BadICRC         uint64 // ICRC mismatch on a packet for port 0
	IngressState    uint64 // data packet on a port that is not Active (or Armed)
	NoRoute         uint64 // unicast DLID without a valid LFT entry, or 0
	Loop            uint64 // unicast LFT entry equal to the ingress port
	NoMulticastPort uint64 // MLID outside the MFT or with an empty port mask
	EgressState     uint64 // egress port not Active (data) or not at least Init (VL15)
	SLToVL          uint64 // SL beyond the egress port's OperationalVLs
	Partition       uint64 // P_Key enforcement (inbound or outbound)
	RawFilter       uint64 // raw packet filtered (inbound or outbound)
	VL15            uint64 // VL15 misuse: non-SMP on VL15, SMP on a data VL, multicast SMP
	DirectedRoute   uint64 // directed-route hop checks failed (C14-9/C14-13)
	DRUnsupported   uint64 // directed route with a LID-routed part (DrSLID/DrDLID not 0xFFFF)
	MAD             uint64 // MAD for port 0 that gets no answer (response, trap, bad BaseVersion, bad Q_Key)
	MKey            uint64 // SMP dropped for a wrong M_Key (an M_Key violation, IBA 14.2.4)
	NoQP            uint64 // packet for port 0 to a QP other than 0 and 1
}

// clearSelected clears the counters that a PortCounters Set selects
// (IBA 16.1.3.5: CounterSelect; CounterSelect2 bit 0 is PortXmitWait).
func (c *Counters) clearSelected(sel uint16, sel2 uint8) {
	clears := []struct {
		bit uint16
		ctr *uint64
	}{
		{proto.PortCountersSelectSymbolError, &c.SymbolErrors},
		{proto.PortCountersSelectLinkErrorRecovery, &c.LinkErrorRecovery},
		{proto.PortCountersSelectLinkDowned, &c.LinkDowned},
		{proto.PortCountersSelectPortRcvErrors, &c.RcvErrors},
		{proto.PortCountersSelectPortRcvRemotePhysicalErrors, &c.RcvRemotePhysicalErrors},
		{proto.PortCountersSelectPortRcvSwitchRelayErrors, &c.RcvSwitchRelayErrors},
		{proto.PortCountersSelectPortXmitDiscards, &c.XmitDiscards},
		{proto.PortCountersSelectPortXmitConstraintErrors, &c.XmitConstraintErrors},
		{proto.PortCountersSelectPortRcvConstraintErrors, &c.RcvConstraintErrors},
		{proto.PortCountersSelectLocalLinkIntegrityErrors, &c.LocalLinkIntegrityErrors},
		{proto.PortCountersSelectExcessiveBufferOverrun, &c.ExcessiveBufferOverrun},
		{proto.PortCountersSelectVL15Dropped, &c.VL15Dropped},
		{proto.PortCountersSelectPortXmitData, &c.XmitData},
		{proto.PortCountersSelectPortRcvData, &c.RcvData},
		{proto.PortCountersSelectPortXmitPkts, &c.XmitPkts},
		{proto.PortCountersSelectPortRcvPkts, &c.RcvPkts},
	}
	for _, cl := range clears {
		if sel&cl.bit != 0 {
			*cl.ctr = 0
		}
	}
	if sel2&1 != 0 {
		c.XmitWait = 0
	}
	// QP1Dropped has no select bit in PortCounters; it clears with
	// the whole set (a Set selecting every counter).
	if sel == 0xFFFF {
		c.QP1Dropped = 0
	}
}

// add returns the sum of two counter sets (AllPortSelect), saturating at
// 2^64-1.
func (c Counters) add(o Counters) Counters {
	s := func(a, b uint64) uint64 {
		if a > math.MaxUint64-b {
			return math.MaxUint64
		}
		return a + b
	}
	return Counters{
		SymbolErrors:             s(c.SymbolErrors, o.SymbolErrors),
		LinkErrorRecovery:        s(c.LinkErrorRecovery, o.LinkErrorRecovery),
		LinkDowned:               s(c.LinkDowned, o.LinkDowned),
		RcvErrors:                s(c.RcvErrors, o.RcvErrors),
		RcvRemotePhysicalErrors:  s(c.RcvRemotePhysicalErrors, o.RcvRemotePhysicalErrors),
		RcvSwitchRelayErrors:     s(c.RcvSwitchRelayErrors, o.RcvSwitchRelayErrors),
		XmitDiscards:             s(c.XmitDiscards, o.XmitDiscards),
		XmitConstraintErrors:     s(c.XmitConstraintErrors, o.XmitConstraintErrors),
		RcvConstraintErrors:      s(c.RcvConstraintErrors, o.RcvConstraintErrors),
		LocalLinkIntegrityErrors: s(c.LocalLinkIntegrityErrors, o.LocalLinkIntegrityErrors),
		ExcessiveBufferOverrun:   s(c.ExcessiveBufferOverrun, o.ExcessiveBufferOverrun),
		QP1Dropped:               s(c.QP1Dropped, o.QP1Dropped),
		VL15Dropped:              s(c.VL15Dropped, o.VL15Dropped),
		XmitData:                 s(c.XmitData, o.XmitData),
		RcvData:                  s(c.RcvData, o.RcvData),
		XmitPkts:                 s(c.XmitPkts, o.XmitPkts),
		RcvPkts:                  s(c.RcvPkts, o.RcvPkts),
		XmitWait:                 s(c.XmitWait, o.XmitWait),
	}
}

// pmaFields returns the counters as PortCounters fields, each saturated to
// its width with the proto.PMACounterAdd helpers (adding to zero clamps).
func (c *Counters) pmaFields() proto.PortCountersFields {
	return proto.PortCountersFields{
		SymbolErrorCounter:           proto.PMACounterAdd16(0, c.SymbolErrors),
		LinkErrorRecoveryCounter:     proto.PMACounterAdd8(0, c.LinkErrorRecovery),
		LinkDownedCounter:            proto.PMACounterAdd8(0, c.LinkDowned),
		PortRcvErrors:                proto.PMACounterAdd16(0, c.RcvErrors),
		PortRcvRemotePhysicalErrors:  proto.PMACounterAdd16(0, c.RcvRemotePhysicalErrors),
		PortRcvSwitchRelayErrors:     proto.PMACounterAdd16(0, c.RcvSwitchRelayErrors),
		PortXmitDiscards:             proto.PMACounterAdd16(0, c.XmitDiscards),
		PortXmitConstraintErrors:     proto.PMACounterAdd8(0, c.XmitConstraintErrors),
		PortRcvConstraintErrors:      proto.PMACounterAdd8(0, c.RcvConstraintErrors),
		LocalLinkIntegrityErrors:     proto.PMACounterAdd4(0, c.LocalLinkIntegrityErrors),
		ExcessiveBufferOverrunErrors: proto.PMACounterAdd4(0, c.ExcessiveBufferOverrun),
		QP1Dropped:                   proto.PMACounterAdd16(0, c.QP1Dropped),
		VL15Dropped:                  proto.PMACounterAdd16(0, c.VL15Dropped),
		PortXmitData:                 proto.PMACounterAdd32(0, c.XmitData),
		PortRcvData:                  proto.PMACounterAdd32(0, c.RcvData),
		PortXmitPkts:                 proto.PMACounterAdd32(0, c.XmitPkts),
		PortRcvPkts:                  proto.PMACounterAdd32(0, c.RcvPkts),
		PortXmitWait:                 proto.PMACounterAdd32(0, c.XmitWait),
	}
}

// words is a packet's length in the 4-octet units of PortXmitData and
// PortRcvData (ibsim counts 72 for a 290-byte SMP packet, the same).
func words(pkt []byte) uint64 { return uint64(len(pkt)) / 4 }
