package device_test

import (
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/PacketFive/hinic/internal/device"
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
		Depth: 1 << 20} // above max_cqe, within the guest's RAM
	_, err = g.Admin(ctx, &cmd)
	wantStatus(t, err, device.StEINVAL)
	stillServes(t, g)
}

// TestHandlesDoNotWrap: the AH and CQ handle counters wrap after 2^32
// creations. Before, the next handle after the wrap was 0 and then the
// handle of a live object, whose entry the new object replaced: the
// guest's first AH and CQ became another's, and the old ones leaked.
func TestHandlesDoNotWrap(t *testing.T) {
	tb := newTestbed(t, 1)
	g := tb.guests[0]
	ctx := testCtx(t)
	pd, err := g.AllocPD(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ah1, err := g.CreateAH(ctx, pd, ahAttr())
	if err != nil {
		t.Fatal(err)
	}
	cq1, err := g.CreateCQ(ctx, 16, 0)
	if err != nil {
		t.Fatal(err)
	}
	device.SetNextHandles(tb.srv, 0, 0xffffffff, 0xffffffff)
	seenAH := map[uint32]bool{ah1: true}
	seenCQ := map[uint32]bool{cq1.CQN: true}
	for range 3 {
		ah, err := g.CreateAH(ctx, pd, ahAttr())
		if err != nil {
			t.Fatal(err)
		}
		cq, err := g.CreateCQ(ctx, 16, 0)
		if err != nil {
			t.Fatal(err)
		}
		if ah == 0 || seenAH[ah] || cq.CQN == 0 || seenCQ[cq.CQN] {
			t.Fatalf("after the wrap: AH %d, CQ %d; handles held %v, %v", ah, cq.CQN, seenAH, seenCQ)
		}
		seenAH[ah], seenCQ[cq.CQN] = true, true
	}
	// Every handle names its own object: each destroys once.
	for ah := range seenAH {
		if err := g.Destroy(ctx, device.CmdDestroyAH, ah); err != nil {
			t.Fatalf("DESTROY_AH %d: %v", ah, err)
		}
	}
	for cq := range seenCQ {
		if err := g.Destroy(ctx, device.CmdDestroyCQ, cq); err != nil {
			t.Fatalf("DESTROY_CQ %d: %v", cq, err)
		}
	}
}
