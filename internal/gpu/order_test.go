package gpu_test

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/gpu"
)

func record(c, stream uint16, ev uint32) gpu.Cmd {
	return gpu.NewCmd(gpu.OpEventRecord, c, stream, 0, gpu.ArgsEvent{EventID: ev})
}

func wait(c, stream uint16, ev uint32, count uint64) gpu.Cmd {
	return gpu.NewCmd(gpu.OpEventWait, c, stream, 0, gpu.ArgsEvent{EventID: ev, Count: count})
}

func tagged(g interface{ Tag() uint64 }, cmds ...gpu.Cmd) []gpu.Cmd {
	for i := range cmds {
		cmds[i].Tag = g.Tag()
	}
	return cmds
}

func TestEvents(t *testing.T) {
	r := liveRig(t, nil, nil)
	g, ctx := r.g, r.ctx
	c := must[uint16](t)(g.CtxCreate(ctx))
	// Records on one stream: counts 1, 2, 3 and rising timestamps.
	cmds := tagged(g, record(c, 0, 5), record(c, 0, 5), record(c, 0, 5))
	if err := g.Post(ctx, cmds...); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i, cmd := range cmds {
		cpl := must[gpu.Cpl](t)(g.Wait(ctx, cmd.Tag))
		if cpl.Status != gpu.StOK || cpl.Result != uint64(i+1) || cpl.TimestampNS <= last {
			t.Errorf("record %d: %+v (last ts %d)", i, cpl, last)
		}
		last = cpl.TimestampNS
	}
	// A wait on stream 1 for a record stream 2 makes later: stream 1
	// holds (its NOP behind the wait too), stream 3 runs meanwhile.
	hold := tagged(g, wait(c, 1, 7, 1), gpu.Cmd{Opcode: gpu.OpNop, CtxID: c, StreamID: 1})
	if err := g.Post(ctx, hold...); err != nil {
		t.Fatal(err)
	}
	free := must[gpu.Cpl](t)(g.Do(ctx, gpu.Cmd{Opcode: gpu.OpNop, CtxID: c, StreamID: 3}))
	if free.Status != gpu.StOK {
		t.Fatal(free)
	}
	time.Sleep(20 * time.Millisecond)
	for _, tag := range g.Order() {
		if tag == hold[0].Tag || tag == hold[1].Tag {
			t.Fatal("wait completed before its event was recorded")
		}
	}
	rec := must[gpu.Cpl](t)(g.Do(ctx, record(c, 2, 7)))
	w := must[gpu.Cpl](t)(g.Wait(ctx, hold[0].Tag))
	n := must[gpu.Cpl](t)(g.Wait(ctx, hold[1].Tag))
	if w.Status != gpu.StOK || w.Result != 1 || w.TimestampNS < rec.TimestampNS || n.TimestampNS < w.TimestampNS {
		t.Errorf("record %+v wait %+v nop %+v", rec, w, n)
	}
	// A wait already satisfied completes at once.
	if cpl := must[gpu.Cpl](t)(g.Do(ctx, wait(c, 4, 5, 2))); cpl.Status != gpu.StOK || cpl.Result != 3 {
		t.Errorf("satisfied wait %+v", cpl)
	}
	// Out of range ids.
	for _, cmd := range []gpu.Cmd{record(c, 0, gpu.DefaultMaxEvents), wait(c, 0, 1<<31, 1)} {
		if cpl := must[gpu.Cpl](t)(g.Do(ctx, cmd)); cpl.Status != gpu.StENOENT {
			t.Errorf("event id out of range: %+v", cpl)
		}
	}
	if cpl := must[gpu.Cpl](t)(g.Do(ctx, gpu.NewCmd(gpu.OpEventRecord, c, 0, 0, gpu.ArgsEvent{Count: 1}))); cpl.Status != gpu.StEINVAL {
		t.Errorf("record with a count: %+v", cpl)
	}
	// Device clock: QUERY_DEVICE's clock is past every timestamp.
	if dev := must[gpu.DevInfo](t)(g.QueryDevice(ctx)); dev.ClockNS < n.TimestampNS {
		t.Errorf("clock %d before timestamp %d", dev.ClockNS, n.TimestampNS)
	}
}

// TestStreamOrder: one stream's commands complete in ring order and see
// each other's results; a held stream does not hold another.
func TestStreamOrder(t *testing.T) {
	r := liveRig(t, nil, nil)
	g, ctx := r.g, r.ctx
	c := must[uint16](t)(g.CtxCreate(ctx))
	const n = 1 << 16
	a := must[uint64](t)(g.MemAlloc(ctx, c, n, 0))
	b := must[uint64](t)(g.MemAlloc(ctx, c, n, 0))
	host := must[uint64](t)(g.Alloc(n, 64))
	out := must[uint64](t)(g.Alloc(n, 64))
	for i := range n {
		g.Mem(host, n)[i] = byte(i * 7)
	}
	var cmds []gpu.Cmd
	for s := uint16(0); s < 4; s++ {
		// Per stream: upload, memset half, copy to b, download, with
		// each step depending on the one before.
		off := uint64(s) * n / 4
		cmds = append(cmds,
			gpu.NewCmd(gpu.OpCopyH2D, c, s, 0, gpu.ArgsCopy{Dst: a + off, Src: host + off, Len: n / 4}),
			gpu.NewCmd(gpu.OpMemset, c, s, 0, gpu.ArgsMemset{Dst: a + off, Len: n / 8, Value: byte(s + 1)}),
			gpu.NewCmd(gpu.OpCopyD2D, c, s, 0, gpu.ArgsCopy{Dst: b + off, Src: a + off, Len: n / 4}),
			gpu.NewCmd(gpu.OpCopyD2H, c, s, 0, gpu.ArgsCopy{Dst: out + off, Src: b + off, Len: n / 4}),
		)
	}
	cmds = tagged(g, cmds...)
	if err := g.Post(ctx, cmds...); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range cmds {
		if cpl := must[gpu.Cpl](t)(g.Wait(ctx, cmd.Tag)); cpl.Status != gpu.StOK || cpl.StreamID != cmd.StreamID {
			t.Fatalf("%+v", cpl)
		}
	}
	order := g.Order()
	for s := range 4 {
		var seen []uint64
		for _, tag := range order {
			for _, cmd := range cmds[4*s : 4*s+4] {
				if cmd.Tag == tag {
					seen = append(seen, tag)
				}
			}
		}
		want := []uint64{cmds[4*s].Tag, cmds[4*s+1].Tag, cmds[4*s+2].Tag, cmds[4*s+3].Tag}
		if !slices.Equal(seen, want) {
			t.Errorf("stream %d completed %v, want %v", s, seen, want)
		}
	}
	res := g.Mem(out, n)
	for i := range n {
		s := i / (n / 4)
		want := byte(i * 7)
		if i%(n/4) < n/8 {
			want = byte(s + 1)
		}
		if res[i] != want {
			t.Fatalf("byte %d: %d, want %d", i, res[i], want)
		}
	}
}

// TestNoIRQ: HIGPU_CMD_F_NO_IRQ and a driver without MSI-X get no
// interrupts; the completions are there all the same.
func TestNoIRQ(t *testing.T) {
	r := liveRig(t, nil, nil)
	g, ctx := r.g, r.ctx
	h := g.Header()
	before := atomic.LoadUint64(&h.Interrupts)
	cmd := gpu.Cmd{Opcode: gpu.OpCtxCreate, Flags: gpu.CmdFNoIRQ}
	if cpl := must[gpu.Cpl](t)(g.Do(ctx, cmd)); cpl.Status != gpu.StOK {
		t.Fatal(cpl)
	}
	if n := atomic.LoadUint64(&h.Interrupts); n != before {
		t.Errorf("NO_IRQ raised %d interrupts", n-before)
	}
	if _, err := g.Do(ctx, gpu.Cmd{Opcode: gpu.OpCtxCreate}); err != nil {
		t.Fatal(err)
	}
	if n := atomic.LoadUint64(&h.Interrupts); n != before+1 {
		t.Errorf("%d interrupts for one completion", n-before)
	}

	r2 := newRig(t, nil, nil)
	if err := r2.g.HandshakeWith(r2.ctx, gpusimRings{NoMSIX: true}.rings()); err != nil {
		t.Fatal(err)
	}
	if _, err := r2.g.Do(r2.ctx, gpu.Cmd{Opcode: gpu.OpCtxCreate}); err != nil {
		t.Fatal(err)
	}
	if n := atomic.LoadUint64(&r2.g.Header().Interrupts); n != 0 || r2.g.IRQs(gpu.IRQCpl) != 0 {
		t.Errorf("%d interrupts without MSI-X", n)
	}
}

// TestBackpressure: the device takes no command whose completion would
// find the completion ring full, and goes on when the driver consumes.
func TestBackpressure(t *testing.T) {
	r := newRig(t, nil, nil)
	g, ctx := r.g, r.ctx
	if err := g.HandshakeWith(ctx, gpusimRings{CmdN: 32, CplN: 8}.rings()); err != nil {
		t.Fatal(err)
	}
	c := must[uint16](t)(g.CtxCreate(ctx))
	h := g.Header()
	// The simulator consumes completions only inside Wait and Order:
	// post 20 NOPs and watch the device stop.
	cmds := make([]gpu.Cmd, 20)
	for i := range cmds {
		cmds[i] = gpu.Cmd{Opcode: gpu.OpNop, CtxID: c, Tag: g.Tag()}
	}
	if err := g.Post(ctx, cmds...); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for atomic.LoadUint32(&h.CplProd) < 9 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	// CTX_CREATE's completion was consumed: 1 + 8 in the ring at most.
	if cons, prod := atomic.LoadUint32(&h.CmdCons), atomic.LoadUint32(&h.CplProd); cons != 9 || prod != 9 {
		t.Fatalf("cmd_cons %d cpl_prod %d, want 9 and 9", cons, prod)
	}
	for _, cmd := range cmds {
		if cpl := must[gpu.Cpl](t)(g.Wait(ctx, cmd.Tag)); cpl.Status != gpu.StOK {
			t.Fatal(cpl)
		}
	}
}

// TestMaxInflight: commands in flight stop the consumer at max_inflight;
// a reset recovers.
func TestMaxInflight(t *testing.T) {
	r := liveRig(t, func(c *gpu.GPUConfig) { c.MaxInflight = 2 }, nil)
	g, ctx := r.g, r.ctx
	c := must[uint16](t)(g.CtxCreate(ctx))
	cmds := tagged(g, wait(c, 1, 0, 1), wait(c, 2, 0, 1), record(c, 3, 0))
	if err := g.Post(ctx, cmds...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	if cons := atomic.LoadUint32(&g.Header().CmdCons); cons != 3 {
		t.Fatalf("cmd_cons %d with two waits in flight, want 3", cons)
	}
	if err := g.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Handshake(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := g.CtxCreate(ctx); err != nil {
		t.Fatal(err)
	}
}
