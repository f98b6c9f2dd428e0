package integration

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/device/guestsim"
	"github.com/PacketFive/hinic/internal/rdma"
)

func wantStatus(t *testing.T, err error, st uint16) {
	t.Helper()
	var se *guestsim.StatusError
	if !errors.As(err, &se) || se.Status != st {
		t.Fatalf("got %v, want admin status %d", err, st)
	}
}

// stillServes checks that a guest's vNIC still executes admin commands.
func stillServes(t *testing.T, g *guestsim.Guest) {
	t.Helper()
	if _, err := g.AllocPD(testCtx(t)); err != nil {
		t.Fatalf("other vNIC stopped serving: %v", err)
	}
}

func TestBadAdminCommands(t *testing.T) {
	tb := newTestbed(t, 1)
	g := tb.guests[0]
	ctx := testCtx(t)
	pd, err := g.AllocPD(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cq, err := g.CreateCQ(ctx, 16, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf, _ := g.Alloc(8192, 4096, false)

	t.Run("invalid handles", func(t *testing.T) {
		for _, op := range []uint16{device.CmdDeallocPD, device.CmdDeregMR, device.CmdDestroyCQ,
			device.CmdDestroyQP, device.CmdDestroyAH, device.CmdDestroySRQ} {
			wantStatus(t, g.Destroy(ctx, op, 0xdead), device.StENOENT)
		}
		_, err := g.QueryQP(ctx, 0x777)
		wantStatus(t, err, device.StENOENT)
		_, _, err = g.RegMR(ctx, 0xdead, buf, buf, 4096, 1)
		wantStatus(t, err, device.StENOENT)
		_, err = g.CreateQP(ctx, guestsim.QPConfig{PD: 0xdead, SendCQ: cq, RecvCQ: cq})
		wantStatus(t, err, device.StENOENT)
		bogus := &guestsim.CQ{CQN: 99}
		_, err = g.CreateQP(ctx, guestsim.QPConfig{PD: pd, SendCQ: bogus, RecvCQ: cq})
		wantStatus(t, err, device.StENOENT)
	})
	t.Run("unknown opcode", func(t *testing.T) {
		_, err := g.Admin(ctx, &device.AdminCmd{Opcode: 999})
		wantStatus(t, err, device.StEINVAL)
	})
	t.Run("unsupported", func(t *testing.T) {
		_, err := g.Admin(ctx, &device.AdminCmd{Opcode: device.CmdResizeCQ, Handle: cq.CQN}) // depth 0
		wantStatus(t, err, device.StEINVAL)
		_, err = g.Admin(ctx, &device.AdminCmd{Opcode: device.CmdResizeCQ, Handle: 777})
		wantStatus(t, err, device.StENOENT)
		for _, typ := range []uint32{0, 6} { // SMI on an Ethernet port, raw Ethertype
			cmd := device.AdminCmd{Opcode: device.CmdCreateQP}
			*device.PayloadOf[device.CmdCreateQPArgs](&cmd) = device.CmdCreateQPArgs{PD: pd, QPType: typ,
				SendCQ: cq.CQN, RecvCQ: cq.CQN}
			_, err = g.Admin(ctx, &cmd)
			wantStatus(t, err, device.StEOPNOTSUPP)
		}
		cmd := device.AdminCmd{Opcode: device.CmdCreateQP}
		*device.PayloadOf[device.CmdCreateQPArgs](&cmd) = device.CmdCreateQPArgs{PD: pd, QPType: 99,
			SendCQ: cq.CQN, RecvCQ: cq.CQN}
		_, err = g.Admin(ctx, &cmd)
		wantStatus(t, err, device.StEOPNOTSUPP)
	})
	t.Run("MR page list beyond RAM", func(t *testing.T) {
		_, _, err := g.RegMRPages(ctx, pd, 0, 8192, 12, []uint64{buf, testRAM}, 1)
		wantStatus(t, err, device.StEFAULT)
		_, _, err = g.RegMRPages(ctx, pd, 0, 4096, 12, []uint64{0x80000000}, 1) // in the PCI hole
		wantStatus(t, err, device.StEFAULT)
		_, _, err = g.RegMRPages(ctx, pd, 0, 4096, 12, []uint64{buf + 8}, 1) // not page aligned
		wantStatus(t, err, device.StEINVAL)
		// The page list itself outside RAM.
		cmd := device.AdminCmd{Opcode: device.CmdRegMR}
		*device.PayloadOf[device.CmdRegMRArgs](&cmd) = device.CmdRegMRArgs{PD: pd, Length: 4096,
			PageListGPA: testRAM - 4, NPages: 1, PageShift: 12}
		_, err = g.Admin(ctx, &cmd)
		wantStatus(t, err, device.StEFAULT)
	})
	t.Run("CQ ring outside RAM", func(t *testing.T) {
		cmd := device.AdminCmd{Opcode: device.CmdCreateCQ}
		*device.PayloadOf[device.CmdCreateCQArgs](&cmd) = device.CmdCreateCQArgs{RingGPA: testRAM - 64*8,
			DBRecGPA: buf, Depth: 16}
		_, err := g.Admin(ctx, &cmd)
		wantStatus(t, err, device.StEFAULT)
		*device.PayloadOf[device.CmdCreateCQArgs](&cmd) = device.CmdCreateCQArgs{RingGPA: buf, DBRecGPA: buf,
			Depth: 12}
		_, err = g.Admin(ctx, &cmd)
		wantStatus(t, err, device.StEINVAL)
	})
	t.Run("paged CQ ring", func(t *testing.T) {
		tbl, err := g.Alloc(64, 64, false)
		if err != nil {
			t.Fatal(err)
		}
		page, err := g.Alloc(device.CQPageSize, device.CQPageSize, false)
		if err != nil {
			t.Fatal(err)
		}
		create := func(flags uint32, depth uint32, pages ...uint64) error {
			for i, p := range pages {
				g.RAM().Store32(tbl+uint64(i)*8, uint32(p))
				g.RAM().Store32(tbl+uint64(i)*8+4, uint32(p>>32))
			}
			cmd := device.AdminCmd{Opcode: device.CmdCreateCQ}
			*device.PayloadOf[device.CmdCreateCQArgs](&cmd) = device.CmdCreateCQArgs{RingGPA: tbl,
				DBRecGPA: buf, Depth: depth, Flags: flags}
			_, err := g.Admin(ctx, &cmd)
			return err
		}
		wantStatus(t, create(device.CQFPaged, 64, page+64), device.StEINVAL) // a page not aligned
		wantStatus(t, create(device.CQFPaged, 64, testRAM), device.StEFAULT) // a page outside RAM
		wantStatus(t, create(device.CQFPaged, 64, testRAM-device.CQPageSize/2), device.StEINVAL)
		wantStatus(t, create(device.CQFPaged, 32, page), device.StEINVAL)    // half a page
		wantStatus(t, create(device.CQFPaged, 1<<21, page), device.StEINVAL) // past max_cqe and the page table
		wantStatus(t, create(0x2, 64, page), device.StEINVAL)                // an unknown flag
		cmd := device.AdminCmd{Opcode: device.CmdCreateCQ}
		*device.PayloadOf[device.CmdCreateCQArgs](&cmd) = device.CmdCreateCQArgs{RingGPA: testRAM - 8,
			DBRecGPA: buf, Depth: 128, Flags: device.CQFPaged}
		_, err = g.Admin(ctx, &cmd)
		wantStatus(t, err, device.StEFAULT) // the page table outside RAM
		if err := create(device.CQFPaged, 64, page); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("query response outside RAM", func(t *testing.T) {
		_, err := g.Admin(ctx, &device.AdminCmd{Opcode: device.CmdQueryDevice, RespGPA: testRAM - 8, RespLen: 200})
		wantStatus(t, err, device.StEFAULT)
	})
	t.Run("busy", func(t *testing.T) {
		if _, _, err := g.RegMR(ctx, pd, buf, buf, 4096, 1); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, g.Destroy(ctx, device.CmdDeallocPD, pd), device.StEBUSY)
	})
}

func TestBadWQEs(t *testing.T) {
	tb := newTestbed(t, 2)

	t.Run("unknown lkey", func(t *testing.T) {
		a, _ := connectPair(t, tb, false)
		a.qp.PostSend(device.SendWQE{WRID: 1, Opcode: uint8(rdma.WRRDMAWrite), SendFlags: uint16(rdma.SendSignaled),
			RemoteAddr: 0, RKey: 0}, []device.SGE{{Addr: a.buf, Length: 100, LKey: 0xbad00}}, nil)
		wantCQE(t, a.scq, rdma.WCLocProtErr, rdma.WCRDMAWrite, 1)
	})
	t.Run("SGE outside the MR and RAM", func(t *testing.T) {
		a, _ := connectPair(t, tb, false)
		a.qp.PostSend(device.SendWQE{WRID: 2, Opcode: uint8(rdma.WRSend), SendFlags: uint16(rdma.SendSignaled)},
			[]device.SGE{{Addr: testRAM + 4096, Length: 100, LKey: a.lkey}}, nil)
		wantCQE(t, a.scq, rdma.WCLocProtErr, rdma.WCSend, 2)
	})
	t.Run("wrong-PD lkey", func(t *testing.T) {
		a, _ := connectPair(t, tb, false)
		ctx := testCtx(t)
		pd2, err := a.g.AllocPD(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lkey2, _, err := a.g.RegMR(ctx, pd2, a.buf, a.buf, 4096, access)
		if err != nil {
			t.Fatal(err)
		}
		a.qp.PostSend(device.SendWQE{WRID: 3, Opcode: uint8(rdma.WRSend), SendFlags: uint16(rdma.SendSignaled)},
			[]device.SGE{{Addr: a.buf, Length: 100, LKey: lkey2}}, nil)
		wantCQE(t, a.scq, rdma.WCLocProtErr, rdma.WCSend, 3)
	})
	t.Run("bad rkey", func(t *testing.T) {
		a, b := connectPair(t, tb, false)
		a.qp.PostSend(device.SendWQE{WRID: 4, Opcode: uint8(rdma.WRRDMAWrite), SendFlags: uint16(rdma.SendSignaled),
			RemoteAddr: b.buf, RKey: b.rkey ^ 0x100}, []device.SGE{{Addr: a.buf, Length: 100, LKey: a.lkey}}, nil)
		wantCQE(t, a.scq, rdma.WCRemAccessErr, rdma.WCRDMAWrite, 4)
	})
	t.Run("an atomic without remote-atomic access gets an error completion", func(t *testing.T) {
		a, b := connectPair(t, tb, false) // QP and MR allow remote read and write, not atomics
		a.qp.PostSend(device.SendWQE{WRID: 5, Opcode: uint8(rdma.WRAtomicFetchAndAdd),
			SendFlags: uint16(rdma.SendSignaled), RemoteAddr: b.buf, RKey: b.rkey, CompareAdd: 1},
			[]device.SGE{{Addr: a.buf, Length: 8, LKey: a.lkey}}, nil)
		wantCQE(t, a.scq, rdma.WCRemInvReqErr, rdma.WCFetchAdd, 5)
	})
	t.Run("SQ index out of range", func(t *testing.T) {
		a, _ := connectPair(t, tb, false)
		a.g.Events()
		a.qp.SetSQProd(1000) // depth 64
		ev := waitEvent(t, a.g, device.EvQPFatal)
		if ev.Handle != a.qp.QPN || ev.Data != device.QPFatalSQIndex {
			t.Errorf("event %+v", ev)
		}
		attr, err := a.g.QueryQP(testCtx(t), a.qp.QPN)
		if err != nil || attr.QPState != uint32(rdma.QPStateErr) {
			t.Errorf("QP state %d, %v", attr.QPState, err)
		}
		if a.qp.SQTaken() != 0 {
			t.Errorf("device took %d WQEs", a.qp.SQTaken())
		}
	})
	stillServes(t, tb.guests[0])
	stillServes(t, tb.guests[1])
}

func waitEvent(t *testing.T, g *guestsim.Guest, typ uint32) device.EQE {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, e := range g.Events() {
			if e.Type == typ {
				return e
			}
		}
		g.WaitIRQ(device.IRQCtrl, 5*time.Millisecond)
	}
	t.Fatalf("no event %d", typ)
	return device.EQE{}
}

func TestAdminRingOutOfRangeIsFatal(t *testing.T) {
	tb := newTestbed(t, 2)
	g := tb.guests[0]
	g.Events()
	atomic.StoreUint32(&g.Header().AdminSQProd, 5000)
	g.Ring(device.DBCtrl)
	ev := waitEvent(t, g, device.EvDeviceFatal)
	if ev.Data != device.FatalAdminRing || g.DevStatus()&device.DevFatal == 0 ||
		atomic.LoadUint32(&g.Header().FatalCode) != device.FatalAdminRing {
		t.Fatalf("event %+v, status %#x", ev, g.DevStatus())
	}
	// The other vNIC is unaffected.
	stillServes(t, tb.guests[1])
	if st := tb.srv.Status(); st.VNICs[0].State != "fatal" || st.VNICs[1].State != "live" {
		t.Errorf("states %s %s", st.VNICs[0].State, st.VNICs[1].State)
	}
	// A reset brings the guest's vNIC back.
	if err := g.Reset(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	stillServes(t, g)
}

func TestL2RingOutOfRangeIsFatal(t *testing.T) {
	tb := newTestbed(t, 2)
	g := tb.guests[0]
	atomic.StoreUint32(&g.Header().L2TxProd, 9999)
	g.Ring(device.DBL2)
	waitEvent(t, g, device.EvDeviceFatal)
	if c := atomic.LoadUint32(&g.Header().FatalCode); c != device.FatalL2Ring {
		t.Fatalf("fatal code %d", c)
	}
	stillServes(t, tb.guests[1])
}

// TestDisconnectMidTransfer: guest A vanishes (QEMU killed) with RDMA
// WRITEs in flight; B and the backend carry on, and a new guest can
// connect to A's socket.
func TestDisconnectMidTransfer(t *testing.T) {
	tb := newTestbed(t, 2)
	a, b := connectPair(t, tb, false)
	for i := range 32 {
		a.qp.PostSend(device.SendWQE{WRID: uint64(i), Opcode: uint8(rdma.WRRDMAWrite),
			SendFlags: uint16(rdma.SendSignaled), RemoteAddr: b.buf, RKey: b.rkey},
			[]device.SGE{{Addr: a.buf, Length: 16384, LKey: a.lkey}}, nil)
	}
	// B reads from A while A goes away.
	b.qp.PostSend(device.SendWQE{WRID: 99, Opcode: uint8(rdma.WRRDMARead), SendFlags: uint16(rdma.SendSignaled),
		RemoteAddr: a.buf, RKey: a.rkey}, []device.SGE{{Addr: b.buf, Length: 16384, LKey: b.lkey}}, nil)
	a.g.Close()
	// B's READ completes either way (success if A answered in time,
	// otherwise retry exceeded after the transport gives up); we only
	// need the backend alive, so don't wait for it here.
	stillServes(t, tb.guests[1])
	deadline := time.Now().Add(5 * time.Second)
	for tb.srv.Status().VNICs[0].Guest {
		if time.Now().After(deadline) {
			t.Fatal("backend did not notice the disconnect")
		}
		time.Sleep(5 * time.Millisecond)
	}
	g := tb.connect(t, 0)
	if g.PeerID() != 2 {
		t.Errorf("new guest peer ID %d, want 2", g.PeerID())
	}
	stillServes(t, g)
}

// TestSecondGuestRefused: one QEMU per vNIC socket.
func TestSecondGuestRefused(t *testing.T) {
	tb := newTestbed(t, 1)
	c := tb.cfgs[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := guestsim.Connect(ctx, guestsim.Config{Socket: c.Socket, RAMPath: c.RAMPath, RAMSize: c.RAMSize})
	if err == nil {
		t.Fatal("second guest accepted")
	}
	stillServes(t, tb.guests[0])
}

// TestInterruptsNeedMSIX: before the driver says MSI-X is on, the
// backend raises nothing (QEMU would drop it); the state is in BAR2.
func TestInterruptsNeedMSIX(t *testing.T) {
	tb := newTestbed(t, 1)
	c := tb.cfgs[0]
	tb.guests[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for tb.srv.Status().VNICs[0].Guest && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	g, err := guestsim.Connect(testCtx(t), guestsim.Config{Socket: c.Socket, RAMPath: c.RAMPath, RAMSize: c.RAMSize})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	before := tb.srv.Status().VNICs[0].Counters.Interrupts
	atomic.StoreUint32(&g.Header().DriverABI, device.ABIMajor<<16)
	atomic.StoreUint32(&g.Header().DriverStatus, device.DrvOK) // MSI-X still off
	g.Ring(device.DBCtrl)
	for g.DevStatus()&device.DevLive == 0 {
		time.Sleep(time.Millisecond)
	}
	if got := tb.srv.Status().VNICs[0].Counters.Interrupts; got != before {
		t.Errorf("%d interrupts raised before MSI-X was on", got-before)
	}
}

func TestSetAddr(t *testing.T) {
	tb := newTestbed(t, 1)
	g := tb.guests[0]
	ctx := testCtx(t)
	cmd := device.AdminCmd{Opcode: device.CmdSetAddr}
	*device.PayloadOf[device.CmdSetAddrArgs](&cmd) = device.CmdSetAddrArgs{MTU: 2048, NIPv4: 1,
		IPv4: [4][4]byte{{192, 168, 7, 9}}}
	if _, err := g.Admin(ctx, &cmd); err != nil {
		t.Fatal(err)
	}
	gid, err := g.QueryGID(ctx, 1)
	if err != nil || gid != [16]byte{10: 0xff, 11: 0xff, 12: 192, 13: 168, 14: 7, 15: 9} {
		t.Fatalf("GID 1 %x, %v", gid, err)
	}
	if _, err := g.AllocPD(ctx); err != nil {
		t.Fatal(err)
	}
	// With a PD: the same MAC and MTU change the IPv4 GIDs in place
	// (TestSetAddrLive has the traffic), another MTU needs a new engine.
	*device.PayloadOf[device.CmdSetAddrArgs](&cmd) = device.CmdSetAddrArgs{MTU: 2048, NIPv4: 1,
		IPv4: [4][4]byte{{192, 168, 7, 10}}}
	if _, err := g.Admin(ctx, &cmd); err != nil {
		t.Fatal(err)
	}
	if gid, err := g.QueryGID(ctx, 1); err != nil || gid[15] != 10 {
		t.Fatalf("GID 1 %x, %v after SET_ADDR with a PD", gid, err)
	}
	*device.PayloadOf[device.CmdSetAddrArgs](&cmd) = device.CmdSetAddrArgs{MTU: 4096}
	_, err = g.Admin(ctx, &cmd)
	wantStatus(t, err, device.StEBUSY)
	*device.PayloadOf[device.CmdSetAddrArgs](&cmd) = device.CmdSetAddrArgs{NIPv4: 5}
	_, err = g.Admin(ctx, &cmd)
	wantStatus(t, err, device.StEINVAL)
	// After a reset the guest may change the MTU again.
	if err := g.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	*device.PayloadOf[device.CmdSetAddrArgs](&cmd) = device.CmdSetAddrArgs{MTU: 4096}
	if _, err := g.Admin(ctx, &cmd); err != nil {
		t.Fatal(err)
	}
}

// TestRandomGarbage feeds admin commands with random opcodes and
// payloads, and random SQ/RQ contents, to one vNIC: every command
// completes, nothing panics, and the other vNIC keeps serving.
func TestRandomGarbage(t *testing.T) {
	tb := newTestbed(t, 2)
	g := tb.guests[0]
	ctx := testCtx(t)
	rng := rand.New(rand.NewPCG(1, 2))
	a, _ := connectPair(t, tb, false)
	// The other guest's RAM, which no valid key of a's reaches.
	other := make([]byte, testRAM)
	if err := tb.guests[1].RAM().ReadAt(other, 0); err != nil {
		t.Fatal(err)
	}
	for i := range 400 {
		cmd := device.AdminCmd{Opcode: uint16(rng.IntN(device.CmdMax + 3)), Handle: rng.Uint32N(64),
			RespGPA: rng.Uint64N(2 * testRAM), RespLen: rng.Uint32N(512)}
		for j := range cmd.Payload {
			cmd.Payload[j] = byte(rng.Uint32())
		}
		// Keep resource sizes small enough not to exhaust the host.
		switch cmd.Opcode {
		case device.CmdCreateCQ:
			device.PayloadOf[device.CmdCreateCQArgs](&cmd).Depth &= 255
		case device.CmdCreateQP:
			p := device.PayloadOf[device.CmdCreateQPArgs](&cmd)
			p.SQDepth &= 255
			p.RQDepth &= 255
		case device.CmdRegMR, device.CmdReregMR:
			device.PayloadOf[device.CmdRegMRArgs](&cmd).NPages &= 1023
		case device.CmdSetAddr:
			continue // would change the GIDs the QPs of a were connected with
		}
		if _, err := g.Admin(ctx, &cmd); err != nil {
			var se *guestsim.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("command %d (opcode %d): %v", i, cmd.Opcode, err)
			}
		}
		// Random WQEs on a's rings.
		if i%4 == 0 {
			w := device.SendWQE{WRID: uint64(i), Opcode: uint8(rng.IntN(12)), SendFlags: uint16(rng.IntN(16)),
				RemoteAddr: rng.Uint64(), RKey: rng.Uint32(), InlineLen: rng.Uint32N(200)}
			sge := []device.SGE{{Addr: rng.Uint64N(2 * testRAM), Length: rng.Uint32N(1 << 16), LKey: rng.Uint32()}}
			if a.qp.SQFree() > 0 {
				a.qp.PostSend(w, sge, nil)
			}
			a.qp.PostRecv(uint64(i), sge)
		}
		a.scq.Poll()
		a.rcq.Poll()
	}
	after := make([]byte, testRAM)
	if err := tb.guests[1].RAM().ReadAt(after, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(other, after) {
		t.Error("the other guest's RAM changed")
	}
	stillServes(t, tb.guests[1])
	if g.DevStatus()&device.DevFatal == 0 {
		stillServes(t, g)
	}
}

// TestBadSRQUDMcast: bad SRQ rings and handles, UD WQEs with unknown AHs
// or AHs of another PD, multicast attach of the wrong QPs. Each gets an
// error status, an error completion or an event; both vNICs keep serving.
func TestBadSRQUDMcast(t *testing.T) {
	tb := newTestbed(t, 2)
	g := tb.guests[0]
	ctx := testCtx(t)
	a := newUDEnd(t, g, tb.cfgs[0].MAC)
	b := newUDEnd(t, tb.guests[1], tb.cfgs[1].MAC)
	ring, _ := g.Alloc(4096, 4096, false)
	db, _ := g.Alloc(8, 8, false)
	createSRQ := func(args device.CmdCreateSRQArgs) error {
		cmd := device.AdminCmd{Opcode: device.CmdCreateSRQ}
		*device.PayloadOf[device.CmdCreateSRQArgs](&cmd) = args
		_, err := g.Admin(ctx, &cmd)
		return err
	}
	good := device.CmdCreateSRQArgs{PD: a.pd, Depth: 16, MaxSGE: 2, Stride: 48, RingGPA: ring, DBRecGPA: db}

	t.Run("SRQ create", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			edit func(*device.CmdCreateSRQArgs)
			want uint16
		}{
			{"ring beyond RAM", func(c *device.CmdCreateSRQArgs) { c.RingGPA = testRAM - 256 }, device.StEFAULT},
			{"ring in the hole", func(c *device.CmdCreateSRQArgs) { c.RingGPA = 0xC0000000 }, device.StEFAULT},
			{"dbrec beyond RAM", func(c *device.CmdCreateSRQArgs) { c.DBRecGPA = testRAM }, device.StEFAULT},
			{"unknown PD", func(c *device.CmdCreateSRQArgs) { c.PD = 0xdead }, device.StENOENT},
			{"depth not a power of two", func(c *device.CmdCreateSRQArgs) { c.Depth = 12 }, device.StEINVAL},
			{"stride too small", func(c *device.CmdCreateSRQArgs) { c.Stride = 32 }, device.StEINVAL},
			{"no SGE", func(c *device.CmdCreateSRQArgs) { c.MaxSGE = 0 }, device.StEINVAL},
			{"limit above depth", func(c *device.CmdCreateSRQArgs) { c.Limit = 17 }, device.StEINVAL},
			{"unaligned dbrec", func(c *device.CmdCreateSRQArgs) { c.DBRecGPA = db + 4 }, device.StEINVAL},
		} {
			args := good
			tc.edit(&args)
			if err := createSRQ(args); err == nil {
				t.Errorf("%s: accepted", tc.name)
			} else {
				var se *guestsim.StatusError
				if !errors.As(err, &se) || se.Status != tc.want {
					t.Errorf("%s: %v, want status %d", tc.name, err, tc.want)
				}
			}
		}
	})
	t.Run("unknown SRQ handles", func(t *testing.T) {
		_, err := g.QuerySRQ(ctx, 0xdead)
		wantStatus(t, err, device.StENOENT)
		cmd := device.AdminCmd{Opcode: device.CmdModifySRQ}
		*device.PayloadOf[device.CmdModifySRQArgs](&cmd) = device.CmdModifySRQArgs{SRQN: 0xdead, AttrMask: device.SRQLimit}
		_, err = g.Admin(ctx, &cmd)
		wantStatus(t, err, device.StENOENT)
		_, err = g.CreateQP(ctx, guestsim.QPConfig{PD: a.pd, SendCQ: a.scq, RecvCQ: a.rcq,
			SRQ: &guestsim.SRQ{SRQN: 0xdead}})
		wantStatus(t, err, device.StENOENT)
	})
	t.Run("SRQ busy and bad mask", func(t *testing.T) {
		srq, err := g.CreateSRQ(ctx, guestsim.SRQConfig{PD: a.pd, Depth: 8})
		if err != nil {
			t.Fatal(err)
		}
		qp, err := g.CreateQP(ctx, guestsim.QPConfig{PD: a.pd, SendCQ: a.scq, RecvCQ: a.rcq, SRQ: srq})
		if err != nil {
			t.Fatal(err)
		}
		wantStatus(t, g.Destroy(ctx, device.CmdDestroySRQ, srq.SRQN), device.StEBUSY)
		cmd := device.AdminCmd{Opcode: device.CmdModifySRQ}
		*device.PayloadOf[device.CmdModifySRQArgs](&cmd) = device.CmdModifySRQArgs{SRQN: srq.SRQN, AttrMask: 0x80}
		_, err = g.Admin(ctx, &cmd)
		wantStatus(t, err, device.StEINVAL)
		if err := g.Destroy(ctx, device.CmdDestroyQP, qp.QPN); err != nil {
			t.Fatal(err)
		}
		if err := g.Destroy(ctx, device.CmdDestroySRQ, srq.SRQN); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, g.Destroy(ctx, device.CmdDestroySRQ, srq.SRQN), device.StENOENT)
	})
	t.Run("SRQ index out of range", func(t *testing.T) {
		srq, err := g.CreateSRQ(ctx, guestsim.SRQConfig{PD: a.pd, Depth: 8})
		if err != nil {
			t.Fatal(err)
		}
		g.Events()
		srq.SetProd(100)
		ev, err := g.WaitEvent(ctx, device.EvSRQErr)
		if err != nil || ev.Handle != srq.SRQN || ev.Data != device.QPFatalRQIndex {
			t.Fatalf("event %+v, %v", ev, err)
		}
		if srq.Taken() != 0 {
			t.Errorf("device took %d WQEs", srq.Taken())
		}
	})
	t.Run("malformed SRQ WQE", func(t *testing.T) {
		srq, err := g.CreateSRQ(ctx, guestsim.SRQConfig{PD: a.pd, Depth: 8, MaxSGE: 1})
		if err != nil {
			t.Fatal(err)
		}
		srq.PostRecv(1, []device.SGE{{Addr: a.buf, Length: 64, LKey: a.lkey}, {Addr: a.buf, Length: 64, LKey: a.lkey}})
		ev, err := g.WaitEvent(ctx, device.EvSRQErr)
		if err != nil || ev.Handle != srq.SRQN || ev.Data != device.QPFatalWQE {
			t.Fatalf("event %+v, %v", ev, err)
		}
	})
	t.Run("UD WQE with an unknown AH or a WRITE", func(t *testing.T) {
		udSend(a.qp, 7, 0xdead, b.qp.QPN, 0, device.SGE{Addr: a.buf, Length: 16, LKey: a.lkey})
		wantCQE(t, a.scq, rdma.WCLocQPOpErr, rdma.WCSend, 7)
		ah := a.ahTo(t, a.pd, b)
		a.qp.PostSend(device.SendWQE{WRID: 6, Opcode: uint8(rdma.WRRDMAWrite), SendFlags: uint16(rdma.SendSignaled),
			AH: ah, RemoteQPN: b.qp.QPN, RemoteAddr: b.buf, RKey: 1},
			[]device.SGE{{Addr: a.buf, Length: 16, LKey: a.lkey}}, nil)
		wantCQE(t, a.scq, rdma.WCLocQPOpErr, rdma.WCRDMAWrite, 6)
	})
	t.Run("UD WQE with an AH of another PD", func(t *testing.T) {
		pd2, err := g.AllocPD(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ah := a.ahTo(t, pd2, b)
		udSend(a.qp, 8, ah, b.qp.QPN, 0, device.SGE{Addr: a.buf, Length: 16, LKey: a.lkey})
		wantCQE(t, a.scq, rdma.WCLocQPOpErr, rdma.WCSend, 8)
		wantStatus(t, g.Destroy(ctx, device.CmdDeallocPD, pd2), device.StEBUSY) // the AH holds it
		// The QP carries on: a good datagram goes through.
		b.qp.PostRecv(1, []device.SGE{{Addr: b.buf, Length: 256, LKey: b.lkey}})
		waitRecvTaken(t, b.qp)
		udSend(a.qp, 9, a.ahTo(t, a.pd, b), b.qp.QPN, 0, device.SGE{Addr: a.buf, Length: 16, LKey: a.lkey})
		wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCSend, 9)
		wantCQE(t, b.rcq, rdma.WCSuccess, rdma.WCRecv, 1)
	})
	t.Run("UD receive into an unknown lkey", func(t *testing.T) {
		// The transport's own fatal error: the engine moves the QP to
		// ERR and the guest gets QP_FATAL with data 5.
		qp := b.newQP(t, b.rcq)
		qp.PostRecv(3, []device.SGE{{Addr: b.buf, Length: 256, LKey: 0xbad00}})
		waitRecvTaken(t, qp)
		b.g.Events()
		udSend(a.qp, 10, a.ahTo(t, a.pd, b), qp.QPN, 0, device.SGE{Addr: a.buf, Length: 16, LKey: a.lkey})
		wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCSend, 10)
		wantCQE(t, b.rcq, rdma.WCLocProtErr, rdma.WCRecv, 3)
		ev, err := b.g.WaitEvent(ctx, device.EvQPFatal)
		if err != nil || ev.Handle != qp.QPN || ev.Data != device.QPFatalTransport {
			t.Fatalf("event %+v, %v; want QP_FATAL for QP %d, data %d", ev, err, qp.QPN, device.QPFatalTransport)
		}
	})
	t.Run("AH refused", func(t *testing.T) {
		_, err := g.CreateAH(ctx, a.pd, device.AHAttr{IsGlobal: 1, PortNum: 1, DGID: b.gid, SGIDIndex: 9})
		wantStatus(t, err, device.StEINVAL)
		_, err = g.CreateAH(ctx, 0xdead, device.AHAttr{IsGlobal: 1, PortNum: 1, DGID: b.gid, SGIDIndex: 1})
		wantStatus(t, err, device.StENOENT)
	})
	t.Run("multicast attach", func(t *testing.T) {
		group := [16]byte{10: 0xff, 11: 0xff, 12: 239, 13: 9, 14: 9, 15: 9}
		rc := newRCEnd(t, g, tb.cfgs[0].MAC, false)
		wantStatus(t, g.AttachMcast(ctx, rc.qp.QPN, group), device.StEINVAL)
		wantStatus(t, g.AttachMcast(ctx, 0xdead, group), device.StENOENT)
		wantStatus(t, g.AttachMcast(ctx, a.qp.QPN, b.gid), device.StEINVAL) // unicast GID
		wantStatus(t, g.DetachMcast(ctx, a.qp.QPN, group), device.StEINVAL)
	})
	stillServes(t, tb.guests[0])
	stillServes(t, tb.guests[1])
}
