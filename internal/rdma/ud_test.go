package rdma_test

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
)

const testQKey = 0x11111111

// udQP creates a UD QP on n and takes it to RTS with Q_Key qkey.
func udQP(t *testing.T, n *node, qkey uint32) *rdma.QP {
	t.Helper()
	qp, err := n.dev.CreateQP(n.pd, rdma.QPInitAttr{SendCQ: n.scq, RecvCQ: n.rcq, QPType: rdma.QPTypeUD,
		Cap: rdma.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		a    rdma.QPAttr
		mask rdma.QPAttrMask
	}{
		{rdma.QPAttr{QPState: rdma.QPStateInit, PortNum: 1, QKey: qkey},
			rdma.QPAttrState | rdma.QPAttrPKeyIndex | rdma.QPAttrPort | rdma.QPAttrQKey},
		{rdma.QPAttr{QPState: rdma.QPStateRTR}, rdma.QPAttrState},
		{rdma.QPAttr{QPState: rdma.QPStateRTS, SQPSN: 0x123}, rdma.QPAttrState | rdma.QPAttrSQPSN},
	} {
		if err := qp.Modify(&s.a, s.mask); err != nil {
			t.Fatal(err)
		}
	}
	return qp
}

// ahTo creates on n an AH for node dst's GID gidIndex.
func ahTo(t *testing.T, n, dst *node, gidIndex uint8) *rdma.AH {
	t.Helper()
	gid, err := dst.dev.QueryGID(int(gidIndex))
	if err != nil {
		t.Fatal(err)
	}
	ah, err := n.dev.CreateAH(n.pd, rdma.AHAttr{IsGlobal: true, PortNum: 1, DMAC: dst.mac,
		GRH: rdma.GlobalRoute{DGID: gid, SGIDIndex: gidIndex, HopLimit: 64}})
	if err != nil {
		t.Fatal(err)
	}
	return ah
}

func TestUDSendRecvIPv4AndIPv6(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		name := "ipv4"
		if v6 {
			name = "ipv6"
		}
		t.Run(name, func(t *testing.T) {
			p := newPair(t, pairOpts{ipv6: v6})
			ua, ub := udQP(t, p.a, testQKey), udQP(t, p.b, testQKey)
			ah := ahTo(t, p.a, p.b, p.o.gidIndex())
			const n = 700
			fill(p.a.mem.Bytes()[0x1000:0x1000+n], 3)
			// Two SGEs on the receive side: the GRH area and the payload
			// may be split anywhere.
			mustPost(t, ub.PostRecv([]rdma.RecvWR{{WRID: 5, SGList: []rdma.SGE{
				{Addr: 0x8000, Length: 30, LKey: p.b.mr.LKey}, {Addr: 0x9000, Length: 2000, LKey: p.b.mr.LKey}}}}))
			mustPost(t, ua.PostSend([]rdma.SendWR{{WRID: 6, Opcode: rdma.WRSendWithImm, ImmData: 0xfeed,
				SendFlags: rdma.SendSignaled, SGList: p.a.sge(0x1000, n),
				AH: ah, RemoteQPN: ub.QPN(), RemoteQKey: testQKey}}))
			wantWC(t, p.poll(p.a.scq, 1)[0], 6, rdma.WCSuccess, rdma.WCSend)
			wc := p.poll(p.b.rcq, 1)[0]
			wantWC(t, wc, 5, rdma.WCSuccess, rdma.WCRecv)
			if wc.ByteLen != rdma.GRHSize+n || wc.SrcQP != ua.QPN() || wc.ImmData != 0xfeed ||
				wc.WCFlags != rdma.WCGRH|rdma.WCWithImm || wc.QPNum != ub.QPN() {
				t.Fatalf("wc %+v", wc)
			}
			mem := p.b.mem.Bytes()
			area := append(append([]byte{}, mem[0x8000:0x8000+30]...), mem[0x9000:0x9000+10]...)
			payload := mem[0x9000+10 : 0x9000+10+n]
			if !bytes.Equal(payload, p.a.mem.Bytes()[0x1000:0x1000+n]) {
				t.Fatal("payload differs")
			}
			if v6 {
				ip := proto.IPv6(area)
				if area[0]>>4 != 6 || netip.AddrFrom16([16]byte(ip.Dst())) != netip.MustParseAddr("fd00::42:2") {
					t.Fatalf("GRH area %x: want the IPv6 header to fd00::42:2", area)
				}
			} else {
				ip := proto.IPv4(area[20:])
				if !bytes.Equal(area[:20], make([]byte, 20)) || area[20]>>4 != 4 || !ip.IsChecksumValid() ||
					!bytes.Equal(ip.Dst(), []byte{10, 42, 0, 2}) || !bytes.Equal(ip.Src(), []byte{10, 42, 0, 1}) {
					t.Fatalf("GRH area %x: want 20 zero bytes and the IPv4 header 10.42.0.1 > 10.42.0.2", area)
				}
			}
			// The L3 header type, where a ConnectX NIC reports it: UCX's
			// UD transport reads it to find the destination GID.
			if want := map[bool]uint8{false: rdma.SLRoCEIPv4, true: rdma.SLRoCEIPv6}[v6]; wc.SL != want {
				t.Errorf("wc.SL %#x, want the L3 header type %#x", wc.SL, want)
			}
			if c := p.b.dev.Counters(); c.UDReceived != 1 {
				t.Errorf("UDReceived %d", c.UDReceived)
			}
		})
	}
}

func TestUDQKeyAndDrops(t *testing.T) {
	p := newPair(t, pairOpts{})
	ua, ub := udQP(t, p.a, testQKey), udQP(t, p.b, testQKey)
	ah := ahTo(t, p.a, p.b, 1)
	send := func(qkey uint32, n uint32) {
		t.Helper()
		mustPost(t, ua.PostSend([]rdma.SendWR{{Opcode: rdma.WRSend, SGList: p.a.sge(0x1000, n),
			AH: ah, RemoteQPN: ub.QPN(), RemoteQKey: qkey}}))
		p.settle()
	}
	// No receive posted: lost and counted.
	send(testQKey, 8)
	if c := p.b.dev.Counters(); c.UDNoRecv != 1 {
		t.Fatalf("UDNoRecv %d, want 1", c.UDNoRecv)
	}
	mustPost(t, ub.PostRecv([]rdma.RecvWR{{WRID: 1, SGList: p.b.sge(0x8000, 100)}}))
	send(0x2222, 8)
	if c := p.b.dev.Counters(); c.QKeyViolations != 1 {
		t.Fatalf("QKeyViolations %d, want 1", c.QKeyViolations)
	}
	p.expectNone(p.b.rcq, "receive with a wrong Q_Key")
	// The high bit selects the sender QP's own Q_Key, which matches.
	send(0x80000000, 8)
	wantWC(t, p.poll(p.b.rcq, 1)[0], 1, rdma.WCSuccess, rdma.WCRecv)
	// 40 + 80 bytes do not fit 100: local length error, the QP goes on.
	mustPost(t, ub.PostRecv([]rdma.RecvWR{{WRID: 2, SGList: p.b.sge(0x8000, 100)}}))
	send(testQKey, 80)
	wantWC(t, p.poll(p.b.rcq, 1)[0], 2, rdma.WCLocLenErr, rdma.WCRecv)
	if ub.State() != rdma.QPStateRTS {
		t.Fatalf("UD QP in %v after a length error", ub.State())
	}
}

func TestUDPostChecks(t *testing.T) {
	p := newPair(t, pairOpts{mtu: 1024})
	ua, ub := udQP(t, p.a, testQKey), udQP(t, p.b, testQKey)
	ah := ahTo(t, p.a, p.b, 1)
	pd2, err := p.a.dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	gid, _ := p.b.dev.QueryGID(1)
	ah2, err := p.a.dev.CreateAH(pd2, rdma.AHAttr{IsGlobal: true, DMAC: p.b.mac, GRH: rdma.GlobalRoute{DGID: gid, SGIDIndex: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		wr   rdma.SendWR
	}{
		{"larger than the MTU", rdma.SendWR{Opcode: rdma.WRSend, SGList: p.a.sge(0, 1025), AH: ah, RemoteQPN: ub.QPN()}},
		{"RDMA WRITE", rdma.SendWR{Opcode: rdma.WRRDMAWrite, SGList: p.a.sge(0, 8), AH: ah, RemoteQPN: ub.QPN()}},
		{"no AH", rdma.SendWR{Opcode: rdma.WRSend, SGList: p.a.sge(0, 8), RemoteQPN: ub.QPN()}},
		{"AH of another PD", rdma.SendWR{Opcode: rdma.WRSend, SGList: p.a.sge(0, 8), AH: ah2, RemoteQPN: ub.QPN()}},
	} {
		if err := ua.PostSend([]rdma.SendWR{c.wr}); !isErr(err, rdma.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		}
	}
	// Exactly one MTU is fine; a bad lkey completes with LocProtErr and
	// moves the QP to ERR.
	mustPost(t, ub.PostRecv([]rdma.RecvWR{{WRID: 1, SGList: p.b.sge(0x8000, 2000)}}))
	mustPost(t, ua.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
		SGList: p.a.sge(0, 1024), AH: ah, RemoteQPN: ub.QPN(), RemoteQKey: testQKey}}))
	wantWC(t, p.poll(p.b.rcq, 1)[0], 1, rdma.WCSuccess, rdma.WCRecv)
	wantWC(t, p.poll(p.a.scq, 1)[0], 1, rdma.WCSuccess, rdma.WCSend)
	mustPost(t, ua.PostSend([]rdma.SendWR{{WRID: 2, Opcode: rdma.WRSend, SGList: []rdma.SGE{{Addr: 0, Length: 8, LKey: 0xdead00}},
		AH: ah, RemoteQPN: ub.QPN(), RemoteQKey: testQKey}}))
	wantWC(t, p.poll(p.a.scq, 1)[0], 2, rdma.WCLocProtErr, rdma.WCSend)
	if ua.State() != rdma.QPStateErr {
		t.Fatalf("QP in %v after a local protection error", ua.State())
	}
}

func TestUDModifyTable(t *testing.T) {
	p := newPair(t, pairOpts{})
	qp, err := p.a.dev.CreateQP(p.a.pd, rdma.QPInitAttr{SendCQ: p.a.scq, RecvCQ: p.a.rcq, QPType: rdma.QPTypeUD})
	if err != nil {
		t.Fatal(err)
	}
	if err := qp.Modify(&rdma.QPAttr{QPState: rdma.QPStateInit, PortNum: 1},
		rdma.QPAttrState|rdma.QPAttrPKeyIndex|rdma.QPAttrPort); !isErr(err, rdma.ErrInvalid) {
		t.Fatalf("INIT without a Q_Key: %v", err)
	}
	if err := qp.Modify(&rdma.QPAttr{QPState: rdma.QPStateInit, PortNum: 1, QKey: 7},
		rdma.QPAttrState|rdma.QPAttrPKeyIndex|rdma.QPAttrPort|rdma.QPAttrQKey); err != nil {
		t.Fatal(err)
	}
	if err := qp.Modify(&rdma.QPAttr{QPState: rdma.QPStateRTR, DestQPNum: 5},
		rdma.QPAttrState|rdma.QPAttrDestQPN); !isErr(err, rdma.ErrInvalid) {
		t.Fatalf("RTR with an RC attribute: %v", err)
	}
	if err := qp.Modify(&rdma.QPAttr{QPState: rdma.QPStateRTR}, rdma.QPAttrState); err != nil {
		t.Fatal(err)
	}
	if err := qp.Modify(&rdma.QPAttr{QPState: rdma.QPStateRTS}, rdma.QPAttrState); !isErr(err, rdma.ErrInvalid) {
		t.Fatalf("RTS without an SQ PSN: %v", err)
	}
	if a, _ := qp.Query(); a.QKey != 7 || a.QPState != rdma.QPStateRTR {
		t.Fatalf("query: %+v", a)
	}
}

func TestUDLoopback(t *testing.T) {
	p := newPair(t, pairOpts{})
	u1, u2 := udQP(t, p.a, testQKey), udQP(t, p.a, testQKey)
	ah := ahTo(t, p.a, p.a, 1)
	mustPost(t, u2.PostRecv([]rdma.RecvWR{{WRID: 3, SGList: p.a.sge(0x8000, 200)}}))
	mustPost(t, u1.PostSend([]rdma.SendWR{{Opcode: rdma.WRSend, SendFlags: rdma.SendInline,
		SGList: p.a.sge(0x1000, 50), AH: ah, RemoteQPN: u2.QPN(), RemoteQKey: testQKey}}))
	wc := p.poll(p.a.rcq, 1)[0]
	wantWC(t, wc, 3, rdma.WCSuccess, rdma.WCRecv)
	if wc.SrcQP != u1.QPN() || wc.ByteLen != 90 {
		t.Fatalf("wc %+v", wc)
	}
	if c := p.a.dev.Counters(); c.LoopbackPackets != 1 {
		t.Errorf("loopback packets %d", c.LoopbackPackets)
	}
}

func TestUDMulticast(t *testing.T) {
	p := newPair(t, pairOpts{})
	sender, local := udQP(t, p.a, testQKey), udQP(t, p.a, testQKey)
	remote := udQP(t, p.b, testQKey)
	group := netip.MustParseAddr("::ffff:239.1.2.3").As16()
	for _, qp := range []*rdma.QP{sender, local, remote} {
		if err := qp.AttachMcast(group, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := local.AttachMcast(group, 0); err != nil {
		t.Fatalf("attaching twice: %v", err)
	}
	if err := remote.AttachMcast(netip.MustParseAddr("::ffff:10.0.0.1").As16(), 0); !isErr(err, rdma.ErrInvalid) {
		t.Fatalf("attach to a unicast GID: %v", err)
	}
	if err := p.qa.AttachMcast(group, 0); !isErr(err, rdma.ErrInvalid) {
		t.Fatalf("attach an RC QP: %v", err)
	}
	ah, err := p.a.dev.CreateAH(p.a.pd, rdma.AHAttr{IsGlobal: true, GRH: rdma.GlobalRoute{DGID: group, SGIDIndex: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, qp := range []*rdma.QP{sender, local} {
		mustPost(t, qp.PostRecv([]rdma.RecvWR{{WRID: uint64(qp.QPN()), SGList: p.a.sge(0x8000+uint64(qp.QPN())*256, 256)}}))
	}
	mustPost(t, remote.PostRecv([]rdma.RecvWR{{WRID: 1, SGList: p.b.sge(0x8000, 256)}}))
	post := func() {
		mustPost(t, sender.PostSend([]rdma.SendWR{{Opcode: rdma.WRSend, SGList: p.a.sge(0x1000, 64),
			AH: ah, RemoteQPN: 0x1234, RemoteQKey: testQKey}}))
	}
	post()
	wc := p.poll(p.b.rcq, 1)[0]
	wantWC(t, wc, 1, rdma.WCSuccess, rdma.WCRecv)
	if wc.SrcQP != sender.QPN() {
		t.Fatalf("remote wc %+v", wc)
	}
	wc = p.poll(p.a.rcq, 1)[0]
	wantWC(t, wc, uint64(local.QPN()), rdma.WCSuccess, rdma.WCRecv)
	p.expectNone(p.a.rcq, "the sender hearing its own multicast")
	// The Ethernet destination is the group's MAC.
	if ca := p.a.dev.Counters(); ca.McastDelivered != 1 || ca.UDSent != 1 {
		t.Errorf("a: delivered %d sent %d", ca.McastDelivered, ca.UDSent)
	}
	// Detached, b no longer gets the group's packets.
	if err := remote.DetachMcast(group, 0); err != nil {
		t.Fatal(err)
	}
	if err := remote.DetachMcast(group, 0); !isErr(err, rdma.ErrInvalid) {
		t.Fatalf("detach twice: %v", err)
	}
	mustPost(t, remote.PostRecv([]rdma.RecvWR{{WRID: 2, SGList: p.b.sge(0x8000, 256)}}))
	// Destroying local detaches it: a's copy has no listener left but
	// the sender (which does not hear itself).
	if err := local.Destroy(); err != nil {
		t.Fatal(err)
	}
	post()
	p.settle()
	p.expectNone(p.b.rcq, "a detached QP")
	if cb := p.b.dev.Counters(); cb.McastNoListener != 1 {
		t.Errorf("b: McastNoListener %d, want 1", cb.McastNoListener)
	}
}

// TestGSIModifyWithoutPort: QP1 goes to INIT with the P_Key index and the
// Q_Key alone, as ib_mad moves it; a UD QP needs the port too.
func TestGSIModifyWithoutPort(t *testing.T) {
	p := newPair(t, pairOpts{})
	gsi, err := p.a.dev.CreateQP(p.a.pd, rdma.QPInitAttr{SendCQ: p.a.scq, RecvCQ: p.a.rcq, QPType: rdma.QPTypeGSI})
	if err != nil {
		t.Fatal(err)
	}
	if gsi.QPN() != 1 {
		t.Fatalf("GSI QP number %d", gsi.QPN())
	}
	mask := rdma.QPAttrState | rdma.QPAttrPKeyIndex | rdma.QPAttrQKey
	if err := gsi.Modify(&rdma.QPAttr{QPState: rdma.QPStateInit, QKey: 0x80010000}, mask); err != nil {
		t.Fatalf("QP1 to INIT without the port: %v", err)
	}
	ud, err := p.a.dev.CreateQP(p.a.pd, rdma.QPInitAttr{SendCQ: p.a.scq, RecvCQ: p.a.rcq, QPType: rdma.QPTypeUD})
	if err != nil {
		t.Fatal(err)
	}
	if err := ud.Modify(&rdma.QPAttr{QPState: rdma.QPStateInit, QKey: 1}, mask); !isErr(err, rdma.ErrInvalid) {
		t.Fatalf("UD QP to INIT without the port: %v", err)
	}
}
