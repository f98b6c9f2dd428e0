package ibagent

import (
	"sync"

	"github.com/PacketFive/hinic/internal/proto"
)

// PortTotals are a CA port's counters as they grew since the port
// started: data in octets, never cleared. A PMA shows them less the
// values a PortCounters or PortCountersExtended Set last cleared to.
type PortTotals struct {
	XmitData, RcvData                   uint64 // octets
	XmitPkts, RcvPkts                   uint64
	UnicastXmitPkts, UnicastRcvPkts     uint64
	MulticastXmitPkts, MulticastRcvPkts uint64
	RcvErrors                           uint64 // ICRC and malformed packets
	XmitDiscards                        uint64 // packets the port could not send
	RcvConstraintErrors                 uint64 // P_Key violations
	LinkDowned                          uint64 // link losses
	VL15Dropped, QP1Dropped             uint64
}

// ExtendedCounterSource is a CounterSource that also has
// PortCountersExtended; ServePMA then offers it (PMACapExtendedWidth).
type ExtendedCounterSource interface {
	CounterSource
	// PortCountersExtended returns the counters of port sel after
	// clearing those csel selects when clear is set; ok is false when
	// the node has no such port.
	PortCountersExtended(sel uint8, clear bool, csel uint16) (f proto.PortCountersExtendedFields, ok bool)
}

// CAPMA is the PMA's counter source of a one-port CA (ServePMA; port 1,
// PortSelect 0, 1 or all ports): PortCounters and PortCountersExtended
// over PortTotals, each attribute with its own baseline, so a Set of one
// clears nothing the other shows. QP1Dropped has no CounterSelect bit
// and is never cleared. It is safe for concurrent use.
type CAPMA struct {
	mu      sync.Mutex
	totals  func() PortTotals
	base    PortTotals // what PortCounters Sets cleared to
	baseExt PortTotals // what PortCountersExtended Sets cleared to
}

// NewCAPMA returns a CAPMA reading totals.
func NewCAPMA(totals func() PortTotals) *CAPMA { return &CAPMA{totals: totals} }

// SetTotals makes the PMA read totals from now on, with both baselines
// cleared (the new source starts from its own zero).
func (p *CAPMA) SetTotals(totals func() PortTotals) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.totals, p.base, p.baseExt = totals, PortTotals{}, PortTotals{}
}

// restartBelow drops every baseline above its counter's total: the
// source's counters started again (a device reset), so the PMA shows
// them from that start rather than wrapping around.
func (b *PortTotals) restartBelow(t *PortTotals) {
	bs := [...]*uint64{&b.XmitData, &b.RcvData, &b.XmitPkts, &b.RcvPkts, &b.UnicastXmitPkts, &b.UnicastRcvPkts,
		&b.MulticastXmitPkts, &b.MulticastRcvPkts, &b.RcvErrors, &b.XmitDiscards, &b.RcvConstraintErrors,
		&b.LinkDowned, &b.VL15Dropped, &b.QP1Dropped}
	ts := [...]uint64{t.XmitData, t.RcvData, t.XmitPkts, t.RcvPkts, t.UnicastXmitPkts, t.UnicastRcvPkts,
		t.MulticastXmitPkts, t.MulticastRcvPkts, t.RcvErrors, t.XmitDiscards, t.RcvConstraintErrors,
		t.LinkDowned, t.VL15Dropped, t.QP1Dropped}
	for i, v := range ts {
		if *bs[i] > v {
			*bs[i] = 0
		}
	}
}

func caPort(sel uint8) bool { return sel <= 1 || sel == proto.PMAPortSelectAll }

// clearTo sets *dst to v when csel has bit.
func clearTo(csel, bit uint16, dst *uint64, v uint64) {
	if csel&bit != 0 {
		*dst = v
	}
}

// PortCounters implements CounterSource: PortCounters of port 1, each
// counter saturated to its field, data in 4-octet words.
func (p *CAPMA) PortCounters(sel uint8, clear bool, csel uint16, _ uint8) (proto.PortCountersFields, bool) {
	if !caPort(sel) {
		return proto.PortCountersFields{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	t, b := p.totals(), &p.base
	b.restartBelow(&t)
	if clear {
		clearTo(csel, proto.PortCountersSelectLinkDowned, &b.LinkDowned, t.LinkDowned)
		clearTo(csel, proto.PortCountersSelectPortRcvErrors, &b.RcvErrors, t.RcvErrors)
		clearTo(csel, proto.PortCountersSelectPortXmitDiscards, &b.XmitDiscards, t.XmitDiscards)
		clearTo(csel, proto.PortCountersSelectPortRcvConstraintErrors, &b.RcvConstraintErrors, t.RcvConstraintErrors)
		clearTo(csel, proto.PortCountersSelectVL15Dropped, &b.VL15Dropped, t.VL15Dropped)
		clearTo(csel, proto.PortCountersSelectPortXmitData, &b.XmitData, t.XmitData)
		clearTo(csel, proto.PortCountersSelectPortRcvData, &b.RcvData, t.RcvData)
		clearTo(csel, proto.PortCountersSelectPortXmitPkts, &b.XmitPkts, t.XmitPkts)
		clearTo(csel, proto.PortCountersSelectPortRcvPkts, &b.RcvPkts, t.RcvPkts)
	}
	return proto.PortCountersFields{
		LinkDownedCounter:       proto.PMACounterAdd8(0, t.LinkDowned-b.LinkDowned),
		PortRcvErrors:           proto.PMACounterAdd16(0, t.RcvErrors-b.RcvErrors),
		PortXmitDiscards:        proto.PMACounterAdd16(0, t.XmitDiscards-b.XmitDiscards),
		PortRcvConstraintErrors: proto.PMACounterAdd8(0, t.RcvConstraintErrors-b.RcvConstraintErrors),
		VL15Dropped:             proto.PMACounterAdd16(0, t.VL15Dropped-b.VL15Dropped),
		QP1Dropped:              proto.PMACounterAdd16(0, t.QP1Dropped),
		PortXmitData:            proto.PMACounterAdd32(0, (t.XmitData-b.XmitData)/4),
		PortRcvData:             proto.PMACounterAdd32(0, (t.RcvData-b.RcvData)/4),
		PortXmitPkts:            proto.PMACounterAdd32(0, t.XmitPkts-b.XmitPkts),
		PortRcvPkts:             proto.PMACounterAdd32(0, t.RcvPkts-b.RcvPkts),
	}, true
}

// PortCountersExtended implements ExtendedCounterSource: the eight 64-bit
// counters of port 1, data in 4-octet words.
func (p *CAPMA) PortCountersExtended(sel uint8, clear bool, csel uint16) (proto.PortCountersExtendedFields, bool) {
	if !caPort(sel) {
		return proto.PortCountersExtendedFields{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	t, b := p.totals(), &p.baseExt
	b.restartBelow(&t)
	cur := [...]*uint64{&t.XmitData, &t.RcvData, &t.XmitPkts, &t.RcvPkts,
		&t.UnicastXmitPkts, &t.UnicastRcvPkts, &t.MulticastXmitPkts, &t.MulticastRcvPkts}
	base := [...]*uint64{&b.XmitData, &b.RcvData, &b.XmitPkts, &b.RcvPkts,
		&b.UnicastXmitPkts, &b.UnicastRcvPkts, &b.MulticastXmitPkts, &b.MulticastRcvPkts}
	var f proto.PortCountersExtendedFields
	for i := range cur {
		if clear {
			clearTo(csel, 1<<i, base[i], *cur[i])
		}
		f.Counters[i] = *cur[i] - *base[i]
	}
	f.Counters[0] /= 4
	f.Counters[1] /= 4
	return f, true
}
