package ibsw

import (
	"bytes"
	"slices"
	"testing"

	"github.com/PacketFive/hinic/internal/proto"
)

// forwardingSwitch returns a 4-port switch with LID 10, ports 1-3 Active
// (VL0-7), port 4 linked but only in Init, and an LFT sending LIDs 1-4 to
// ports 1-4, LID 5 nowhere, LinearFDBTop 10.
func forwardingSwitch(t testing.TB) *Switch {
	t.Helper()
	s := newTestSwitch(t, 4)
	activate(t, s, 1, 2, 3)
	s.SetPortLink(4, true)
	program(t, s, 1, 10, map[uint16]uint8{1: 1, 2: 2, 3: 3, 4: 4, 5: proto.LFTPortDrop, 10: 0})
	return s
}

// setMFT writes one MFT entry's port mask for ports 0-15 through the SMA.
func setMFT(t testing.TB, s *Switch, mlid uint16, position uint8, mask uint16) {
	t.Helper()
	block, i, ok := proto.MFTMLIDBlock(mlid)
	if !ok {
		t.Fatalf("%#x is not an MLID", mlid)
	}
	get := sma(t, s, 1, proto.MADMethodGet, proto.SMPAttrMulticastForwardingTable, proto.MFTAttrMod(position, block), nil)
	d := append([]byte(nil), get.Data()...)
	proto.MulticastForwardingTable(d).SetPortMask(i, mask)
	if r := sma(t, s, 1, proto.MADMethodSet, proto.SMPAttrMulticastForwardingTable, proto.MFTAttrMod(position, block), d); r.Status() != 0 {
		t.Fatalf("Set MFT: %#x", r.Status())
	}
}

func TestUnicastForwarding(t *testing.T) {
	rawPacket := func(dlid uint16) []byte {
		// LNH 0: LRH, 16 bytes of raw payload, VCRC.
		b := make([]byte, proto.LRHSize+16+proto.VCRCSize)
		proto.LRH(b).Encode(&proto.LRHFields{LNH: proto.LNHRaw, DLID: dlid, SLID: 1, PktLen: uint16((len(b) - 2) / 4)})
		proto.PutVCRC(b[len(b)-2:], proto.VCRC(b[:len(b)-2]))
		return b
	}
	fixVCRC := func(b []byte) []byte {
		n := len(b) - proto.VCRCSize
		proto.PutVCRC(b[n:], proto.VCRC(b[:n]))
		return b
	}
	mutate := func(b []byte, f func([]byte)) []byte { f(b); return fixVCRC(b) }

	for _, c := range []struct {
		name  string
		in    int
		pkt   []byte
		setup func(*Switch)
		// want the packet out of this port, with this VL ...
		want   int
		wantVL uint8
		// ... or a drop counted by this field of Drops and of the
		// given port's Counters.
		drop    func(Drops) uint64
		ctrPort int
		ctr     func(Counters) uint64
	}{
		{name: "LID 2 out port 2", in: 1, pkt: dataPacket(2, 1, 0, 0, 0xFFFF, 64), want: 2},
		{name: "4 KiB payload", in: 3, pkt: dataPacket(1, 3, 0, 0, 0xFFFF, 4096), want: 1},
		{name: "SL 3 rewrites VL 0 to 3", in: 1, pkt: dataPacket(3, 1, 3, 0, 0xFFFF, 64), want: 3, wantVL: 3},
		{name: "raw packet", in: 2, pkt: rawPacket(3), want: 3},
		{
			name: "unknown opcode is not the switch's business", in: 1,
			pkt:  mutate(dataPacket(2, 1, 0, 0, 0xFFFF, 64), func(b []byte) { b[proto.LRHSize] = 0x1F }),
			want: 2,
		},
		{
			name: "LFT entry 0xFF", in: 1, pkt: dataPacket(5, 1, 0, 0, 0xFFFF, 64),
			drop: func(d Drops) uint64 { return d.NoRoute }, ctrPort: 1, ctr: func(c Counters) uint64 { return c.RcvSwitchRelayErrors },
		},
		{
			name: "DLID above LinearFDBTop", in: 1, pkt: dataPacket(11, 1, 0, 0, 0xFFFF, 64),
			drop: func(d Drops) uint64 { return d.NoRoute }, ctrPort: 1, ctr: func(c Counters) uint64 { return c.RcvSwitchRelayErrors },
		},
		{
			name: "DLID 0", in: 1, pkt: dataPacket(0, 1, 0, 0, 0xFFFF, 64),
			drop: func(d Drops) uint64 { return d.NoRoute }, ctrPort: 1, ctr: func(c Counters) uint64 { return c.RcvSwitchRelayErrors },
		},
		{
			name: "route back out the ingress port", in: 2, pkt: dataPacket(2, 1, 0, 0, 0xFFFF, 64),
			drop: func(d Drops) uint64 { return d.Loop }, ctrPort: 2, ctr: func(c Counters) uint64 { return c.RcvSwitchRelayErrors },
		},
		{
			name: "egress port only in Init", in: 1, pkt: dataPacket(4, 1, 0, 0, 0xFFFF, 64),
			drop: func(d Drops) uint64 { return d.EgressState }, ctrPort: 4, ctr: func(c Counters) uint64 { return c.XmitDiscards },
		},
		{
			name: "egress port lost its link", in: 1, pkt: dataPacket(2, 1, 0, 0, 0xFFFF, 64),
			setup: func(s *Switch) { s.SetPortLink(2, false) },
			drop:  func(d Drops) uint64 { return d.EgressState }, ctrPort: 2, ctr: func(c Counters) uint64 { return c.XmitDiscards },
		},
		{
			name: "data arriving on a port in Init", in: 4, pkt: dataPacket(1, 4, 0, 0, 0xFFFF, 64),
			drop: func(d Drops) uint64 { return d.IngressState },
		},
		{
			name: "SL without an operational VL", in: 1, pkt: dataPacket(2, 1, 9, 0, 0xFFFF, 64),
			drop: func(d Drops) uint64 { return d.SLToVL }, ctrPort: 1, ctr: func(c Counters) uint64 { return c.RcvSwitchRelayErrors },
		},
		{
			name: "bad VCRC", in: 1,
			pkt:  func() []byte { b := dataPacket(2, 1, 0, 0, 0xFFFF, 64); b[len(b)-1] ^= 0x80; return b }(),
			drop: func(d Drops) uint64 { return d.BadVCRC }, ctrPort: 1, ctr: func(c Counters) uint64 { return c.RcvErrors },
		},
		{
			name: "PktLen longer than the packet", in: 1, pkt: dataPacket(2, 1, 0, 0, 0xFFFF, 64)[:60],
			drop: func(d Drops) uint64 { return d.Malformed }, ctrPort: 1, ctr: func(c Counters) uint64 { return c.RcvErrors },
		},
		{
			name: "shorter than an LRH", in: 1, pkt: []byte{0, 2, 0},
			drop: func(d Drops) uint64 { return d.Malformed }, ctrPort: 1, ctr: func(c Counters) uint64 { return c.RcvErrors },
		},
		{
			name: "LVer 1", in: 1, pkt: mutate(dataPacket(2, 1, 0, 0, 0xFFFF, 64), func(b []byte) { b[0] |= 1 }),
			drop: func(d Drops) uint64 { return d.Malformed }, ctrPort: 1, ctr: func(c Counters) uint64 { return c.RcvErrors },
		},
		{
			name: "LNH says BTH but there is no room", in: 1,
			pkt: func() []byte {
				b := make([]byte, proto.LRHSize+4+proto.VCRCSize)
				proto.LRH(b).Encode(&proto.LRHFields{LNH: proto.LNHIBALocal, DLID: 2, SLID: 1, PktLen: 3})
				return fixVCRC(b)
			}(),
			drop: func(d Drops) uint64 { return d.Malformed }, ctrPort: 1, ctr: func(c Counters) uint64 { return c.RcvErrors },
		},
		{
			name: "permissive SLID on a data VL", in: 1, pkt: dataPacket(2, 0xFFFF, 0, 0, 0xFFFF, 64),
			drop: func(d Drops) uint64 { return d.Malformed }, ctrPort: 1, ctr: func(c Counters) uint64 { return c.RcvErrors },
		},
		{
			name: "QP0 on a data VL", in: 1,
			pkt: mutate(dataPacket(2, 1, 0, 0, 0xFFFF, 256), func(b []byte) {
				proto.BTH(b[proto.LRHSize:]).Encode(&proto.BTHFields{Opcode: proto.OpUDSendOnly, PKey: 0xFFFF})
			}),
			drop: func(d Drops) uint64 { return d.VL15 }, ctrPort: 1, ctr: func(c Counters) uint64 { return c.VL15Dropped },
		},
		{
			name: "data QP on VL15", in: 1, pkt: dataPacket(2, 1, 0, 15, 0xFFFF, 64),
			drop: func(d Drops) uint64 { return d.VL15 }, ctrPort: 1, ctr: func(c Counters) uint64 { return c.VL15Dropped },
		},
		{
			name: "raw packet filtered inbound", in: 2, pkt: rawPacket(3),
			setup: func(s *Switch) { s.ports[2].pi.FilterRawInbound = true },
			drop:  func(d Drops) uint64 { return d.RawFilter }, ctrPort: 2, ctr: func(c Counters) uint64 { return c.RcvConstraintErrors },
		},
		{
			name: "raw packet filtered outbound", in: 2, pkt: rawPacket(3),
			setup: func(s *Switch) { s.ports[3].pi.FilterRawOutbound = true },
			drop:  func(d Drops) uint64 { return d.RawFilter }, ctrPort: 3, ctr: func(c Counters) uint64 { return c.XmitConstraintErrors },
		},
		{
			name: "P_Key outside the ingress port's table", in: 1, pkt: dataPacket(2, 1, 0, 0, 0x8005, 64),
			setup: func(s *Switch) { s.ports[1].pi.PartitionEnforcementInbound = true },
			drop:  func(d Drops) uint64 { return d.Partition }, ctrPort: 1, ctr: func(c Counters) uint64 { return c.RcvConstraintErrors },
		},
		{
			name: "P_Key outside the egress port's table", in: 1, pkt: dataPacket(2, 1, 0, 0, 0x8005, 64),
			setup: func(s *Switch) { s.ports[2].pi.PartitionEnforcementOutbound = true },
			drop:  func(d Drops) uint64 { return d.Partition }, ctrPort: 2, ctr: func(c Counters) uint64 { return c.XmitConstraintErrors },
		},
		{
			name: "limited member matches the full default key", in: 1, pkt: dataPacket(2, 1, 0, 0, 0x7FFF, 64),
			setup: func(s *Switch) {
				s.ports[1].pi.PartitionEnforcementInbound = true
				s.ports[2].pi.PartitionEnforcementOutbound = true
			},
			want: 2,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := forwardingSwitch(t)
			if c.setup != nil {
				c.setup(s)
			}
			before := s.Snapshot()
			orig := append([]byte(nil), c.pkt...)
			out := ingress(s, c.in, c.pkt)
			after := s.Snapshot()
			if after.Ports[c.in].Counters.RcvPkts != before.Ports[c.in].Counters.RcvPkts+1 {
				t.Errorf("ingress PortRcvPkts not counted")
			}
			if c.drop != nil {
				if len(out) != 0 {
					t.Fatalf("sent %d packets, want a drop", len(out))
				}
				if got := c.drop(after.Drops) - c.drop(before.Drops); got != 1 {
					t.Errorf("drop counted %d times: %+v", got, after.Drops)
				}
				if c.ctr != nil {
					if got := c.ctr(after.Ports[c.ctrPort].Counters) - c.ctr(before.Ports[c.ctrPort].Counters); got != 1 {
						t.Errorf("port %d counter grew by %d, want 1", c.ctrPort, got)
					}
				}
				return
			}
			if len(out) != 1 || out[0].port != c.want {
				t.Fatalf("sent %d packets (%v), want one on port %d", len(out), out, c.want)
			}
			got := out[0].pkt
			p, _ := proto.Parse(got, proto.LinkIB)
			if !p.VCRCValid() || p.LRH.VL() != c.wantVL {
				t.Errorf("VL %d (want %d), VCRC valid %v", p.LRH.VL(), c.wantVL, p.VCRCValid())
			}
			// Apart from the VL nibble and the VCRC the packet is
			// untouched: the ICRC is end-to-end.
			n := len(got) - proto.VCRCSize
			if len(got) != len(orig) || got[0]&0x0F != orig[0]&0x0F || !bytes.Equal(got[1:n], orig[1:n]) {
				t.Errorf("forwarded packet changed beyond VL and VCRC")
			}
			c2 := after.Ports[c.want].Counters
			c1 := before.Ports[c.want].Counters
			if c2.XmitPkts != c1.XmitPkts+1 || c2.XmitData != c1.XmitData+uint64(len(got)/4) {
				t.Errorf("egress counters: %d pkts %d words", c2.XmitPkts-c1.XmitPkts, c2.XmitData-c1.XmitData)
			}
		})
	}
}

// TestArmedPortGoesActiveOnData: a data packet received on an Armed port
// moves it to Active (IBA 7.2) and is forwarded.
func TestArmedPortGoesActiveOnData(t *testing.T) {
	s := forwardingSwitch(t)
	setState(t, s, 1, 4, proto.PortStateArmed)
	// Armed: no data out of it yet.
	if out := ingress(s, 1, dataPacket(4, 1, 0, 0, 0xFFFF, 64)); len(out) != 0 {
		t.Fatalf("data sent out of an Armed port")
	}
	out := ingress(s, 4, dataPacket(1, 4, 0, 0, 0xFFFF, 64))
	if len(out) != 1 || out[0].port != 1 {
		t.Fatalf("data from an Armed port not forwarded: %v", out)
	}
	if st := s.Snapshot().Ports[4].State; st != proto.PortStateActive {
		t.Errorf("port 4 is %s, want Active", PortStateName(st))
	}
}

func TestMulticastForwarding(t *testing.T) {
	for _, c := range []struct {
		name  string
		ports int
		in    int
		mlid  uint16
		// position -> mask to program for mlid
		masks map[uint8]uint16
		want  []int
		// drops.NoMulticastPort expected
		noPort bool
		// XmitDiscards expected on this port
		discard int
	}{
		{name: "group of three, never back to the sender", ports: 4, in: 1, mlid: 0xC001,
			masks: map[uint8]uint16{0: 1<<0 | 1<<1 | 1<<2 | 1<<3}, want: []int{2, 3}},
		{name: "sender alone in its group", ports: 4, in: 2, mlid: 0xC001,
			masks: map[uint8]uint16{0: 1 << 2}, want: nil},
		{name: "empty group", ports: 4, in: 1, mlid: 0xC002, want: nil, noPort: true},
		{name: "MLID beyond MulticastFDBCap", ports: 4, in: 1, mlid: 0xFFFE, want: nil, noPort: true},
		{name: "member port not Active", ports: 4, in: 1, mlid: 0xC010,
			masks: map[uint8]uint16{0: 1<<2 | 1<<4}, want: []int{2}, discard: 4},
		{name: "ports 16 and up in position 1", ports: 20, in: 1, mlid: 0xC3FF,
			masks: map[uint8]uint16{0: 1<<1 | 1<<3, 1: 1<<1 | 1<<3}, want: []int{3, 17, 19}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newTestSwitch(t, c.ports)
			active := []int{1, 2, 3}
			if c.ports > 16 {
				active = append(active, 17, 19)
			}
			activate(t, s, active...)
			s.SetPortLink(4, true)
			for pos, m := range c.masks {
				setMFT(t, s, c.mlid, pos, m)
			}
			out := ingress(s, c.in, dataPacket(c.mlid, 7, 0, 0, 0xFFFF, 100))
			var got []int
			for _, o := range out {
				got = append(got, o.port)
				if p, _ := proto.Parse(o.pkt, proto.LinkIB); !p.VCRCValid() || p.LRH.DLID() != c.mlid {
					t.Errorf("port %d: bad copy", o.port)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("sent to %v, want %v", got, c.want)
			}
			snap := s.Snapshot()
			if (snap.Drops.NoMulticastPort == 1) != c.noPort {
				t.Errorf("NoMulticastPort %d", snap.Drops.NoMulticastPort)
			}
			if c.discard != 0 && snap.Ports[c.discard].Counters.XmitDiscards != 1 {
				t.Errorf("port %d XmitDiscards %d, want 1", c.discard, snap.Ports[c.discard].Counters.XmitDiscards)
			}
			if len(c.masks) > 0 && len(snap.MFT) != 1 {
				t.Errorf("snapshot MFT %+v", snap.MFT)
			}
		})
	}
}

// TestLIDRoutedSMPRelay: a LID-routed SMP for another LID is relayed on
// VL15 by the LFT, also through a port that is only in Init, and untouched.
func TestLIDRoutedSMPRelay(t *testing.T) {
	s := forwardingSwitch(t)
	pkt := smpPacket(4, 1, lidMAD(proto.MADMethodGet, proto.SMPAttrNodeInfo, 0, nil))
	orig := append([]byte(nil), pkt...)
	out := ingress(s, 1, pkt)
	if len(out) != 1 || out[0].port != 4 || !bytes.Equal(out[0].pkt, orig) {
		t.Fatalf("LID-routed SMP not relayed unchanged to port 4: %v", out)
	}
	// Multicast DLIDs are not for SMPs.
	out = ingress(s, 1, smpPacket(0xC001, 1, lidMAD(proto.MADMethodGet, proto.SMPAttrNodeInfo, 0, nil)))
	if len(out) != 0 || s.Snapshot().Drops.VL15 != 1 {
		t.Errorf("multicast SMP: sent %v, drops %+v", out, s.Snapshot().Drops)
	}
}
