package ibsw

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/PacketFive/hinic/internal/fabric/ibsw/ibswtest"
	"github.com/PacketFive/hinic/internal/proto"
)

// hopStep is one directed-route SMP on a wire, as the DR walk test sees it.
type hopStep struct {
	from, to string
	d        bool  // D bit
	hp       uint8 // HopPointer
	ret      []byte
}

func (h hopStep) String() string {
	return fmt.Sprintf("%s->%s D=%v HP=%d RP=%v", h.from, h.to, h.d, h.hp, h.ret)
}

// TestDirectedRouteWalk sends Get NodeInfo along directed routes through a
// chain of two switches and checks every hop against fabric-facts 2.3
// (IBA C14-9/C14-13): outbound, a node at path index i receives HopPointer
// i and records ReturnPath[i] = its ingress port; the responder answers out
// ReturnPath[HopCount] with HopPointer HopCount; returning, the switch at
// index i receives HopPointer i+1 and sends out ReturnPath[i]; the SM's CA
// gets HopPointer 1.
//
//	CA1 --1 [A] 3====3 [B] 1-- CA3
func TestDirectedRouteWalk(t *testing.T) {
	f := ibswtest.NewFabric()
	a, err := New(Config{NodeGUID: guidA, NumPorts: 4})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{NodeGUID: guidB, NumPorts: 4})
	if err != nil {
		t.Fatal(err)
	}
	f.Name(a, "A")
	f.Name(b, "B")
	ca1 := ibswtest.NewCA(f, "CA1", 0xCA00000000000010)
	ca3 := ibswtest.NewCA(f, "CA3", 0xCA00000000000030)
	f.Connect(ca1, 1, a, 1)
	f.Connect(a, 3, b, 3)
	f.Connect(ca3, 1, b, 1)

	var steps []hopStep
	f.Trace = func(from, to ibswtest.End, pkt []byte) {
		p, err := proto.Parse(pkt, proto.LinkIB)
		if err != nil {
			t.Errorf("%s: %v", f.EndName(from), err)
			return
		}
		smp, err := proto.ParseSMP(p.Payload)
		if err != nil {
			t.Errorf("%s: %v", f.EndName(from), err)
			return
		}
		steps = append(steps, hopStep{
			from: f.EndName(from), to: f.EndName(to),
			d: smp.Direction(), hp: smp.HopPointer(),
			ret: append([]byte(nil), smp.ReturnPath()[1:smp.HopCount()+1]...),
		})
	}

	for _, c := range []struct {
		name     string
		sm       *ibswtest.CA
		path     []byte
		want     []hopStep
		wantGUID uint64
		wantPort uint8
	}{
		{
			name: "CA1 to B, 2 hops",
			sm:   ca1, path: []byte{1, 3},
			want: []hopStep{
				{"CA1/1", "A/1", false, 1, []byte{0, 0}},
				{"A/3", "B/3", false, 2, []byte{1, 0}},
				{"B/3", "A/3", true, 2, []byte{1, 3}},
				{"A/1", "CA1/1", true, 1, []byte{1, 3}},
			},
			wantGUID: guidB, wantPort: 3,
		},
		{
			name: "CA3 to A, 2 hops, the other way",
			sm:   ca3, path: []byte{1, 3},
			want: []hopStep{
				{"CA3/1", "B/1", false, 1, []byte{0, 0}},
				{"B/3", "A/3", false, 2, []byte{1, 0}},
				{"A/3", "B/3", true, 2, []byte{1, 3}},
				{"B/1", "CA3/1", true, 1, []byte{1, 3}},
			},
			wantGUID: guidA, wantPort: 3,
		},
		{
			name: "CA1 through A and B to CA3, 3 hops",
			sm:   ca1, path: []byte{1, 3, 1},
			want: []hopStep{
				{"CA1/1", "A/1", false, 1, []byte{0, 0, 0}},
				{"A/3", "B/3", false, 2, []byte{1, 0, 0}},
				{"B/1", "CA3/1", false, 3, []byte{1, 3, 0}},
				{"CA3/1", "B/1", true, 3, []byte{1, 3, 1}},
				{"B/3", "A/3", true, 2, []byte{1, 3, 1}},
				{"A/1", "CA1/1", true, 1, []byte{1, 3, 1}},
			},
			wantGUID: 0xCA00000000000030, wantPort: 1,
		},
		{
			name: "CA1 to A, 1 hop",
			sm:   ca1, path: []byte{1},
			want: []hopStep{
				{"CA1/1", "A/1", false, 1, []byte{0}},
				{"A/1", "CA1/1", true, 1, []byte{1}},
			},
			wantGUID: guidA, wantPort: 1,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			steps = nil
			sm := ibswtest.NewSM(f, c.sm)
			d, st, err := sm.DR(proto.MADMethodGet, c.path, proto.SMPAttrNodeInfo, 0, nil)
			if err != nil || st != 0 {
				t.Fatalf("status %#x: %v", st, err)
			}
			if len(steps) != len(c.want) {
				t.Fatalf("got %d hops, want %d: %v", len(steps), len(c.want), steps)
			}
			for i, got := range steps {
				w := c.want[i]
				if got.from != w.from || got.to != w.to || got.d != w.d || got.hp != w.hp || !bytes.Equal(got.ret, w.ret) {
					t.Errorf("hop %d: %v\n         want %v", i, got, w)
				}
			}
			ni := proto.NodeInfo(d).Fields()
			if ni.NodeGUID != c.wantGUID || ni.LocalPortNum != c.wantPort {
				t.Errorf("answer from %#x port %d, want %#x port %d", ni.NodeGUID, ni.LocalPortNum, c.wantGUID, c.wantPort)
			}
		})
	}
}

// TestDirectedRouteRules checks single hops at one switch, including every
// way a directed-route SMP is refused.
func TestDirectedRouteRules(t *testing.T) {
	badICRC := drPacket(drFields{method: proto.MADMethodGet, attr: proto.SMPAttrNodeInfo, hc: 2, hp: 1, initial: []byte{1, 2}})
	badICRC[proto.LRHSize+proto.BTHSize+proto.DETHSize+proto.SMPDataOffset] ^= 1 // MAD data bit
	n := len(badICRC) - proto.VCRCSize
	proto.PutVCRC(badICRC[n:], proto.VCRC(badICRC[:n])) // link-level fine

	const get = proto.MADMethodGet
	for _, c := range []struct {
		name string
		pkt  []byte
		// want: the egress port and, for a relayed SMP, its
		// HopPointer and ReturnPath[1..HopCount].
		wantPort int
		wantHP   uint8
		wantRet  []byte
		// or a drop counted here:
		drop func(Drops) uint64
	}{
		{
			name:     "C14-9:2 intermediate hop",
			pkt:      drPacket(drFields{method: get, hc: 3, hp: 1, initial: []byte{1, 2, 5}}),
			wantPort: 2, wantHP: 2, wantRet: []byte{3, 0, 0},
		},
		{
			name:     "C14-9:2 out the ingress port",
			pkt:      drPacket(drFields{method: get, hc: 2, hp: 1, initial: []byte{1, 3}}),
			wantPort: 3, wantHP: 2, wantRet: []byte{3, 0},
		},
		{
			name:     "C14-13:2 returning hop",
			pkt:      drPacket(drFields{method: proto.MADMethodGetResp, dir: true, hc: 3, hp: 2, initial: []byte{1, 3, 1}, ret: []byte{2, 4, 1}}),
			wantPort: 2, wantHP: 1, wantRet: []byte{2, 4, 1},
		},
		{
			name: "C14-9:1 HopPointer 0 on the wire",
			pkt:  drPacket(drFields{method: get, hc: 2, hp: 0, initial: []byte{1, 2}}),
			drop: func(d Drops) uint64 { return d.DirectedRoute },
		},
		{
			name: "HopCount 0 on the wire",
			pkt:  drPacket(drFields{method: get, hc: 0, hp: 0}),
			drop: func(d Drops) uint64 { return d.DirectedRoute },
		},
		{
			name: "outbound HopPointer HopCount+1",
			pkt:  drPacket(drFields{method: get, hc: 1, hp: 2, initial: []byte{1}}),
			drop: func(d Drops) uint64 { return d.DirectedRoute },
		},
		{
			name: "InitialPath names port 0",
			pkt:  drPacket(drFields{method: get, hc: 2, hp: 1, initial: []byte{1, 0}}),
			drop: func(d Drops) uint64 { return d.DirectedRoute },
		},
		{
			name: "InitialPath names a port the switch lacks",
			pkt:  drPacket(drFields{method: get, hc: 2, hp: 1, initial: []byte{1, 9}}),
			drop: func(d Drops) uint64 { return d.DirectedRoute },
		},
		{
			name: "C14-13:3 returning to a switch at index 0",
			pkt:  drPacket(drFields{method: proto.MADMethodGetResp, dir: true, hc: 2, hp: 1, initial: []byte{1, 3}, ret: []byte{3, 1}}),
			drop: func(d Drops) uint64 { return d.DirectedRoute },
		},
		{
			name: "returning HopPointer HopCount+1",
			pkt:  drPacket(drFields{method: proto.MADMethodGetResp, dir: true, hc: 2, hp: 3, initial: []byte{1, 3}, ret: []byte{3, 1}}),
			drop: func(d Drops) uint64 { return d.DirectedRoute },
		},
		{
			name: "ReturnPath names a port the switch lacks",
			pkt:  drPacket(drFields{method: proto.MADMethodGetResp, dir: true, hc: 2, hp: 2, initial: []byte{1, 3}, ret: []byte{77, 1}}),
			drop: func(d Drops) uint64 { return d.DirectedRoute },
		},
		{
			name: "DrSLID not permissive",
			pkt:  drPacket(drFields{method: get, hc: 1, hp: 1, initial: []byte{1}, drSLID: 5}),
			drop: func(d Drops) uint64 { return d.DRUnsupported },
		},
		{
			name: "DrDLID not permissive",
			pkt:  drPacket(drFields{method: get, hc: 1, hp: 1, initial: []byte{1}, drDLID: 7}),
			drop: func(d Drops) uint64 { return d.DRUnsupported },
		},
		{
			name: "egress port without a link",
			pkt:  drPacket(drFields{method: get, hc: 2, hp: 1, initial: []byte{1, 4}}),
			drop: func(d Drops) uint64 { return d.EgressState },
		},
		{
			name: "MAD corrupted under a good VCRC",
			pkt:  badICRC,
			drop: func(d Drops) uint64 { return d.BadICRC },
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newTestSwitch(t, 4)
			for p := 1; p <= 3; p++ {
				s.SetPortLink(p, true) // Init: VL15 only
			}
			out := ingress(s, 3, c.pkt)
			if c.drop != nil {
				if len(out) != 0 {
					t.Fatalf("sent %d packets, want a drop", len(out))
				}
				if got := c.drop(s.Snapshot().Drops); got != 1 {
					t.Errorf("drop counter %d, want 1 (%+v)", got, s.Snapshot().Drops)
				}
				return
			}
			if len(out) != 1 || out[0].port != c.wantPort {
				t.Fatalf("sent %v, want one packet on port %d", out, c.wantPort)
			}
			p, err := proto.Parse(out[0].pkt, proto.LinkIB)
			if err != nil || !p.VCRCValid() || !p.ICRCValid() || p.LRH.VL() != proto.VL15 {
				t.Fatalf("relayed SMP broken: %v", err)
			}
			smp, _ := proto.ParseSMP(p.Payload)
			if smp.HopPointer() != c.wantHP || !bytes.Equal(smp.ReturnPath()[1:smp.HopCount()+1], c.wantRet) {
				t.Errorf("HopPointer %d ReturnPath %v, want %d %v", smp.HopPointer(), smp.ReturnPath()[1:smp.HopCount()+1], c.wantHP, c.wantRet)
			}
		})
	}
}
