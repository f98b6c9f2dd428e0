package integration

import (
	"runtime"
	"testing"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/device/guestsim"
)

// The objects a hostile guest makes as large as the device allows, with
// the least guest memory: one page list and one pair of rings, reused by
// every registration and every QP (nothing in the ABI forbids sharing).
const (
	bigPages  = 1 << 20 // pages in one MR: maxPageList
	bigQPWR   = 16384   // max_qp_wr
	bigSGE    = 32      // max_sge
	bigInline = 256     // max_inline
)

// amplifier is a guest's shared page list and rings for big objects.
type amplifier struct {
	g              *guestsim.Guest
	pd             uint32
	cq             *guestsim.CQ
	list, page     uint64
	sq, rq         uint64
	sqDB, rqDB     uint64
	sqStride, rqSt uint32
}

func newAmplifier(t testing.TB, g *guestsim.Guest) *amplifier {
	t.Helper()
	ctx := testCtx(t)
	a := &amplifier{g: g, sqStride: 64 + 16*bigSGE, rqSt: 16 + 16*bigSGE}
	var err error
	if a.pd, err = g.AllocPD(ctx); err != nil {
		t.Fatal(err)
	}
	if a.cq, err = g.CreateCQ(ctx, 64, 0); err != nil {
		t.Fatal(err)
	}
	allocs := []struct {
		p     *uint64
		n, al uint64
	}{
		{&a.page, 4096, 4096}, {&a.list, 8 * bigPages, 4096},
		{&a.sq, bigQPWR * uint64(a.sqStride), 4096}, {&a.rq, bigQPWR * uint64(a.rqSt), 4096},
		{&a.sqDB, 8, 8}, {&a.rqDB, 8, 8},
	}
	for _, x := range allocs {
		if *x.p, err = g.Alloc(x.n, x.al, false); err != nil {
			t.Fatal(err)
		}
	}
	list := make([]byte, 8*bigPages)
	for i := 0; i < bigPages; i++ {
		for k := range 8 {
			list[8*i+k] = byte(a.page >> (8 * k))
		}
	}
	if err := g.RAM().WriteAt(list, a.list); err != nil {
		t.Fatal(err)
	}
	return a
}

// regMR registers 4 GiB of IOVA, every page the same guest page.
func (a *amplifier) regMR(t testing.TB) (uint32, error) {
	cmd := device.AdminCmd{Opcode: device.CmdRegMR}
	*device.PayloadOf[device.CmdRegMRArgs](&cmd) = device.CmdRegMRArgs{PD: a.pd, Access: 1, Length: bigPages * 4096,
		PageListGPA: a.list, NPages: bigPages, PageShift: 12}
	c, err := a.g.Admin(testCtx(t), &cmd)
	return c.Handle, err
}

// createQP creates an RC QP of the largest depths, SGE counts and
// inline size, on the shared rings.
func (a *amplifier) createQP(t testing.TB) (uint32, error) {
	cmd := device.AdminCmd{Opcode: device.CmdCreateQP}
	*device.PayloadOf[device.CmdCreateQPArgs](&cmd) = device.CmdCreateQPArgs{PD: a.pd, QPType: guestsim.QPTypeRC,
		SendCQ: a.cq.CQN, RecvCQ: a.cq.CQN, SQDepth: bigQPWR, MaxSendSGE: bigSGE, MaxInline: bigInline,
		SQStride: a.sqStride, SQGPA: a.sq, SQDBRecGPA: a.sqDB, RQDepth: bigQPWR, MaxRecvSGE: bigSGE,
		RQStride: a.rqSt, RQGPA: a.rq, RQDBRecGPA: a.rqDB}
	c, err := a.g.Admin(testCtx(t), &cmd)
	return c.Handle, err
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkHostCost reports the backend's heap per object a guest
// creates at the largest sizes (host-bytes/object): what a guest costs
// the process, whatever its own memory. Run with -benchtime=4x.
func BenchmarkHostCost(b *testing.B) {
	for _, obj := range []string{"mr", "qp"} {
		b.Run("obj="+obj, func(b *testing.B) {
			tb := newTestbed(b, 1)
			a := newAmplifier(b, tb.guests[0])
			var total uint64
			for range b.N {
				before := heapInUse()
				var h uint32
				var err error
				op := uint16(device.CmdDeregMR)
				if obj == "mr" {
					h, err = a.regMR(b)
				} else {
					h, err = a.createQP(b)
					op = device.CmdDestroyQP
				}
				if err != nil {
					b.Fatal(err)
				}
				total += heapInUse() - before
				if err := a.g.Destroy(testCtx(b), op, h); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(total)/float64(b.N), "host-bytes/object")
		})
	}
}

// TestMemoryBudget: a guest registers one 4 GiB page list (8 MiB of its
// own RAM) and creates QPs of the largest sizes on one pair of rings,
// again and again. Before, each MR cost the backend 8 MiB and each QP
// 33 MiB, up to max_mr and max_qp (about 31 GiB). Now the guest's
// budget runs out: ENOMEM, and objects it frees give the room back,
// while a second guest, with its own budget, creates the same objects.
func TestMemoryBudget(t *testing.T) {
	const limit = 64 << 20
	tb := newTestbedConfig(t, 2, func(i int, c *device.VNICConfig) {
		if i == 0 {
			c.MemBudget = limit
		}
	})
	ctx := testCtx(t)
	hostile := newAmplifier(t, tb.guests[0])
	const perMR = 8 * bigPages // the page list the engine keeps
	var mrs []uint32
	for len(mrs) <= limit/perMR {
		lkey, err := hostile.regMR(t)
		if err != nil {
			wantStatus(t, err, device.StENOMEM)
			break
		}
		mrs = append(mrs, lkey)
	}
	if len(mrs) == 0 || len(mrs) >= limit/perMR {
		t.Fatalf("%d MRs of %d MiB each within a %d MiB budget; want ENOMEM before %d",
			len(mrs), perMR>>20, limit>>20, limit/perMR)
	}
	if _, err := hostile.createQP(t); err == nil {
		t.Fatal("a QP of the largest sizes with the budget spent")
	} else {
		wantStatus(t, err, device.StENOMEM)
	}
	// The small objects of ordinary work still fit.
	if _, err := tb.guests[0].CreateCQ(ctx, 16, 0); err != nil {
		t.Fatalf("a CQ of 16 with %d MiB left: %v", limit>>20-len(mrs)*perMR>>20, err)
	}

	// The other guest is unaffected: its own budget (the default).
	other := newAmplifier(t, tb.guests[1])
	if _, err := other.regMR(t); err != nil {
		t.Fatalf("the second guest's MR: %v", err)
	}
	if _, err := other.createQP(t); err != nil {
		t.Fatalf("the second guest's QP: %v", err)
	}
	stillServes(t, tb.guests[1])

	// Freed objects give their room back.
	for _, lkey := range mrs {
		if err := tb.guests[0].Destroy(ctx, device.CmdDeregMR, lkey); err != nil {
			t.Fatal(err)
		}
	}
	qpn, err := hostile.createQP(t)
	if err != nil {
		t.Fatalf("a QP of the largest sizes after the MRs were freed: %v", err)
	}
	if _, err := hostile.createQP(t); err == nil {
		t.Fatal("two QPs of 33 MiB within 64 MiB")
	} else {
		wantStatus(t, err, device.StENOMEM)
	}
	if err := tb.guests[0].Destroy(ctx, device.CmdDestroyQP, qpn); err != nil {
		t.Fatal(err)
	}
	if _, err := hostile.regMR(t); err != nil {
		t.Fatalf("an MR after the QP was destroyed: %v", err)
	}
}
