package integration

import (
	"bytes"
	"testing"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/device/guestsim"
	"github.com/PacketFive/hinic/internal/rdma"
)

// roceOverhead is what a RoCEv2/IPv4 frame adds to its payload:
// Ethernet 14, IPv4 20, UDP 8, BTH 12, ICRC 4.
const roceOverhead = 14 + 20 + 8 + 12 + 4

func queryCounters(t *testing.T, g *guestsim.Guest) device.PortCounters {
	t.Helper()
	c, err := g.QueryCounters(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestQueryCountersRC: an RC SEND of three packets shows in the
// counters of both ports, frame by frame and octet by octet.
func TestQueryCountersRC(t *testing.T) {
	tb := newTestbed(t, 2)
	a, b := connectPair(t, tb, false)
	a0, b0 := queryCounters(t, a.g), queryCounters(t, b.g)
	if a0.XmitPkts != 0 || b0.RcvPkts != 0 {
		t.Fatalf("counters before any traffic: A %+v, B %+v", a0, b0)
	}

	// 3000 bytes with an immediate: 1024 + 1024 + 952 bytes of payload,
	// the last packet with a 4-byte ImmDt.
	const n = 3000
	fill(t, a.g, a.buf, n, 3)
	b.qp.PostRecv(7, []device.SGE{{Addr: b.buf + 8192, Length: 4096, LKey: b.lkey}})
	// The receive is in B's engine before the SEND leaves: no RNR NAK,
	// one try.
	waitFor(t, "B's receive taken", func() bool { return b.qp.RQTaken() == 1 })
	a.qp.PostSend(device.SendWQE{WRID: 1, Opcode: uint8(rdma.WRSendWithImm), SendFlags: uint16(rdma.SendSignaled),
		ImmData: 0x1234}, []device.SGE{{Addr: a.buf, Length: n, LKey: a.lkey}}, nil)
	wantCQE(t, b.rcq, rdma.WCSuccess, rdma.WCRecv, 7)
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCSend, 1)

	a1, b1 := queryCounters(t, a.g), queryCounters(t, b.g)
	const frames, octets = 3, n + 4 + 3*roceOverhead
	// The receive was taken before the SEND left, so no RNR NAK; a slow
	// ACK may still bring a tail probe (a packet sent again), which
	// counts too, on both ports.
	extra := tb.srv.Status().VNICs[0].Engine.Retransmits
	dPkts, dData := a1.XmitPkts-a0.XmitPkts, a1.XmitData-a0.XmitData
	if dPkts != frames+extra {
		t.Errorf("A sent %d frames, want %d and %d sent again", dPkts, frames, extra)
	}
	if dData < octets || (extra == 0 && dData != octets) {
		t.Errorf("A sent %d octets, want %d and any sent again (%d)", dData, octets, extra)
	}
	if d := b1.RcvPkts - b0.RcvPkts; d != dPkts {
		t.Errorf("B received %d frames, A sent %d", d, dPkts)
	}
	if d := b1.RcvData - b0.RcvData; d != dData {
		t.Errorf("B received %d octets, A sent %d", d, dData)
	}
	// The ACK: A's completion came from it, so A counted it.
	if a1.RcvPkts == a0.RcvPkts || a1.RcvData == a0.RcvData {
		t.Errorf("A counted no ACK: %+v", a1)
	}
	for _, c := range []device.PortCounters{a1, b1} {
		if c.UnicastXmitPkts != c.XmitPkts || c.UnicastRcvPkts != c.RcvPkts || c.MulticastXmitPkts != 0 ||
			c.MulticastRcvPkts != 0 {
			t.Errorf("unicast traffic only, counters %+v", c)
		}
		if c.RcvErrors != 0 || c.XmitDiscards != 0 || c.RcvConstraintErrors != 0 || c.LinkDowned != 0 {
			t.Errorf("error counters moved: %+v", c)
		}
	}
}

// TestQueryCountersMulticast: a UD datagram to a group counts as
// multicast at the sender's and at the receiver's port.
func TestQueryCountersMulticast(t *testing.T) {
	tb := newTestbed(t, 2)
	ctx := testCtx(t)
	a := newUDEnd(t, tb.guests[0], tb.cfgs[0].MAC)
	b := newUDEnd(t, tb.guests[1], tb.cfgs[1].MAC)
	group := [16]byte{10: 0xff, 11: 0xff, 12: 239, 13: 1, 14: 2, 15: 9}
	if err := b.g.AttachMcast(ctx, b.qp.QPN, group); err != nil {
		t.Fatal(err)
	}
	ah, err := a.g.CreateAH(ctx, a.pd, device.AHAttr{IsGlobal: 1, PortNum: 1, DGID: group, SGIDIndex: 1,
		HopLimit: 8})
	if err != nil {
		t.Fatal(err)
	}
	b.qp.PostRecv(1, []device.SGE{{Addr: b.buf, Length: 2048, LKey: b.lkey}})
	b.qp.PostRecv(2, []device.SGE{{Addr: b.buf + 2048, Length: 2048, LKey: b.lkey}})
	waitRecvTaken(t, b.qp)
	a0, b0 := queryCounters(t, a.g), queryCounters(t, b.g)

	udSend(a.qp, 1, ah, 0, 1, device.SGE{Addr: a.buf, Length: 200, LKey: a.lkey})
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCSend, 1)
	wantCQE(t, b.rcq, rdma.WCSuccess, rdma.WCRecv, 1)
	uni := a.ahTo(t, a.pd, b)
	udSend(a.qp, 2, uni, b.qp.QPN, 2, device.SGE{Addr: a.buf, Length: 100, LKey: a.lkey})
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCSend, 2)
	wantCQE(t, b.rcq, rdma.WCSuccess, rdma.WCRecv, 2)

	a1, b1 := queryCounters(t, a.g), queryCounters(t, b.g)
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"A multicast sent", a1.MulticastXmitPkts - a0.MulticastXmitPkts, 1},
		{"A unicast sent", a1.UnicastXmitPkts - a0.UnicastXmitPkts, 1},
		{"A frames sent", a1.XmitPkts - a0.XmitPkts, 2},
		{"B multicast received", b1.MulticastRcvPkts - b0.MulticastRcvPkts, 1},
		{"B unicast received", b1.UnicastRcvPkts - b0.UnicastRcvPkts, 1},
		{"B frames received", b1.RcvPkts - b0.RcvPkts, 2},
		// UD packets carry a DETH (8 bytes) after the BTH, and the
		// immediate.
		{"B octets received", b1.RcvData - b0.RcvData, 2*(roceOverhead+8+4) + 200 + 100},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.name, c.got, c.want)
		}
	}
}

// TestQueryCountersBadInput: a response buffer outside guest RAM, or
// straddling its end, fails with EFAULT and writes nothing; a short
// buffer and a port other than 1 fail with EINVAL.
func TestQueryCountersBadInput(t *testing.T) {
	tb := newTestbed(t, 2)
	g := tb.guests[0]
	ctx := testCtx(t)
	const size = 128 // sizeof(struct hicain_port_counters)
	tail := bytes.Repeat([]byte{0xa5}, 64)
	if err := g.RAM().WriteAt(tail, testRAM-64); err != nil {
		t.Fatal(err)
	}
	other := make([]byte, testRAM)
	if err := tb.guests[1].RAM().ReadAt(other, 0); err != nil {
		t.Fatal(err)
	}
	buf, err := g.Alloc(4096, 64, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		handle uint32
		gpa    uint64
		len    uint32
		want   uint16
	}{
		{"straddles the end of RAM", 1, testRAM - 64, size, device.StEFAULT},
		{"past the end of RAM", 1, testRAM, size, device.StEFAULT},
		{"in the PCI hole", 1, 0xc0000000, size, device.StEFAULT},
		{"above 4 GiB, no RAM there", 1, 1 << 32, size, device.StEFAULT},
		{"wraps around", 1, ^uint64(0) - 16, size, device.StEFAULT},
		{"buffer too short", 1, buf, size - 8, device.StEINVAL},
		{"port 0", 0, buf, size, device.StEINVAL},
		{"port 2", 2, buf, size, device.StEINVAL},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := g.Admin(ctx, &device.AdminCmd{Opcode: device.CmdQueryCounters, Handle: c.handle,
				RespGPA: c.gpa, RespLen: c.len})
			wantStatus(t, err, c.want)
		})
	}
	if got := read(t, g, testRAM-64, 64); !bytes.Equal(got, tail) {
		t.Errorf("the last 64 bytes of RAM changed: %x", got)
	}
	if got := read(t, g, buf, size); !bytes.Equal(got, make([]byte, size)) {
		t.Errorf("a refused command wrote its buffer: %x", got)
	}
	after := make([]byte, testRAM)
	if err := tb.guests[1].RAM().ReadAt(after, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(other, after) {
		t.Error("the other guest's RAM changed")
	}
	// The device still answers, with a well-formed result.
	if c := queryCounters(t, g); c.LinkDowned != 0 || c.XmitDiscards != 0 {
		t.Errorf("counters after the bad commands: %+v", c)
	}
	stillServes(t, g)
}
