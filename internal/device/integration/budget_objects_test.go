package integration

import (
	"encoding/binary"
	"testing"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/device/guestsim"
	"github.com/PacketFive/hinic/internal/rdma"
)

// objRings is a guest's guest memory for CQs and SRQs of the largest
// sizes, shared by all of them as a hostile guest may share it: one CQ
// page that every entry of one page table names, one SRQ ring, one
// dbrec for each kind.
type objRings struct {
	g                *guestsim.Guest
	pd               uint32
	attr             device.DeviceAttr
	cqDepth          uint32
	cqTable, cqDB    uint64
	srqRing, srqDB   uint64
	srqDepth, srqSGE uint32
}

func newObjRings(t *testing.T, g *guestsim.Guest) *objRings {
	t.Helper()
	ctx := testCtx(t)
	o := &objRings{g: g}
	var err error
	if o.attr, err = g.QueryDevice(ctx); err != nil {
		t.Fatal(err)
	}
	if o.pd, err = g.AllocPD(ctx); err != nil {
		t.Fatal(err)
	}
	// The deepest CQ a page table can describe, within max_cqe.
	o.cqDepth = min(o.attr.MaxCQE, device.CQMaxPages*device.CQPageSize/64)
	pages := uint64(o.cqDepth) * 64 / device.CQPageSize
	page, err := g.Alloc(device.CQPageSize, device.CQPageSize, false)
	if err != nil {
		t.Fatal(err)
	}
	if o.cqTable, err = g.Alloc(8*pages, 8, false); err != nil {
		t.Fatal(err)
	}
	tbl := make([]byte, 8*pages)
	for i := range pages {
		binary.LittleEndian.PutUint64(tbl[8*i:], page)
	}
	if err := g.RAM().WriteAt(tbl, o.cqTable); err != nil {
		t.Fatal(err)
	}
	o.srqDepth, o.srqSGE = o.attr.MaxSRQWR, o.attr.MaxSRQSGE
	if o.srqRing, err = g.Alloc(uint64(o.srqDepth)*uint64(o.srqStride()), 4096, false); err != nil {
		t.Fatal(err)
	}
	if o.cqDB, err = g.Alloc(16, 16, false); err != nil {
		t.Fatal(err)
	}
	if o.srqDB, err = g.Alloc(8, 8, false); err != nil {
		t.Fatal(err)
	}
	return o
}

func (o *objRings) srqStride() uint32 { return 16 + 16*o.srqSGE }

func (o *objRings) createCQ(t *testing.T) (uint32, error) {
	cmd := device.AdminCmd{Opcode: device.CmdCreateCQ}
	*device.PayloadOf[device.CmdCreateCQArgs](&cmd) = device.CmdCreateCQArgs{RingGPA: o.cqTable, DBRecGPA: o.cqDB,
		Depth: o.cqDepth, Flags: device.CQFPaged}
	c, err := o.g.Admin(testCtx(t), &cmd)
	return c.Handle, err
}

func (o *objRings) createSRQ(t *testing.T) (uint32, error) {
	cmd := device.AdminCmd{Opcode: device.CmdCreateSRQ}
	*device.PayloadOf[device.CmdCreateSRQArgs](&cmd) = device.CmdCreateSRQArgs{PD: o.pd, Depth: o.srqDepth,
		MaxSGE: o.srqSGE, Stride: o.srqStride(), RingGPA: o.srqRing, DBRecGPA: o.srqDB}
	c, err := o.g.Admin(testCtx(t), &cmd)
	return c.Handle, err
}

func (o *objRings) createAH(t *testing.T) (uint32, error) {
	return o.g.CreateAH(testCtx(t), o.pd, ahAttr())
}

// TestMemoryBudgetObjects: CQs, SRQs and AHs each draw on their guest's
// memory budget, not only MRs and QPs (TestMemoryBudget). A guest whose
// budget holds want objects of the largest size gets ENOMEM for the
// next, well before the object's count limit; one destroyed gives its
// room back; and a second guest, with its own budget, creates more of
// the same objects than the first guest's budget holds.
func TestMemoryBudgetObjects(t *testing.T) {
	// want is small so that the loops are short; the count limits
	// (max_cq, max_srq, max_ah: 1,024 each) are far above it.
	const want = 3
	for _, obj := range []struct {
		name    string
		create  func(*objRings, *testing.T) (uint32, error)
		destroy uint16
		// cost is the engine's share of one object, the least the
		// backend charges for it.
		cost func(o *objRings) int64
	}{
		{"cq", (*objRings).createCQ, device.CmdDestroyCQ,
			func(o *objRings) int64 { return rdma.CQMemory(int(o.cqDepth)) }},
		{"srq", (*objRings).createSRQ, device.CmdDestroySRQ,
			func(o *objRings) int64 { return rdma.SRQMemory(int(o.srqDepth), int(o.srqSGE)) }},
		{"ah", (*objRings).createAH, device.CmdDestroyAH,
			func(*objRings) int64 { return rdma.AHMemory() }},
	} {
		t.Run("obj="+obj.name, func(t *testing.T) {
			// The largest sizes are the device's limits, which a vNIC
			// publishes only once it runs: a probe testbed tells
			// them, and so the budget of the one under test.
			cost := obj.cost(newObjRings(t, newTestbed(t, 1).guests[0]))
			// want objects and three quarters of another: the
			// backend's own share of each (a struct, a CQ's page
			// list) fits in the quarter's slack, a want+1-th does not.
			limit := uint64(want*cost + 3*cost/4)
			tb := newTestbedConfig(t, 2, func(i int, c *device.VNICConfig) {
				if i == 0 {
					c.MemBudget = limit
				}
			})
			hostile, other := newObjRings(t, tb.guests[0]), newObjRings(t, tb.guests[1])
			if c := obj.cost(hostile); c != cost {
				t.Fatalf("the probe's %s costs %d bytes, this testbed's %d", obj.name, cost, c)
			}
			var made []uint32
			for len(made) <= want {
				h, err := obj.create(hostile, t)
				if err != nil {
					wantStatus(t, err, device.StENOMEM)
					break
				}
				made = append(made, h)
			}
			if len(made) != want {
				t.Fatalf("%d %ss of %d bytes each within a budget of %d bytes; want %d, then ENOMEM",
					len(made), obj.name, cost, limit, want)
			}
			// A destroyed object gives its room back.
			if err := tb.guests[0].Destroy(testCtx(t), obj.destroy, made[0]); err != nil {
				t.Fatal(err)
			}
			if _, err := obj.create(hostile, t); err != nil {
				t.Fatalf("a %s after one was destroyed: %v", obj.name, err)
			}
			if _, err := obj.create(hostile, t); err == nil {
				t.Fatalf("a %s past the budget after the refund", obj.name)
			} else {
				wantStatus(t, err, device.StENOMEM)
			}
			// The second guest's budget (the default) is its own.
			for i := range want + 1 {
				if _, err := obj.create(other, t); err != nil {
					t.Fatalf("the second guest's %s #%d: %v", obj.name, i+1, err)
				}
			}
			stillServes(t, tb.guests[1])
		})
	}
}
