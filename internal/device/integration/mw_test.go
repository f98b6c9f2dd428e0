package integration

import (
	"bytes"
	"errors"
	"testing"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/device/guestsim"
	"github.com/PacketFive/hinic/internal/rdma"
)

// connectMWPair is connectPair with MRs that windows can be bound to
// (IBV_ACCESS_MW_BIND, a bit of MR access only).
func connectMWPair(t *testing.T, tb *testbed) (*rcEnd, *rcEnd) {
	t.Helper()
	a := newRCEndAccess(t, tb.guests[0], tb.cfgs[0].MAC, false, access|uint32(rdma.AccessMWBind))
	b := newRCEndAccess(t, tb.guests[1], tb.cfgs[1].MAC, false, access|uint32(rdma.AccessMWBind))
	a.access, b.access = access, access
	a.connect(t, b)
	b.connect(t, a)
	return a, b
}

// TestMWBindWriteInvalidate: ALLOC_MW, a BIND_MW WQE, an RDMA WRITE
// through the window, SEND_WITH_INV (the receiver's CQE carries
// IBV_WC_WITH_INV and the key), then a WRITE to the invalidated window
// fails; DEALLOC_MW.
func TestMWBindWriteInvalidate(t *testing.T) {
	tb := newTestbed(t, 2)
	a, b := connectMWPair(t, tb)
	ctx := testCtx(t)
	attr, err := b.g.QueryDevice(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if attr.MaxMW == 0 || attr.DeviceCapFlags&rdma.DeviceMemWindowType2B == 0 {
		t.Fatalf("device attr max_mw %d, cap flags %#x", attr.MaxMW, attr.DeviceCapFlags)
	}
	mw, err := b.g.AllocMW(ctx, b.pd, uint32(rdma.MWType2))
	if err != nil {
		t.Fatal(err)
	}
	if mw&0x80000000 == 0 {
		t.Fatalf("window key %#x", mw)
	}
	key := mw&^0xff | (mw+1)&0xff
	b.qp.PostSend(guestsim.BindMWWQE(9, mw, key, b.lkey, b.buf+4096, 4096, uint32(rdma.AccessRemoteWrite),
		uint16(rdma.SendSignaled)), nil, nil)
	wantCQE(t, b.scq, rdma.WCSuccess, rdma.WCBindMW, 9)

	want := fill(t, a.g, a.buf, 512, 5)
	a.qp.PostSend(device.SendWQE{WRID: 1, Opcode: uint8(rdma.WRRDMAWrite), SendFlags: uint16(rdma.SendSignaled),
		RemoteAddr: b.buf + 8192 - 512, RKey: key}, []device.SGE{{Addr: a.buf, Length: 512, LKey: a.lkey}}, nil)
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCRDMAWrite, 1)
	if !bytes.Equal(read(t, b.g, b.buf+8192-512, 512), want) {
		t.Fatal("write through the window did not land")
	}

	b.qp.PostRecv(2, []device.SGE{{Addr: b.buf + 16384, Length: 256, LKey: b.lkey}})
	a.qp.PostSend(device.SendWQE{WRID: 3, Opcode: device.WRSendInv, SendFlags: uint16(rdma.SendSignaled), ImmData: key},
		[]device.SGE{{Addr: a.buf, Length: 100, LKey: a.lkey}}, nil)
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCSend, 3)
	e := wantCQE(t, b.rcq, rdma.WCSuccess, rdma.WCRecv, 2)
	if e.WCFlags != device.WCWithInv || e.ImmData != key || e.ByteLen != 100 {
		t.Fatalf("receive CQE %+v, want WITH_INV and key %#x", e, key)
	}
	a.qp.PostSend(device.SendWQE{WRID: 4, Opcode: uint8(rdma.WRRDMAWrite), SendFlags: uint16(rdma.SendSignaled),
		RemoteAddr: b.buf + 4096, RKey: key}, []device.SGE{{Addr: a.buf, Length: 8, LKey: a.lkey}}, nil)
	wantCQE(t, a.scq, rdma.WCRemAccessErr, rdma.WCRDMAWrite, 4)

	if err := b.g.Destroy(ctx, device.CmdDeallocMW, mw); err != nil {
		t.Fatal(err)
	}
	var st *guestsim.StatusError
	if err := b.g.Destroy(ctx, device.CmdDeallocMW, mw); !errors.As(err, &st) || st.Status != device.StENOENT {
		t.Fatalf("second DEALLOC_MW: %v, want ENOENT", err)
	}
}

// TestMWHostile: bad ALLOC_MW and DEALLOC_MW commands get errnos, and
// BIND_MW WQEs with a bad window, a bad lkey, bounds outside the MR or a
// foreign key complete with MW_BIND_ERR.
func TestMWHostile(t *testing.T) {
	tb := newTestbed(t, 2)
	ctx := testCtx(t)
	g := tb.guests[1]
	pd, err := g.AllocPD(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var st *guestsim.StatusError
	for _, c := range []struct {
		name    string
		pd, typ uint32
		want    uint16
	}{
		{"unknown PD", pd + 100, 2, device.StENOENT},
		{"type 0", pd, 0, device.StEINVAL},
		{"type 3", pd, 3, device.StEINVAL},
	} {
		if _, err := g.AllocMW(ctx, c.pd, c.typ); !errors.As(err, &st) || st.Status != c.want {
			t.Errorf("ALLOC_MW %s: %v, want status %d", c.name, err, c.want)
		}
	}
	for _, h := range []uint32{0, 0x80000100, 0x7fffff00, 0xffffffff} {
		if err := g.Destroy(ctx, device.CmdDeallocMW, h); !errors.As(err, &st) || st.Status != device.StENOENT {
			t.Errorf("DEALLOC_MW %#x: %v, want ENOENT", h, err)
		}
	}
	// A PD with a window cannot go.
	mw, err := g.AllocMW(ctx, pd, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Destroy(ctx, device.CmdDeallocPD, pd); !errors.As(err, &st) || st.Status != device.StEBUSY {
		t.Fatalf("DEALLOC_PD with a window: %v, want EBUSY", err)
	}
	if err := g.Destroy(ctx, device.CmdDeallocMW, mw); err != nil {
		t.Fatal(err)
	}

	other, err := g.AllocMW(ctx, pd, 2) // a window of another PD
	if err != nil {
		t.Fatal(err)
	}
	next := func(k uint32) uint32 { return k&^0xff | (k+1)&0xff }
	rw := uint32(rdma.AccessRemoteWrite)
	cases := []struct {
		name string
		wqe  func(b *rcEnd, mw uint32) device.SendWQE
	}{
		{"unknown window", func(b *rcEnd, mw uint32) device.SendWQE {
			return guestsim.BindMWWQE(1, mw+0x10000, next(mw+0x10000), b.lkey, b.buf, 64, rw, 0)
		}},
		{"window of another PD", func(b *rcEnd, _ uint32) device.SendWQE {
			return guestsim.BindMWWQE(1, other, next(other), b.lkey, b.buf, 64, rw, 0)
		}},
		{"new key of another window", func(b *rcEnd, mw uint32) device.SendWQE {
			return guestsim.BindMWWQE(1, mw, mw+0x100, b.lkey, b.buf, 64, rw, 0)
		}},
		{"bad lkey", func(b *rcEnd, mw uint32) device.SendWQE {
			return guestsim.BindMWWQE(1, mw, next(mw), b.lkey^0x7f00, b.buf, 64, rw, 0)
		}},
		{"past the MR", func(b *rcEnd, mw uint32) device.SendWQE {
			return guestsim.BindMWWQE(1, mw, next(mw), b.lkey, b.buf+b.size-8, 64, rw, 0)
		}},
		{"wrapping", func(b *rcEnd, mw uint32) device.SendWQE {
			return guestsim.BindMWWQE(1, mw, next(mw), b.lkey, ^uint64(0)-8, 64, rw, 0)
		}},
		{"unknown access bits", func(b *rcEnd, mw uint32) device.SendWQE {
			return guestsim.BindMWWQE(1, mw, next(mw), b.lkey, b.buf, 64, 0xffffffff, 0)
		}},
		{"type 2 zero length", func(b *rcEnd, mw uint32) device.SendWQE {
			return guestsim.BindMWWQE(1, mw, next(mw), b.lkey, b.buf, 0, rw, 0)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The error moves the QP to ERR: a fresh pair for each case.
			_, b := connectMWPair(t, tb)
			mw, err := b.g.AllocMW(ctx, b.pd, 2)
			if err != nil {
				t.Fatal(err)
			}
			b.qp.PostSend(c.wqe(b, mw), nil, nil)
			wantCQE(t, b.scq, rdma.WCMWBindErr, rdma.WCBindMW, 1)
			// The same WQE with good fields binds on a fresh QP: the
			// case failed for its bad field.
			_, b2 := connectMWPair(t, tb)
			mw2, err := b2.g.AllocMW(ctx, b2.pd, 2)
			if err != nil {
				t.Fatal(err)
			}
			b2.qp.PostSend(guestsim.BindMWWQE(2, mw2, next(mw2), b2.lkey, b2.buf, 64, rw, uint16(rdma.SendSignaled)), nil, nil)
			wantCQE(t, b2.scq, rdma.WCSuccess, rdma.WCBindMW, 2)
		})
	}
}

// TestMWBudget: windows are charged to the guest's memory budget.
func TestMWBudget(t *testing.T) {
	const limit = 64 << 10
	tb := newTestbedConfig(t, 1, func(_ int, c *device.VNICConfig) { c.MemBudget = limit })
	ctx := testCtx(t)
	g := tb.guests[0]
	pd, err := g.AllocPD(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var keys []uint32
	var st *guestsim.StatusError
	for {
		k, err := g.AllocMW(ctx, pd, 1)
		if errors.As(err, &st) && st.Status == device.StENOMEM {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
		if len(keys) > limit {
			t.Fatal("ALLOC_MW never ran out of budget")
		}
	}
	if len(keys) == 0 {
		t.Fatal("no window fit the budget")
	}
	if err := g.Destroy(ctx, device.CmdDeallocMW, keys[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := g.AllocMW(ctx, pd, 2); err != nil {
		t.Fatalf("ALLOC_MW after a DEALLOC_MW refunded the budget: %v", err)
	}
}

// TestAtomicWriteWQE: an ATOMIC_WRITE WQE (ABI 1.10) with its value in
// compare_add, and one with an 8-byte SGE, replace the remote word.
func TestAtomicWriteWQE(t *testing.T) {
	tb := newTestbed(t, 2)
	a, b := connectPair(t, tb, false)
	a.qp.PostSend(device.SendWQE{WRID: 1, Opcode: device.WRAtomicWrite, SendFlags: uint16(rdma.SendSignaled),
		RemoteAddr: b.buf + 64, RKey: b.rkey, CompareAdd: 0x0102030405060708}, nil, nil)
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCAtomicWrite, 1)
	if got := read(t, b.g, b.buf+64, 8); !bytes.Equal(got, []byte{8, 7, 6, 5, 4, 3, 2, 1}) {
		t.Fatalf("word % x", got)
	}
	want := fill(t, a.g, a.buf, 8, 9)
	a.qp.PostSend(device.SendWQE{WRID: 2, Opcode: device.WRAtomicWrite, SendFlags: uint16(rdma.SendSignaled),
		RemoteAddr: b.buf + 64, RKey: b.rkey}, []device.SGE{{Addr: a.buf, Length: 8, LKey: a.lkey}}, nil)
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCAtomicWrite, 2)
	if got := read(t, b.g, b.buf+64, 8); !bytes.Equal(got, want) {
		t.Fatalf("word % x, want % x", got, want)
	}
	// Misaligned: the engine refuses it, an error CQE.
	a.qp.PostSend(device.SendWQE{WRID: 3, Opcode: device.WRAtomicWrite, SendFlags: uint16(rdma.SendSignaled),
		RemoteAddr: b.buf + 65, RKey: b.rkey}, nil, nil)
	if e := wantCQE(t, a.scq, rdma.WCLocLenErr, rdma.WCAtomicWrite, 3); e.Status == 0 {
		t.Fatal("misaligned ATOMIC_WRITE succeeded")
	}
}
