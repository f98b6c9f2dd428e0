package ibsw

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/PacketFive/hinic/internal/fabric/ibsw/ibswtest"
	"github.com/PacketFive/hinic/internal/proto"
)

// replayTopology is the subnet of the OpenSM replay test:
//
//	CA1 (SM) --1 [switch A] 3====3 [switch B] 1-- CA3
//	CA2 ------2 [        ] 4     4 [        ] 2-- CA4
//
// Port 4 of each switch has no cable.
type replayTopology struct {
	f                  *ibswtest.Fabric
	a, b               *Switch
	ca1, ca2, ca3, ca4 *ibswtest.CA
	sm                 *ibswtest.SM
}

const (
	guidA = 0x5E1000000000000A
	guidB = 0x5E1000000000000B
)

func newReplayTopology(t *testing.T) *replayTopology {
	t.Helper()
	f := ibswtest.NewFabric()
	a, err := New(Config{NodeGUID: guidA, NumPorts: 4, Description: "HiSwitch A"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{NodeGUID: guidB, NumPorts: 4, Description: "HiSwitch B"})
	if err != nil {
		t.Fatal(err)
	}
	f.Name(a, "A")
	f.Name(b, "B")
	r := &replayTopology{
		f: f, a: a, b: b,
		ca1: ibswtest.NewCA(f, "CA1", 0xCA00000000000010),
		ca2: ibswtest.NewCA(f, "CA2", 0xCA00000000000020),
		ca3: ibswtest.NewCA(f, "CA3", 0xCA00000000000030),
		ca4: ibswtest.NewCA(f, "CA4", 0xCA00000000000040),
	}
	f.Connect(r.ca1, 1, a, 1)
	f.Connect(r.ca2, 1, a, 2)
	f.Connect(a, 3, b, 3)
	f.Connect(r.ca3, 1, b, 1)
	f.Connect(r.ca4, 1, b, 2)
	r.sm = ibswtest.NewSM(f, r.ca1)
	r.sm.Partitions = []uint16{proto.PKeyDefault, 0x8001}
	return r
}

// TestOpenSMReplay is the acceptance test of the switch's IB side: a mini
// SM replays OpenSM's bring-up (fabric-facts 2.4) over two switches and
// four CAs using nothing but directed-route SMPs through Ingress, and the
// subnet that results must route, forward, answer LID-routed SMPs and
// count traffic in its PMA.
func TestOpenSMReplay(t *testing.T) {
	r := newReplayTopology(t)
	sm := r.sm
	if err := sm.Bringup(); err != nil {
		t.Fatal(err)
	}
	t.Logf("bring-up: %d SMPs, %d packets on the wires", len(sm.Log), r.f.Delivered)

	t.Run("sequence", func(t *testing.T) {
		for _, req := range sm.Log {
			if req.Class != proto.MgmtClassSubnDirectedRoute {
				t.Errorf("bring-up sent class %#x, OpenSM sends only directed-route SMPs", req.Class)
			}
			if req.Status != 0 {
				t.Errorf("%+v: status %#x", req, req.Status)
			}
		}
		const dr = proto.MgmtClassSubnDirectedRoute
		get, set := uint8(proto.MADMethodGet), uint8(proto.MADMethodSet)
		for _, c := range []struct {
			method uint8
			attr   uint16
			want   int
		}{
			// SM port + A, probes of A2 (CA2), A3 (B), B1 (CA3), B2 (CA4).
			{get, proto.SMPAttrNodeInfo, 6},
			{get, proto.SMPAttrNodeDescription, 6},
			{get, proto.SMPAttrSwitchInfo, 2},
			// 4 CA ports + 5 ports of each switch.
			{get, proto.SMPAttrPortInfo, 4 + 2*5},
			// CAs: 1 block; switch port 0: 1 block; ports 1-3: 2 blocks.
			{get, proto.SMPAttrPKeyTable, 4 + 2*(1+3*2)},
			// PortStateChange clear, then LinearFDBTop/LifeTime.
			{set, proto.SMPAttrSwitchInfo, 4},
			// Block 0 on each switch.
			{set, proto.SMPAttrLinearForwardingTable, 2},
			// 4 CA ports + the 4 switch ports facing them.
			{set, proto.SMPAttrPKeyTable, 8},
			{get, proto.SMPAttrSMInfo, 0},
			{get, proto.SMPAttrMulticastForwardingTable, 0},
		} {
			if got := sm.Count(dr, c.method, c.attr); got != c.want {
				t.Errorf("method %#x attribute %#x: %d requests, want %d", c.method, c.attr, got, c.want)
			}
		}
		// PortInfo Sets: 4 partition enforcement, 6 LIDs (SM port,
		// 2 switch port 0s, 3 CAs), and 3 link passes over the 10
		// connected ports (6 switch ports, 4 CA ports).
		if got, want := sm.Count(dr, set, proto.SMPAttrPortInfo), 4+6+3*10; got != want {
			t.Errorf("%d PortInfo Sets, want %d", got, want)
		}
		// The link passes carry SMSupportsExtendedSpeeds (AM bit 31).
		n := 0
		for _, req := range sm.Log {
			if req.Method == set && req.Attr == proto.SMPAttrPortInfo && req.AM&proto.PortInfoAMExtendedSpeeds != 0 {
				n++
			}
		}
		if n != 3*10 {
			t.Errorf("%d PortInfo Sets with AM bit 31, want 30", n)
		}
	})

	wantLFT := map[*Switch][]uint8{
		//         LID: 0     1  2  3  4  5  6
		r.a: {0xFF, 1, 0, 3, 2, 3, 3},
		r.b: {0xFF, 3, 3, 0, 3, 1, 2},
	}
	t.Run("switch state", func(t *testing.T) {
		for _, c := range []struct {
			name string
			sw   *Switch
			lid  uint16
		}{{"A", r.a, 2}, {"B", r.b, 3}} {
			snap := c.sw.Snapshot()
			if snap.LID != c.lid || snap.SMLID != 1 {
				t.Errorf("%s: LID %d SM LID %d, want %d and 1", c.name, snap.LID, snap.SMLID, c.lid)
			}
			if snap.LinearFDBTop != 6 || snap.LifeTimeValue != ibswtest.SMPacketLifeTime || snap.PortStateChange {
				t.Errorf("%s: LinearFDBTop %d LifeTime %#x PortStateChange %v", c.name, snap.LinearFDBTop, snap.LifeTimeValue, snap.PortStateChange)
			}
			if !bytes.Equal(snap.LFT, wantLFT[c.sw]) {
				t.Errorf("%s: LFT % x, want % x", c.name, snap.LFT, wantLFT[c.sw])
			}
			for p, ps := range snap.Ports {
				want := uint8(proto.PortStateActive)
				if p == 4 {
					want = proto.PortStateDown
				}
				if ps.State != want {
					t.Errorf("%s port %d: %s, want %s", c.name, p, PortStateName(ps.State), PortStateName(want))
				}
				if p >= 1 && p <= 3 && ps.OperationalVLs != proto.VLCapVL0To7 {
					t.Errorf("%s port %d: OperationalVLs %d", c.name, p, ps.OperationalVLs)
				}
				if ps.PartitionEnforcement != (p == 1 || p == 2) {
					t.Errorf("%s port %d: partition enforcement %v", c.name, p, ps.PartitionEnforcement)
				}
			}
			if snap.Drops != (Drops{}) {
				t.Errorf("%s dropped during bring-up: %+v", c.name, snap.Drops)
			}
		}
		for i, ca := range []*ibswtest.CA{r.ca1, r.ca2, r.ca3, r.ca4} {
			pi := ca.PortInfo()
			if want := []uint16{1, 4, 5, 6}[i]; pi.LID != want || pi.PortState != proto.PortStateActive || pi.MasterSMLID != 1 {
				t.Errorf("CA%d: LID %d state %d SM LID %d, want LID %d Active", i+1, pi.LID, pi.PortState, pi.MasterSMLID, want)
			}
		}
	})

	cas := []*ibswtest.CA{r.ca1, r.ca2, r.ca3, r.ca4}
	t.Run("data between every pair of CAs", func(t *testing.T) {
		for _, ca := range cas {
			ca.Received = nil
		}
		sentTo := map[*ibswtest.CA][][]byte{}
		for i, src := range cas {
			for j, dst := range cas {
				if i == j {
					continue
				}
				payload := fmt.Appendf(nil, "from CA%d to CA%d........", i+1, j+1)
				src.SendData(dst.LID(), 0, 0x8001, 0x10, payload)
				sentTo[dst] = append(sentTo[dst], payload)
			}
		}
		if err := r.f.Run(); err != nil {
			t.Fatal(err)
		}
		for j, dst := range cas {
			if len(dst.Received) != len(sentTo[dst]) {
				t.Fatalf("CA%d received %d packets, want %d", j+1, len(dst.Received), len(sentTo[dst]))
			}
			// Packets over one switch overtake those over two:
			// compare as sets.
			want := map[string]bool{}
			for _, pl := range sentTo[dst] {
				want[string(pl)] = true
			}
			for k, pkt := range dst.Received {
				p, err := proto.Parse(pkt, proto.LinkIB)
				if err != nil || !p.ICRCValid() || !p.VCRCValid() {
					t.Fatalf("CA%d packet %d: %v", j+1, k, err)
				}
				if !want[string(p.Payload)] || p.LRH.DLID() != dst.LID() {
					t.Errorf("CA%d packet %d: unexpected %q to LID %d", j+1, k, p.Payload, p.LRH.DLID())
				}
				delete(want, string(p.Payload))
			}
		}
	})

	t.Run("partition enforcement", func(t *testing.T) {
		r.ca3.Received = nil
		r.ca2.SendData(r.ca3.LID(), 0, 0x8002, 0x10, []byte("not a member...."))
		r.ca2.SendData(r.ca3.LID(), 0, 0x0001, 0x10, []byte("limited member.."))
		if err := r.f.Run(); err != nil {
			t.Fatal(err)
		}
		if len(r.ca3.Received) != 1 {
			t.Errorf("CA3 received %d packets, want only the limited member's", len(r.ca3.Received))
		}
		snap := r.a.Snapshot()
		if snap.Drops.Partition != 1 || snap.Ports[2].Counters.RcvConstraintErrors != 1 {
			t.Errorf("A: partition drops %d, port 2 RcvConstraintErrors %d, want 1 and 1",
				snap.Drops.Partition, snap.Ports[2].Counters.RcvConstraintErrors)
		}
	})

	t.Run("LID-routed SMP to switch B", func(t *testing.T) {
		// smpquery portinfo 3 0
		d, st, err := sm.LIDRouted(proto.MADMethodGet, 3, proto.SMPAttrPortInfo, 0, nil)
		if err != nil || st != 0 {
			t.Fatalf("status %#x: %v", st, err)
		}
		pi := proto.PortInfo(d).Fields()
		if pi.LID != 3 || pi.MasterSMLID != 1 || pi.PortState != proto.PortStateActive || pi.LocalPortNum != 3 {
			t.Errorf("PortInfo: LID %d SM LID %d state %d LocalPortNum %d", pi.LID, pi.MasterSMLID, pi.PortState, pi.LocalPortNum)
		}
		// smpquery nodeinfo 3
		d, st, err = sm.LIDRouted(proto.MADMethodGet, 3, proto.SMPAttrNodeInfo, 0, nil)
		if err != nil || st != 0 {
			t.Fatalf("status %#x: %v", st, err)
		}
		if ni := proto.NodeInfo(d).Fields(); ni.NodeGUID != guidB || ni.NodeType != proto.NodeTypeSwitch {
			t.Errorf("NodeInfo: %+v", ni)
		}
	})

	t.Run("link loss and re-sweep", func(t *testing.T) {
		r.ca3.Received = nil
		send := func() {
			t.Helper()
			r.ca1.SendData(r.ca3.LID(), 0, proto.PKeyDefault, 0x10, []byte("across the ISL.."))
			if err := r.f.Run(); err != nil {
				t.Fatal(err)
			}
		}
		r.f.Disconnect(r.a, 3)
		snap := r.a.Snapshot()
		if !snap.PortStateChange || snap.Ports[3].State != proto.PortStateDown || snap.Ports[3].Counters.LinkDowned != 1 {
			t.Fatalf("after unplugging A3: PortStateChange %v, port 3 %+v", snap.PortStateChange, snap.Ports[3])
		}
		send()
		r.f.Connect(r.a, 3, r.b, 3)
		send() // both ends only in Init: still no data
		if len(r.ca3.Received) != 0 {
			t.Fatalf("data crossed a link that is not Active")
		}
		if got := r.a.Snapshot().Ports[3].Counters.XmitDiscards; got != 2 {
			t.Errorf("A port 3 XmitDiscards %d, want 2", got)
		}
		before := len(sm.Log)
		if err := sm.Bringup(); err != nil {
			t.Fatal(err)
		}
		// The re-sweep re-reads everything but only re-activates the
		// retrained link: Armed and Active for A3 and B3.
		sets := 0
		for _, req := range sm.Log[before:] {
			if req.Method == proto.MADMethodSet && req.Attr == proto.SMPAttrPortInfo && req.AM&proto.PortInfoAMExtendedSpeeds != 0 {
				sets++
			}
		}
		if sets != 10+4 {
			t.Errorf("%d link-pass PortInfo Sets in the re-sweep, want 14", sets)
		}
		send()
		if len(r.ca3.Received) != 1 || r.a.Snapshot().PortStateChange {
			t.Errorf("after the re-sweep: CA3 got %d packets, A PortStateChange %v", len(r.ca3.Received), r.a.Snapshot().PortStateChange)
		}
	})

	t.Run("PMA counters grow with traffic", func(t *testing.T) {
		// perfquery reads ClassPortInfo first.
		d, st, err := sm.Perf(proto.MADMethodGet, 3, proto.PMAAttrClassPortInfo, 0, nil)
		if err != nil || st != 0 {
			t.Fatalf("ClassPortInfo: status %#x: %v", st, err)
		}
		if cpi := proto.ClassPortInfo(d[:proto.ClassPortInfoSize]); cpi.CapabilityMask()&proto.PMACapAllPortSelect == 0 {
			t.Errorf("ClassPortInfo CapabilityMask %#x without AllPortSelect", cpi.CapabilityMask())
		}
		counters := func(port uint8) proto.PortCountersFields {
			t.Helper()
			req := make([]byte, proto.PerfMgtDataSize)
			proto.PortCounters(req[:proto.PortCountersSize]).Encode(&proto.PortCountersFields{PortSelect: port})
			d, st, err := sm.Perf(proto.MADMethodGet, 3, proto.PMAAttrPortCounters, 0, req)
			if err != nil || st != 0 {
				t.Fatalf("PortCounters %d: status %#x: %v", port, st, err)
			}
			return proto.PortCounters(d[:proto.PortCountersSize]).Fields()
		}
		before1, beforeAll := counters(1), counters(proto.PMAPortSelectAll)
		if before1.PortXmitPkts == 0 || before1.PortRcvPkts == 0 {
			t.Errorf("B port 1 counted no traffic yet: %+v", before1)
		}
		const n = 10
		payload := make([]byte, 256)
		for range n {
			r.ca1.SendData(r.ca3.LID(), 0, proto.PKeyDefault, 0x10, payload)
		}
		if err := r.f.Run(); err != nil {
			t.Fatal(err)
		}
		pktWords := uint32(len(dataPacket(1, 1, 0, 0, 0, len(payload))) / 4)
		after1, afterAll := counters(1), counters(proto.PMAPortSelectAll)
		if got := after1.PortXmitPkts - before1.PortXmitPkts; got != n {
			t.Errorf("B port 1 PortXmitPkts grew by %d, want %d", got, n)
		}
		if got := after1.PortXmitData - before1.PortXmitData; got != n*pktWords {
			t.Errorf("B port 1 PortXmitData grew by %d words, want %d", got, n*pktWords)
		}
		if afterAll.PortRcvPkts <= beforeAll.PortRcvPkts+n || after1.PortSelect != 1 || afterAll.PortSelect != 0xFF {
			t.Errorf("AllPortSelect: PortRcvPkts %d -> %d", beforeAll.PortRcvPkts, afterAll.PortRcvPkts)
		}
		// perfquery -R: a Set with every CounterSelect bit clears them.
		req := make([]byte, proto.PerfMgtDataSize)
		proto.PortCounters(req[:proto.PortCountersSize]).Encode(&proto.PortCountersFields{PortSelect: 1, CounterSelect: 0xFFFF})
		d, st, err = sm.Perf(proto.MADMethodSet, 3, proto.PMAAttrPortCounters, 0, req)
		if err != nil || st != 0 {
			t.Fatalf("reset: status %#x: %v", st, err)
		}
		if got := proto.PortCounters(d[:proto.PortCountersSize]).Fields(); got.PortXmitPkts != 0 || got.PortRcvData != 0 {
			t.Errorf("after reset: %+v", got)
		}
	})
}
