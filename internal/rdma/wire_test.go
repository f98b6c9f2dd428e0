package rdma_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
)

func TestGIDTableAndQueries(t *testing.T) {
	p := newPair(t, pairOpts{ipv6: true, mtu: 2048})
	d := p.a.dev
	g0, _ := d.QueryGID(0)
	// fe80::0048:4eff:fe00:0001 from MAC 02:48:4e:00:00:01 (U/L bit flipped).
	want0 := [16]byte{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x48, 0x4e, 0xff, 0xfe, 0x00, 0x00, 0x01}
	if g0 != want0 {
		t.Errorf("GID 0 %x, want %x", g0, want0)
	}
	g1, _ := d.QueryGID(1)
	if g1 != netip.MustParseAddr("::ffff:10.42.0.1").As16() {
		t.Errorf("GID 1 %x, want ::ffff:10.42.0.1", g1)
	}
	g2, _ := d.QueryGID(2)
	if g2 != netip.MustParseAddr("fd00::42:1").As16() {
		t.Errorf("GID 2 %x", g2)
	}
	if _, err := d.QueryGID(3); !errors.Is(err, rdma.ErrInvalid) {
		t.Errorf("GID 3: %v", err)
	}
	if ty, _ := d.QueryGIDType(1); ty != rdma.GIDTypeRoCEv2 {
		t.Errorf("GID type %v", ty)
	}
	pa := d.QueryPort()
	if pa.State != rdma.PortActive || pa.ActiveMTU != rdma.MTU2048 || pa.MaxMTU != rdma.MTU4096 ||
		pa.LinkLayer != rdma.LinkLayerEthernet || pa.GIDTableLen != 3 || pa.PKeyTableLen != 1 {
		t.Errorf("port attr %+v", pa)
	}
	da := d.QueryDevice()
	if da.VendorID != rdma.DefaultVendorID || da.MaxQP != rdma.DefaultMaxQP || da.MaxSGE != rdma.DefaultMaxSGE ||
		da.MaxQPRdAtom != rdma.DefaultMaxQPRDAtomic || da.PhysPortCnt != 1 || da.NodeGUID == 0 || da.AtomicCap != rdma.AtomicCapHCA {
		t.Errorf("device attr %+v", da)
	}
	if pk, err := d.QueryPKey(0); err != nil || pk != 0xFFFF {
		t.Errorf("P_Key %#x %v", pk, err)
	}
}

func TestNewDeviceConfig(t *testing.T) {
	mem := rdma.NewHostMemory(4096)
	port := &interceptPort{}
	mac := [6]byte{2, 0, 0, 0, 0, 1}
	for _, c := range []struct {
		name string
		cfg  rdma.DeviceConfig
		ok   bool
	}{
		{"defaults", rdma.DeviceConfig{MAC: mac, Memory: mem}, true},
		{"MTU code", rdma.DeviceConfig{MAC: mac, Memory: mem, MTU: 5}, true},
		{"MTU 9000", rdma.DeviceConfig{MAC: mac, Memory: mem, MTU: 9000}, false},
		{"no memory", rdma.DeviceConfig{MAC: mac}, false},
		{"no MAC", rdma.DeviceConfig{Memory: mem}, false},
		{"multicast MAC", rdma.DeviceConfig{MAC: [6]byte{1, 0, 0, 0, 0, 1}, Memory: mem}, false},
		{"IPv6 as IPv4", rdma.DeviceConfig{MAC: mac, Memory: mem, IPv4: []netip.Addr{netip.MustParseAddr("fd00::1")}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := rdma.NewDevice(c.cfg, port)
			if (err == nil) != c.ok {
				t.Fatalf("err %v, want ok=%v", err, c.ok)
			}
			if d != nil {
				d.Close()
			}
		})
	}
}

// TestFraming checks the RoCEv2 frames on the wire: UDP ports, DSCP and
// ECN, TTL/hop limit, DF, IPv4 vs IPv6 by GID, and the ICRC.
func TestFraming(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(map[bool]string{false: "ipv4", true: "ipv6"}[v6], func(t *testing.T) {
			p, ia, ib := newInterceptPair(t, pairOpts{ipv6: v6})
			ia.keep, ib.keep = true, true
			mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendSignaled,
				SGList: p.a.sge(0, 3000), RKey: p.b.mr.RKey}}))
			p.poll(p.a.scq, 1)
			wantPort := udpSourcePort(p.qa.QPN())
			check := func(frames [][]byte, from, to *node, dataFrames bool) {
				t.Helper()
				if len(frames) == 0 {
					t.Fatal("no frames")
				}
				for _, f := range frames {
					pkt, err := proto.Parse(f, proto.LinkEthernet)
					if err != nil || pkt.Type != proto.FrameRoCEv2 || !pkt.ICRCValid() {
						t.Fatalf("frame does not parse as RoCEv2 with a valid ICRC: %v", err)
					}
					if [6]byte(pkt.Eth.Dst()) != to.mac || [6]byte(pkt.Eth.Src()) != from.mac {
						t.Errorf("MACs %x -> %x", pkt.Eth.Src(), pkt.Eth.Dst())
					}
					if pkt.UDP.DstPort() != proto.RoCEv2Port || pkt.UDP.Checksum() != 0 {
						t.Errorf("UDP dst port %d checksum %#x", pkt.UDP.DstPort(), pkt.UDP.Checksum())
					}
					data := pkt.BTH.Opcode() != proto.OpRCAcknowledge
					if data != dataFrames {
						continue
					}
					wantECN := uint8(proto.ECNNotECT)
					if data {
						wantECN = proto.ECNECT0
					}
					if v6 {
						if pkt.IPv6 == nil {
							t.Fatal("IPv6 GIDs sent as IPv4")
						}
						if pkt.IPv6.TrafficClass() != 26<<2|wantECN || pkt.IPv6.HopLimit() != 64 {
							t.Errorf("TC %#x hop limit %d", pkt.IPv6.TrafficClass(), pkt.IPv6.HopLimit())
						}
					} else {
						ip := pkt.IPv4
						if ip == nil {
							t.Fatal("::ffff: GIDs not sent as IPv4")
						}
						if ip.DSCP() != 26 || ip.ECN() != wantECN || ip.TTL() != 64 || ip.Flags() != 0b010 || !ip.IsChecksumValid() {
							t.Errorf("DSCP %d ECN %d TTL %d flags %b", ip.DSCP(), ip.ECN(), ip.TTL(), ip.Flags())
						}
						if [4]byte(ip.Src()) != from.ip.As4() || [4]byte(ip.Dst()) != to.ip.As4() {
							t.Errorf("IPs %v -> %v", ip.Src(), ip.Dst())
						}
					}
				}
			}
			fa, fb := ia.captured(), ib.captured()
			check(fa, p.a, p.b, true)
			check(fb, p.b, p.a, false)
			pkt, _ := proto.Parse(fa[0], proto.LinkEthernet)
			if pkt.UDP.SrcPort() != wantPort || pkt.UDP.SrcPort()&0xC000 != 0xC000 {
				t.Errorf("UDP source port %#x, want %#x", pkt.UDP.SrcPort(), wantPort)
			}
			if pkt.BTH.Opcode() != proto.OpRCWriteFirst || pkt.BTH.DestQP() != p.qb.QPN() || pkt.BTH.PKey() != 0xFFFF ||
				uint32(pkt.BTH.PSN()) != remotePSN(p.qa) || len(pkt.Payload) != 1024 || pkt.RETH.DMALength() != 3000 {
				t.Errorf("first packet: %v to %#x PSN %#x payload %d", pkt.BTH.Opcode(), pkt.BTH.DestQP(), pkt.BTH.PSN(), len(pkt.Payload))
			}
			last, _ := proto.Parse(fa[len(fa)-1], proto.LinkEthernet)
			if last.BTH.Opcode() != proto.OpRCWriteLast || !last.BTH.AckReq() || len(last.Payload) != 3000-2048 {
				t.Errorf("last packet: %v AckReq %v payload %d", last.BTH.Opcode(), last.BTH.AckReq(), len(last.Payload))
			}
		})
	}
}

// udpSourcePort is rxe's formula, 0xC000 + hash_32(qpn, 14).
func udpSourcePort(qpn uint32) uint16 { return 0xC000 | uint16((qpn*0x61C88647)>>18&0x3FFF) }

// TestReceiveValidation feeds a device frames it must drop and count.
func TestReceiveValidation(t *testing.T) {
	p, ia, _ := newInterceptPair(t, pairOpts{})
	ia.keep = true
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendSignaled,
		SGList: p.a.sge(0, 100), RKey: p.b.mr.RKey}}))
	p.poll(p.a.scq, 1)
	good := ia.captured()[0]
	mod := func(f func(b []byte)) []byte { b := append([]byte(nil), good...); f(b); return b }
	arp := make([]byte, 60)
	copy(arp, p.b.mac[:])
	arp[12], arp[13] = 0x08, 0x06
	cases := []struct {
		name  string
		frame []byte
		field func(c rdma.Counters) uint64
	}{
		{"bad ICRC", mod(func(b []byte) { b[len(b)-10] ^= 1 }), func(c rdma.Counters) uint64 { return c.RxICRCErrors }},
		{"bad ICRC bytes", mod(func(b []byte) { b[len(b)-1] ^= 0x80 }), func(c rdma.Counters) uint64 { return c.RxICRCErrors }},
		{"truncated", good[:50], func(c rdma.Counters) uint64 { return c.RxMalformed }},
		{"bad IPv4 checksum", mod(func(b []byte) { b[14+10] ^= 0xFF }), func(c rdma.Counters) uint64 { return c.RxMalformed }},
		{"oversize", make([]byte, 10000), func(c rdma.Counters) uint64 { return c.RxMalformed }},
		{"not for our MAC", mod(func(b []byte) { b[0] ^= 2 }), func(c rdma.Counters) uint64 { return c.RxNotForUs }},
		{"not RoCE (ARP)", arp, func(c rdma.Counters) uint64 { return c.RxNotRoCE }},
		{"unknown QP", craftTo(p, 0x777), func(c rdma.Counters) uint64 { return c.RxUnknownQP }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := c.field(p.b.dev.Counters())
			rx := p.b.dev.Counters().RxPackets
			p.b.dev.Deliver(c.frame)
			p.settle()
			if got := c.field(p.b.dev.Counters()); got != before+1 {
				t.Fatalf("counter %d -> %d", before, got)
			}
			if p.b.dev.Counters().RxPackets != rx {
				t.Fatal("dropped frame counted as received")
			}
		})
	}
	// The QP still works.
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 2, Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendSignaled,
		SGList: p.a.sge(0, 100), RKey: p.b.mr.RKey}}))
	wantWC(t, p.poll(p.a.scq, 1)[0], 2, rdma.WCSuccess, rdma.WCRDMAWrite)
}

func craftTo(p *pair, qpn uint32) []byte {
	f := proto.PacketFields{
		Link: proto.LinkEthernet,
		Eth:  proto.EthernetFields{Dst: p.b.mac, Src: p.a.mac},
		IP4:  proto.IPv4Fields{TTL: 64, Src: p.a.ip.As4(), Dst: p.b.ip.As4()},
		BTH:  proto.BTHFields{Opcode: proto.OpRCSendOnly, PKey: 0xFFFF, DestQP: qpn},
	}
	b := make([]byte, f.Len())
	f.Encode(b)
	return b
}

// FuzzDeliver feeds arbitrary frames to a device with a live QP. Property:
// no panic, and the device keeps working (checked by the seeds' run).
func FuzzDeliver(f *testing.F) {
	p := newPair(f, pairOpts{})
	frames := [][]byte{
		craft(p, proto.OpRCSendOnly, remotePSN(p.qa), []byte("hello"), proto.RETHFields{}),
		craft(p, proto.OpRCWriteOnly, remotePSN(p.qa), []byte("data"), proto.RETHFields{VA: 0, RKey: p.b.mr.RKey, DMALength: 4}),
		craft(p, proto.OpRCReadRequest, remotePSN(p.qa), nil, proto.RETHFields{VA: 0, RKey: p.b.mr.RKey, DMALength: 5000}),
		craft(p, proto.OpRCWriteFirst, remotePSN(p.qa), make([]byte, 1024), proto.RETHFields{VA: 1 << 40, RKey: 1, DMALength: 1 << 31}),
		craft(p, proto.OpRCAcknowledge, 0, nil, proto.RETHFields{}),
		craftTo(p, p.qb.QPN()),
	}
	for _, fr := range frames {
		f.Add(fr)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		// Recompute the ICRC half the time so mutations get past it.
		if len(frame) > 0 && frame[len(frame)-1]&1 == 0 {
			if pkt, err := proto.Parse(frame, proto.LinkEthernet); err == nil && pkt.HasTransport() {
				proto.PutICRC(pkt.ICRC, pkt.ComputeICRC())
			}
		}
		p.b.dev.Deliver(frame)
		p.a.dev.Deliver(frame)
		p.settle()
	})
}
