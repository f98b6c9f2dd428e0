package integration

import (
	"bytes"
	"testing"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/device/guestsim"
	"github.com/PacketFive/hinic/internal/rdma"
)

// xrcBed is an XRC initiator on guest A connected to an XRC target on
// guest B, whose XRC domain holds one XRC SRQ completing on B's rcq.
type xrcBed struct {
	tb       *testbed
	a, b     *rcEnd
	xrcd     uint32
	srq      *guestsim.SRQ
	ini, tgt *guestsim.QP
}

func newXRCBed(t *testing.T) *xrcBed {
	t.Helper()
	ctx := testCtx(t)
	tb := newTestbed(t, 2)
	xb := &xrcBed{tb: tb}
	xb.a = newRCEnd(t, tb.guests[0], tb.cfgs[0].MAC, false)
	xb.b = newRCEnd(t, tb.guests[1], tb.cfgs[1].MAC, false)
	var err error
	if xb.xrcd, err = xb.b.g.AllocXRCD(ctx); err != nil {
		t.Fatal(err)
	}
	if xb.srq, err = xb.b.g.CreateSRQ(ctx, guestsim.SRQConfig{PD: xb.b.pd, Depth: 16, XRCD: xb.xrcd, CQ: xb.b.rcq}); err != nil {
		t.Fatal(err)
	}
	if xb.ini, err = xb.a.g.CreateQP(ctx, guestsim.QPConfig{Type: guestsim.QPTypeXRCIni, PD: xb.a.pd, SendCQ: xb.a.scq}); err != nil {
		t.Fatal(err)
	}
	if xb.tgt, err = xb.b.g.CreateQP(ctx, guestsim.QPConfig{Type: guestsim.QPTypeXRCTgt, XRCD: xb.xrcd}); err != nil {
		t.Fatal(err)
	}
	ia, ib := *xb.a, *xb.b
	ia.qp, ib.qp = xb.ini, xb.tgt
	ia.connect(t, &ib)
	ib.connect(t, &ia)
	return xb
}

// TestXRCBetweenGuests: SENDs from an initiator QP on one guest reach the
// XRC SRQ they name on the other, through a target QP without rings, and
// complete on the SRQ's CQ; an RDMA WRITE is checked in the SRQ's PD; a
// request naming another SRQ number fails with REM_INV_REQ_ERR.
func TestXRCBetweenGuests(t *testing.T) {
	xb := newXRCBed(t)
	a, b := xb.a, xb.b
	xb.srq.PostRecv(7, []device.SGE{{Addr: b.buf, Length: 4096, LKey: b.lkey}})
	src := a.buf + 8192
	want := fill(t, a.g, src, 3000, 5)
	xb.ini.PostSend(device.SendWQE{WRID: 1, Opcode: uint8(rdma.WRSendWithImm), ImmData: 77,
		SendFlags: uint16(rdma.SendSignaled), RemoteSRQN: xb.srq.SRQN}, []device.SGE{{Addr: src, Length: 3000, LKey: a.lkey}}, nil)
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCSend, 1)
	e := wantCQE(t, b.rcq, rdma.WCSuccess, rdma.WCRecv, 7)
	if e.QPNum != xb.tgt.QPN || e.ByteLen != 3000 || e.ImmData != 77 {
		t.Fatalf("receive CQE %+v, want QP %d, 3000 bytes, imm 77", e, xb.tgt.QPN)
	}
	if got := read(t, b.g, b.buf, 3000); !bytes.Equal(got, want) {
		t.Fatal("SEND payload differs")
	}
	xb.ini.PostSend(device.SendWQE{WRID: 2, Opcode: uint8(rdma.WRRDMAWrite), SendFlags: uint16(rdma.SendSignaled),
		RemoteAddr: b.buf + 16384, RKey: b.rkey, RemoteSRQN: xb.srq.SRQN}, []device.SGE{{Addr: src, Length: 100, LKey: a.lkey}}, nil)
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCRDMAWrite, 2)
	if got := read(t, b.g, b.buf+16384, 100); !bytes.Equal(got, want[:100]) {
		t.Fatal("WRITE data differ")
	}
	xb.ini.PostSend(device.SendWQE{WRID: 3, Opcode: uint8(rdma.WRSend), SendFlags: uint16(rdma.SendSignaled),
		RemoteSRQN: xb.srq.SRQN + 1}, []device.SGE{{Addr: src, Length: 8, LKey: a.lkey}}, nil)
	wantCQE(t, a.scq, rdma.WCRemInvReqErr, rdma.WCSend, 3)
	st := xb.tb.srv.Status().VNICs[1]
	if len(st.QPs) != 2 {
		t.Fatalf("guest B QPs %+v", st.QPs)
	}
}

// TestXRCAdminHostile feeds the XRC admin commands handles and types a
// guest must not get away with.
func TestXRCAdminHostile(t *testing.T) {
	xb := newXRCBed(t)
	ctx := testCtx(t)
	g, b := xb.b.g, xb.b
	srq := func(a device.CmdCreateSRQArgs) error {
		ring, _ := g.Alloc(16*32, 4096, false)
		db, _ := g.Alloc(8, 8, false)
		a.PD, a.Depth, a.MaxSGE, a.Stride, a.RingGPA, a.DBRecGPA = b.pd, 16, 1, 32, ring, db
		cmd := device.AdminCmd{Opcode: device.CmdCreateSRQ}
		*device.PayloadOf[device.CmdCreateSRQArgs](&cmd) = a
		_, err := g.Admin(ctx, &cmd)
		return err
	}
	wantStatus(t, srq(device.CmdCreateSRQArgs{SRQType: device.SRQTXRC, XRCD: 999, CQ: b.rcq.CQN}), device.StENOENT)
	wantStatus(t, srq(device.CmdCreateSRQArgs{SRQType: device.SRQTXRC, XRCD: xb.xrcd, CQ: 999}), device.StENOENT)
	wantStatus(t, srq(device.CmdCreateSRQArgs{SRQType: device.SRQTTM + 1}), device.StEOPNOTSUPP)
	// A basic SRQ ignores the XRC fields.
	if err := srq(device.CmdCreateSRQArgs{XRCD: 999, CQ: 999}); err != nil {
		t.Fatalf("basic SRQ with stray XRC fields: %v", err)
	}
	cmd := device.AdminCmd{Opcode: device.CmdCreateQP}
	*device.PayloadOf[device.CmdCreateQPArgs](&cmd) = device.CmdCreateQPArgs{QPType: guestsim.QPTypeXRCTgt, XRCD: 999}
	_, err := g.Admin(ctx, &cmd)
	wantStatus(t, err, device.StENOENT)
	// An RC QP may not take its receives from an XRC SRQ.
	_, err = g.CreateQP(ctx, guestsim.QPConfig{PD: b.pd, SendCQ: b.scq, RecvCQ: b.rcq, SRQ: xb.srq})
	wantStatus(t, err, device.StEINVAL)
	// The domain, the SRQ's CQ and the SRQ are in use.
	_, err = g.Admin(ctx, &device.AdminCmd{Opcode: device.CmdDeallocXRCD, Handle: xb.xrcd})
	wantStatus(t, err, device.StEBUSY)
	_, err = g.Admin(ctx, &device.AdminCmd{Opcode: device.CmdDestroyCQ, Handle: b.rcq.CQN})
	wantStatus(t, err, device.StEBUSY)
	_, err = g.Admin(ctx, &device.AdminCmd{Opcode: device.CmdDeallocXRCD, Handle: 4242})
	wantStatus(t, err, device.StENOENT)
	// Another guest's domain handle means nothing here.
	other, err := xb.a.g.AllocXRCD(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if other != xb.xrcd {
		_, err = g.Admin(ctx, &device.AdminCmd{Opcode: device.CmdDeallocXRCD, Handle: other})
		wantStatus(t, err, device.StENOENT)
	}
	// Tear down in order: target QP, SRQ, then the domain is free.
	for _, c := range []device.AdminCmd{
		{Opcode: device.CmdDestroyQP, Handle: xb.tgt.QPN},
		{Opcode: device.CmdDestroySRQ, Handle: xb.srq.SRQN},
		{Opcode: device.CmdDeallocXRCD, Handle: xb.xrcd},
	} {
		if _, err := g.Admin(ctx, &c); err != nil {
			t.Fatalf("opcode %d handle %d: %v", c.Opcode, c.Handle, err)
		}
	}
	stillServes(t, g)
}

// TestXRCDBudget: XRC domains come out of the guest's memory budget.
func TestXRCDBudget(t *testing.T) {
	tb := newTestbedConfig(t, 1, func(_ int, c *device.VNICConfig) { c.MemBudget = 4096 })
	ctx := testCtx(t)
	g := tb.guests[0]
	n := 0
	for ; n < 1000; n++ {
		if _, err := g.AllocXRCD(ctx); err != nil {
			wantStatus(t, err, device.StENOMEM)
			break
		}
	}
	if n == 0 || n == 1000 {
		t.Fatalf("%d XRCDs fit a 4 KiB budget", n)
	}
}
