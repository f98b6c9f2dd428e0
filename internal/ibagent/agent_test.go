package ibagent_test

import (
	"testing"

	"github.com/PacketFive/hinic/internal/ibagent"
	"github.com/PacketFive/hinic/internal/proto"
)

// fakeCA is a CA port for the agents' tests.
type fakeCA struct {
	verdict proto.MKeyVerdict
	pi      proto.PortInfoFields
	pkeys   [proto.PKeyTableEntriesPerBlock]uint16
	sets    int
	// counters
	cnt     proto.PortCountersFields
	cleared []uint16
}

func (f *fakeCA) CheckMKey(uint8, uint64) proto.MKeyVerdict { return f.verdict }
func (f *fakeCA) Attr(m proto.SMP, set, mask bool) uint16 {
	return ibagent.CAAttr(f, m, set, mask)
}
func (f *fakeCA) NodeInfo() proto.NodeInfoFields {
	return proto.NodeInfoFields{BaseVersion: 1, ClassVersion: 1, NodeType: proto.NodeTypeCA, NumPorts: 1,
		NodeGUID: 0x10, PortGUID: 0x11, LocalPortNum: 1}
}
func (f *fakeCA) NodeDescription() string        { return "fake" }
func (f *fakeCA) PortGUID() uint64               { return 0x11 }
func (f *fakeCA) PortInfo() proto.PortInfoFields { return f.pi }
func (f *fakeCA) SetPortInfo(in proto.PortInfoFields) uint16 {
	if st := ibagent.CheckPortInfoSet(&f.pi, &in); st != 0 {
		return st
	}
	f.sets++
	ibagent.ApplyPortInfoSet(&f.pi, &in)
	return 0
}
func (f *fakeCA) PKeys(fn func(*[proto.PKeyTableEntriesPerBlock]uint16)) { fn(&f.pkeys) }
func (f *fakeCA) PortCounters(sel uint8, clear bool, csel uint16, _ uint8) (proto.PortCountersFields, bool) {
	if sel > 1 && sel != proto.PMAPortSelectAll {
		return proto.PortCountersFields{}, false
	}
	if clear {
		f.cleared = append(f.cleared, csel)
	}
	return f.cnt, true
}

func newCA() *fakeCA {
	f := &fakeCA{pi: proto.PortInfoFields{PortState: proto.PortStateInit, MTUCap: proto.IBMTU4096,
		VLCap: proto.VLCapVL0To7, LID: 3, MKey: 0x55}}
	f.pkeys[0] = proto.PKeyDefault
	return f
}

func smp(class, method uint8, attr uint16, am uint32) proto.SMP {
	m := proto.SMP(make([]byte, proto.MADSize))
	f := proto.SMPFields{BaseVersion: proto.MADBaseVersion, MgmtClass: class, ClassVersion: proto.SMClassVersion,
		Method: method, TransactionID: 0x1234, AttributeID: attr, AttributeModifier: am}
	if class == proto.MgmtClassSubnDirectedRoute {
		f.DrSLID, f.DrDLID = proto.SMPPermissiveLID, proto.SMPPermissiveLID
	}
	m.Encode(&f)
	return m
}

func TestServeSMP(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mk      func() proto.SMP
		verdict proto.MKeyVerdict
		want    ibagent.Outcome
		status  uint16
	}{
		{"get NodeInfo", func() proto.SMP { return smp(proto.MgmtClassSubnLID, proto.MADMethodGet, proto.SMPAttrNodeInfo, 0) },
			proto.MKeyAllow, ibagent.Answered, 0},
		{"response", func() proto.SMP { return smp(proto.MgmtClassSubnLID, proto.MADMethodGetResp, proto.SMPAttrNodeInfo, 0) },
			proto.MKeyAllow, ibagent.Ignored, 0},
		{"base version 2", func() proto.SMP {
			m := smp(proto.MgmtClassSubnLID, proto.MADMethodGet, proto.SMPAttrNodeInfo, 0)
			m[0] = 2
			return m
		}, proto.MKeyAllow, ibagent.Ignored, 0},
		{"trap", func() proto.SMP { return smp(proto.MgmtClassSubnLID, proto.MADMethodTrap, 2, 0) },
			proto.MKeyAllow, ibagent.Ignored, 0},
		{"trap repress", func() proto.SMP { return smp(proto.MgmtClassSubnLID, proto.MADMethodTrapRepress, 2, 0) },
			proto.MKeyAllow, ibagent.Ignored, 0},
		{"M_Key violation", func() proto.SMP { return smp(proto.MgmtClassSubnLID, proto.MADMethodGet, proto.SMPAttrNodeInfo, 0) },
			proto.MKeyViolation, ibagent.MKeyViolated, 0},
		{"GetTable", func() proto.SMP {
			return smp(proto.MgmtClassSubnLID, proto.MADMethodGetTable, proto.SMPAttrNodeInfo, 0)
		},
			proto.MKeyAllow, ibagent.Answered, proto.MADStatusMethodUnsupported},
		{"class version 2", func() proto.SMP {
			m := smp(proto.MgmtClassSubnLID, proto.MADMethodGet, proto.SMPAttrNodeInfo, 0)
			m[2] = 2
			return m
		}, proto.MKeyAllow, ibagent.Answered, proto.MADStatusBadVersion},
		{"set NodeInfo", func() proto.SMP { return smp(proto.MgmtClassSubnLID, proto.MADMethodSet, proto.SMPAttrNodeInfo, 0) },
			proto.MKeyAllow, ibagent.Answered, proto.MADStatusMethodAttrUnsupported},
		{"SMInfo", func() proto.SMP { return smp(proto.MgmtClassSubnLID, proto.MADMethodGet, proto.SMPAttrSMInfo, 0) },
			proto.MKeyAllow, ibagent.Answered, proto.MADStatusMethodAttrUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ca := newCA()
			ca.verdict = tc.verdict
			m := tc.mk()
			got := ibagent.ServeSMP(m, ca)
			if got != tc.want {
				t.Fatalf("outcome %d, want %d", got, tc.want)
			}
			if got != ibagent.Answered {
				return
			}
			if m.Method() != proto.MADMethodGetResp || m.Status() != tc.status || m.TransactionID() != 0x1234 {
				t.Fatalf("answer method %#x status %#x tid %#x, want GetResp, %#x, 0x1234", m.Method(), m.Status(), m.TransactionID(), tc.status)
			}
		})
	}
	// A directed-route answer carries the D bit.
	m := smp(proto.MgmtClassSubnDirectedRoute, proto.MADMethodGet, proto.SMPAttrNodeInfo, 0)
	if ibagent.ServeSMP(m, newCA()) != ibagent.Answered || !m.Direction() || m.Status() != 0 {
		t.Fatalf("directed route: D %v status %#x", m.Direction(), m.Status())
	}
	if ni := proto.NodeInfo(m.Data()).Fields(); ni.NodeGUID != 0x10 || ni.PortGUID != 0x11 {
		t.Fatalf("NodeInfo %+v", ni)
	}
}

func TestCAAttr(t *testing.T) {
	get := func(ca *fakeCA, attr uint16, am uint32, mask bool) (proto.SMP, uint16) {
		m := smp(proto.MgmtClassSubnLID, proto.MADMethodGet, attr, am)
		return m, ibagent.CAAttr(ca, m, false, mask)
	}
	ca := newCA()
	if m, st := get(ca, proto.SMPAttrPortInfo, 0, false); st != 0 || proto.PortInfo(m.Data()).Fields().MKey != 0x55 {
		t.Fatalf("PortInfo: %#x", st)
	}
	if m, st := get(ca, proto.SMPAttrPortInfo, 1, true); st != 0 || proto.PortInfo(m.Data()).Fields().MKey != 0 {
		t.Fatalf("PortInfo masked: %#x, M_Key shown", st)
	}
	if _, st := get(ca, proto.SMPAttrPortInfo, 2, false); st != proto.MADStatusInvalidField {
		t.Fatalf("PortInfo of port 2: %#x", st)
	}
	if m, st := get(ca, proto.SMPAttrNodeDescription, 0, false); st != 0 ||
		proto.NodeDescription(m.Data()).Fields().NodeString != "fake" {
		t.Fatalf("NodeDescription: %#x", st)
	}
	if m, st := get(ca, proto.SMPAttrGUIDInfo, 0, false); st != 0 || proto.GUIDInfo(m.Data()).Fields().GUIDs[0] != 0x11 {
		t.Fatalf("GUIDInfo: %#x", st)
	}
	if _, st := get(ca, proto.SMPAttrGUIDInfo, 1, false); st != proto.MADStatusInvalidField {
		t.Fatalf("GUIDInfo block 1: %#x", st)
	}
	if _, st := get(ca, proto.SMPAttrPKeyTable, 1, false); st != proto.MADStatusInvalidField {
		t.Fatalf("P_KeyTable block 1: %#x", st)
	}
	if _, st := get(ca, 0x9999, 0, false); st != proto.MADStatusMethodAttrUnsupported {
		t.Fatalf("unknown attribute: %#x", st)
	}
	// P_KeyTable Set stores the block and answers it.
	m := smp(proto.MgmtClassSubnLID, proto.MADMethodSet, proto.SMPAttrPKeyTable, 0)
	var keys [proto.PKeyTableEntriesPerBlock]uint16
	keys[0], keys[1] = 0xFFFF, 0x8001
	proto.PKeyTable(m.Data()).Encode(&proto.PKeyTableFields{PKeys: keys})
	if st := ibagent.CAAttr(ca, m, true, false); st != 0 || ca.pkeys != keys {
		t.Fatalf("P_KeyTable Set: %#x, table %v", st, ca.pkeys[:2])
	}
	// PortInfo Set: a rejected one changes nothing and still answers
	// the current attribute.
	m = smp(proto.MgmtClassSubnLID, proto.MADMethodSet, proto.SMPAttrPortInfo, 0)
	bad := ca.pi
	bad.PortState, bad.LID = proto.PortStateActive, 9 // Active from Init
	proto.PortInfo(m.Data()).Encode(&bad)
	if st := ibagent.CAAttr(ca, m, true, false); st != proto.MADStatusInvalidField || ca.sets != 0 ||
		proto.PortInfo(m.Data()).Fields().LID != 3 {
		t.Fatalf("bad PortInfo Set: %#x, %d sets, LID %d", st, ca.sets, proto.PortInfo(m.Data()).Fields().LID)
	}
}

func TestCheckPortInfoSet(t *testing.T) {
	cur := proto.PortInfoFields{PortState: proto.PortStateInit, MTUCap: proto.IBMTU2048, VLCap: proto.VLCapVL0To3}
	for _, tc := range []struct {
		name string
		cur  uint8
		f    proto.PortInfoFields
		want uint16
	}{
		{"no change", proto.PortStateInit, proto.PortInfoFields{}, 0},
		{"down", proto.PortStateActive, proto.PortInfoFields{PortState: proto.PortStateDown}, 0},
		{"armed from init", proto.PortStateInit, proto.PortInfoFields{PortState: proto.PortStateArmed}, 0},
		{"armed again", proto.PortStateArmed, proto.PortInfoFields{PortState: proto.PortStateArmed}, 0},
		{"armed from active", proto.PortStateActive, proto.PortInfoFields{PortState: proto.PortStateArmed}, proto.MADStatusInvalidField},
		{"active from armed", proto.PortStateArmed, proto.PortInfoFields{PortState: proto.PortStateActive}, 0},
		{"active again", proto.PortStateActive, proto.PortInfoFields{PortState: proto.PortStateActive}, 0},
		{"active from init", proto.PortStateInit, proto.PortInfoFields{PortState: proto.PortStateActive}, proto.MADStatusInvalidField},
		{"state 5", proto.PortStateInit, proto.PortInfoFields{PortState: 5}, proto.MADStatusInvalidField},
		{"MTU over cap", proto.PortStateInit, proto.PortInfoFields{NeighborMTU: proto.IBMTU4096}, proto.MADStatusInvalidField},
		{"VLs over cap", proto.PortStateInit, proto.PortInfoFields{OperationalVLs: proto.VLCapVL0To7}, proto.MADStatusInvalidField},
		{"multicast LID", proto.PortStateInit, proto.PortInfoFields{LID: proto.LIDMulticastBase}, proto.MADStatusInvalidField},
	} {
		c := cur
		c.PortState = tc.cur
		if got := ibagent.CheckPortInfoSet(&c, &tc.f); got != tc.want {
			t.Errorf("%s: %#x, want %#x", tc.name, got, tc.want)
		}
	}
	pi := proto.PortInfoFields{NeighborMTU: proto.IBMTU1024, OperationalVLs: proto.VLCapVL0, LinkDownDefaultState: 2}
	ibagent.ApplyPortInfoSet(&pi, &proto.PortInfoFields{LID: 7, MKey: 9, MKeyLeasePeriod: 4, MasterSMLID: 1})
	if pi.LID != 7 || pi.MKey != 9 || pi.MKeyLeasePeriod != 4 || pi.MasterSMLID != 1 ||
		pi.NeighborMTU != proto.IBMTU1024 || pi.OperationalVLs != proto.VLCapVL0 || pi.LinkDownDefaultState != 2 {
		t.Fatalf("ApplyPortInfoSet: %+v", pi)
	}
}

func perf(method uint8, attr uint16, sel uint8, csel uint16) proto.PerfMgtMAD {
	m := make([]byte, proto.MADSize)
	proto.MAD(m).Encode(&proto.MADFields{BaseVersion: proto.MADBaseVersion, MgmtClass: proto.MgmtClassPerfMgt,
		ClassVersion: proto.PerfMgtClassVersion, Method: method, AttributeID: attr})
	pm := proto.PerfMgtMAD(m)
	if attr == proto.PMAAttrPortCounters {
		proto.PortCounters(pm.Data()[:proto.PortCountersSize]).Encode(&proto.PortCountersFields{PortSelect: sel, CounterSelect: csel})
	}
	return pm
}

func TestServePMA(t *testing.T) {
	ca := newCA()
	ca.cnt = proto.PortCountersFields{PortXmitPkts: 42, PortRcvData: 7}
	if st := ibagent.ServePMA(perf(proto.MADMethodGetTable, proto.PMAAttrPortCounters, 1, 0), ca); st != proto.MADStatusMethodUnsupported {
		t.Fatalf("GetTable: %#x", st)
	}
	m := perf(proto.MADMethodGet, proto.PMAAttrPortCounters, 1, 0)
	m[2] = 2
	if st := ibagent.ServePMA(m, ca); st != proto.MADStatusBadVersion {
		t.Fatalf("class version 2: %#x", st)
	}
	m = perf(proto.MADMethodGet, proto.PMAAttrClassPortInfo, 0, 0)
	if st := ibagent.ServePMA(m, ca); st != 0 {
		t.Fatalf("ClassPortInfo: %#x", st)
	}
	if cpi := proto.ClassPortInfo(m.Data()[:proto.ClassPortInfoSize]).Fields(); cpi.CapabilityMask != ibagent.PMACapabilityMask ||
		cpi.RespTimeValue != ibagent.PMARespTimeValue || cpi.ClassVersion != proto.PerfMgtClassVersion {
		t.Fatalf("ClassPortInfo %+v", cpi)
	}
	if st := ibagent.ServePMA(perf(proto.MADMethodSet, proto.PMAAttrClassPortInfo, 0, 0), ca); st != proto.MADStatusMethodAttrUnsupported {
		t.Fatalf("ClassPortInfo Set: %#x", st)
	}
	m = perf(proto.MADMethodGet, proto.PMAAttrPortCounters, 1, 0)
	if st := ibagent.ServePMA(m, ca); st != 0 {
		t.Fatalf("PortCounters: %#x", st)
	}
	if pc := proto.PortCounters(m.Data()[:proto.PortCountersSize]).Fields(); pc.PortXmitPkts != 42 || pc.PortRcvData != 7 || pc.PortSelect != 1 {
		t.Fatalf("PortCounters %+v", pc)
	}
	if st := ibagent.ServePMA(perf(proto.MADMethodGet, proto.PMAAttrPortCounters, 2, 0), ca); st != proto.MADStatusInvalidField {
		t.Fatalf("port 2: %#x", st)
	}
	if st := ibagent.ServePMA(perf(proto.MADMethodSet, proto.PMAAttrPortCounters, 1, 0x1000), ca); st != 0 || len(ca.cleared) != 1 || ca.cleared[0] != 0x1000 {
		t.Fatalf("Set: %#x, cleared %v", st, ca.cleared)
	}
	if st := ibagent.ServePMA(perf(proto.MADMethodGet, 0x9999, 1, 0), ca); st != proto.MADStatusMethodAttrUnsupported {
		t.Fatalf("unknown attribute: %#x", st)
	}
}

// FuzzAgents feeds arbitrary 256-byte MADs to the SMA and the PMA: no
// panic, and an answered SMP is a GetResp.
func FuzzAgents(f *testing.F) {
	f.Add([]byte(smp(proto.MgmtClassSubnLID, proto.MADMethodSet, proto.SMPAttrPortInfo, 0)))
	f.Add([]byte(smp(proto.MgmtClassSubnDirectedRoute, proto.MADMethodGet, proto.SMPAttrPKeyTable, 0)))
	f.Add([]byte(perf(proto.MADMethodSet, proto.PMAAttrPortCounters, 0xFF, 0xFFFF)))
	f.Fuzz(func(t *testing.T, b []byte) {
		m := make([]byte, proto.MADSize)
		copy(m, b)
		p := append([]byte(nil), m...)
		ca := newCA()
		if ibagent.ServeSMP(proto.SMP(m), ca) == ibagent.Answered && proto.SMP(m).Method() != proto.MADMethodGetResp {
			t.Fatalf("answered with method %#x", proto.SMP(m).Method())
		}
		q := append([]byte(nil), p...)
		ibagent.ServePMA(proto.PerfMgtMAD(p), ca)
		tot := ibagent.PortTotals{XmitData: uint64(len(b)), RcvPkts: 1 << 40}
		ibagent.ServePMA(proto.PerfMgtMAD(q), ibagent.NewCAPMA(func() ibagent.PortTotals { return tot }))
	})
}

// TestCAPMA: PortCounters and PortCountersExtended over totals, each
// cleared by its own Set, data in words, saturation, and a source that
// starts again.
func TestCAPMA(t *testing.T) {
	tot := ibagent.PortTotals{XmitData: 400, RcvData: 800, XmitPkts: 3, RcvPkts: 5, UnicastXmitPkts: 2,
		MulticastXmitPkts: 1, UnicastRcvPkts: 5, RcvErrors: 1 << 20, LinkDowned: 2, QP1Dropped: 9}
	p := ibagent.NewCAPMA(func() ibagent.PortTotals { return tot })
	get := func() proto.PortCountersFields {
		m := perf(proto.MADMethodGet, proto.PMAAttrPortCounters, 1, 0)
		if st := ibagent.ServePMA(m, p); st != 0 {
			t.Fatalf("PortCounters: %#x", st)
		}
		return proto.PortCounters(m.Data()[:proto.PortCountersSize]).Fields()
	}
	getExt := func() [8]uint64 {
		m := perf(proto.MADMethodGet, proto.PMAAttrPortCountersExtended, 0, 0)
		proto.PortCountersExtended(m.Data()[:proto.PortCountersExtendedSize]).Encode(&proto.PortCountersExtendedFields{PortSelect: 1})
		if st := ibagent.ServePMA(m, p); st != 0 {
			t.Fatalf("PortCountersExtended: %#x", st)
		}
		return proto.PortCountersExtended(m.Data()[:proto.PortCountersExtendedSize]).Fields().Counters
	}
	if c := get(); c.PortXmitData != 100 || c.PortRcvData != 200 || c.PortXmitPkts != 3 || c.PortRcvErrors != 0xFFFF ||
		c.LinkDownedCounter != 2 || c.QP1Dropped != 9 {
		t.Fatalf("PortCounters %+v", c)
	}
	if e := getExt(); e != [8]uint64{100, 200, 3, 5, 2, 5, 1, 0} {
		t.Fatalf("PortCountersExtended %v", e)
	}
	// ClassPortInfo offers the extended attribute.
	m := perf(proto.MADMethodGet, proto.PMAAttrClassPortInfo, 0, 0)
	ibagent.ServePMA(m, p)
	if c := proto.ClassPortInfo(m.Data()[:proto.ClassPortInfoSize]).Fields(); c.CapabilityMask != proto.PMACapAllPortSelect|proto.PMACapExtendedWidth {
		t.Fatalf("capability mask %#x", c.CapabilityMask)
	}
	// A PortCounters Set of XmitPkts and QP1 (no bit) clears XmitPkts
	// there only.
	ibagent.ServePMA(perf(proto.MADMethodSet, proto.PMAAttrPortCounters, 1, proto.PortCountersSelectPortXmitPkts), p)
	tot.XmitPkts += 4
	if c := get(); c.PortXmitPkts != 4 || c.QP1Dropped != 9 {
		t.Fatalf("after the Set: %+v", c)
	}
	if e := getExt(); e[2] != 7 {
		t.Fatalf("extended xmit pkts %d after a PortCounters Set, want 7", e[2])
	}
	// An extended Set (bit 1: RcvData) clears there only.
	m = perf(proto.MADMethodSet, proto.PMAAttrPortCountersExtended, 0, 0)
	proto.PortCountersExtended(m.Data()[:proto.PortCountersExtendedSize]).Encode(&proto.PortCountersExtendedFields{PortSelect: 1, CounterSelect: 2})
	if st := ibagent.ServePMA(m, p); st != 0 {
		t.Fatal(st)
	}
	if e, c := getExt(), get(); e[1] != 0 || c.PortRcvData != 200 {
		t.Fatalf("extended rcv data %d, PortCounters %d after an extended Set", e[1], c.PortRcvData)
	}
	// The source starts again: the PMA shows it from its start.
	tot = ibagent.PortTotals{XmitPkts: 1}
	if c := get(); c.PortXmitPkts != 1 {
		t.Fatalf("after a restart: xmit pkts %d, want 1", c.PortXmitPkts)
	}
	// A plain CounterSource has no extended attribute.
	if st := ibagent.ServePMA(perf(proto.MADMethodGet, proto.PMAAttrPortCountersExtended, 1, 0), newCA()); st != proto.MADStatusMethodAttrUnsupported {
		t.Fatalf("extended on a plain source: %#x", st)
	}
}
