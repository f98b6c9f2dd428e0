package integration

import (
	"bytes"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
)

// ahAttr is an address handle to a RoCEv2 peer on the test subnet.
func ahAttr() device.AHAttr {
	return device.AHAttr{IsGlobal: 1, PortNum: 1, SGIDIndex: 1, HopLimit: 64,
		DGID: netip.AddrFrom4([4]byte{10, 42, 0, 2}).As16(), DMAC: [6]byte{0x02, 0x48, 0x4e, 0, 0, 2}}
}

// TestLimitsHeldInBackend: BAR2 is the guest's to write. A guest that
// raises the limits published there gets no more than the backend's
// own: before, CREATE_AH read max_ah back from BAR2 and a guest that
// raised it created as many AHs as it liked.
func TestLimitsHeldInBackend(t *testing.T) {
	tb := newTestbed(t, 1)
	g := tb.guests[0]
	ctx := testCtx(t)
	h := g.Header()
	atomic.StoreUint32(&h.MaxAH, 1<<30)
	atomic.StoreUint32(&h.MaxCQ, 1<<30)
	atomic.StoreUint32(&h.MaxCQE, 1<<30)
	atomic.StoreUint32(&h.MaxQPWR, 1<<30)
	atomic.StoreUint32(&h.MaxSGE, 1<<30)
	atomic.StoreUint32(&h.MaxInline, 1<<30)
	pd, err := g.AllocPD(ctx)
	if err != nil {
		t.Fatal(err)
	}
	attr, err := g.QueryDevice(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if attr.MaxAH != device.MaxAH {
		t.Errorf("QUERY_DEVICE max_ah %d after the guest wrote BAR2; want %d", attr.MaxAH, device.MaxAH)
	}
	n := 0
	for ; n <= device.MaxAH+8; n++ {
		if _, err := g.CreateAH(ctx, pd, ahAttr()); err != nil {
			wantStatus(t, err, device.StENOMEM)
			break
		}
	}
	if n != device.MaxAH {
		t.Fatalf("created %d AHs with max_ah raised in BAR2; want %d", n, device.MaxAH)
	}
	cmd := device.AdminCmd{Opcode: device.CmdCreateCQ}
	ring, _ := g.Alloc(64*1024, 4096, false)
	*device.PayloadOf[device.CmdCreateCQArgs](&cmd) = device.CmdCreateCQArgs{RingGPA: ring, DBRecGPA: ring,
		Depth: 1 << 21} // above max_cqe
	_, err = g.Admin(ctx, &cmd)
	wantStatus(t, err, device.StEINVAL)
	stillServes(t, g)
}

// TestL2AntiSpoof: guest A queues, in order, a broadcast with guest B's
// source MAC, a PAUSE, a PFC frame and a VLAN-tagged PAUSE, then an
// honest frame to B. Before, the first reached B as B's own and the
// switch obeyed the others (its egress to A paused). Now the backend
// drops and counts them: B's first frame is the honest one and the
// switch saw no MAC Control.
func TestL2AntiSpoof(t *testing.T) {
	tb := newTestbed(t, 2)
	ctx := testCtx(t)
	a, err := tb.guests[0].NewL2()
	if err != nil {
		t.Fatal(err)
	}
	b, err := tb.guests[1].NewL2()
	if err != nil {
		t.Fatal(err)
	}
	macA, macB := tb.cfgs[0].MAC, tb.cfgs[1].MAC
	bcast := [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	eth := func(dst, src [6]byte, typ ...byte) []byte {
		f := append(append(dst[:], src[:]...), typ...)
		return append(f, make([]byte, 46)...)
	}
	pfc := make([]byte, 64)
	if _, err := proto.BuildPFC(pfc, macA, &proto.PFCFields{Enable: 0xff, Time: [8]uint16{0xffff, 0xffff, 0xffff,
		0xffff, 0xffff, 0xffff, 0xffff, 0xffff}}); err != nil {
		t.Fatal(err)
	}
	bad := [][]byte{
		eth(bcast, macB, 0x88, 0xb5),
		eth(proto.PFCDestMAC, macA, 0x88, 0x08, 0x00, 0x01, 0xff, 0xff),
		pfc,
		eth(proto.PFCDestMAC, macA, 0x81, 0x00, 0x00, 0x05, 0x88, 0x08, 0x00, 0x01, 0xff, 0xff),
	}
	honest := eth(macB, macA, 0x88, 0xb5)
	for _, f := range append(bad, honest) {
		if err := a.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, honest) {
		t.Fatalf("B's first frame %x; want the honest one %x", got, honest)
	}
	for _, p := range tb.fab.Status().Switches[0].Ports {
		if p.Num == 1 && p.PauseRecv+p.PFCRecv != 0 {
			t.Errorf("switch port 1 obeyed %d PAUSE and %d PFC frames from the guest", p.PauseRecv, p.PFCRecv)
		}
	}
	c := tb.srv.Status().VNICs[0].Counters
	if c.L2TxSpoofed != 1 || c.L2TxMACControl != 3 {
		t.Errorf("counted %d spoofed and %d MAC Control frames; want 1 and 3", c.L2TxSpoofed, c.L2TxMACControl)
	}
}

// TestForgedWrite: guest C, with its own MAC and IP, forges an RC RDMA
// WRITE ONLY to the QP of guest B that is connected to guest A: B's QPN,
// the PSN B expects, B's R_Key and buffer. Before, the engine took it
// and the bytes landed in B's MR. Now a packet from other than the QP's
// remote address is dropped (rxe's check_addr), B's memory is
// unchanged, and A's own WRITE with that PSN still lands.
func TestForgedWrite(t *testing.T) {
	tb := newTestbed(t, 3)
	a, b := connectPair(t, tb, false)
	c, err := tb.guests[2].NewL2()
	if err != nil {
		t.Fatal(err)
	}
	before := read(t, b.g, b.buf, 64)
	evil := bytes.Repeat([]byte{0xe1}, 64)
	f := proto.PacketFields{Link: proto.LinkEthernet,
		Eth:  proto.EthernetFields{Dst: tb.cfgs[1].MAC, Src: tb.cfgs[2].MAC},
		IP4:  proto.IPv4Fields{TTL: 64, Flags: 0b010, Src: tb.cfgs[2].IPv4[0].As4(), Dst: tb.cfgs[1].IPv4[0].As4()},
		UDP:  proto.UDPFields{SrcPort: 0xc000},
		BTH:  proto.BTHFields{Opcode: proto.OpRCWriteOnly, PKey: 0xffff, DestQP: b.qp.QPN, PSN: 100},
		RETH: proto.RETHFields{VA: b.buf, RKey: b.rkey, DMALength: uint32(len(evil))}, Payload: evil}
	frame := make([]byte, f.Len())
	if _, err := f.Encode(frame); err != nil {
		t.Fatal(err)
	}
	if err := c.Send(frame); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	for tb.srv.Status().VNICs[1].Engine.RxAddrMismatch == 0 {
		if !bytes.Equal(read(t, b.g, b.buf, 64), before) {
			t.Fatal("guest C's forged WRITE landed in guest B's MR")
		}
		if ctx.Err() != nil {
			t.Fatal("the forged WRITE was neither taken nor counted as from a foreign address")
		}
		time.Sleep(time.Millisecond)
	}
	if !bytes.Equal(read(t, b.g, b.buf, 64), before) {
		t.Fatal("guest B's MR changed")
	}
	want := fill(t, a.g, a.buf, 64, 7)
	a.qp.PostSend(device.SendWQE{WRID: 1, Opcode: uint8(rdma.WRRDMAWrite), SendFlags: uint16(rdma.SendSignaled),
		RemoteAddr: b.buf, RKey: b.rkey}, []device.SGE{{Addr: a.buf, Length: 64, LKey: a.lkey}}, nil)
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCRDMAWrite, 1)
	if got := read(t, b.g, b.buf, 64); !bytes.Equal(got, want) {
		t.Fatalf("A's WRITE: B holds %x", got)
	}
}
