package gpu_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/gpu"
	"github.com/PacketFive/hinic/internal/gpu/gpusim"
)

// TestBadCommands: every check of a command gets its status, the
// context's error record keeps the first, and the device stays live.
func TestBadCommands(t *testing.T) {
	r := liveRig(t, func(c *gpu.GPUConfig) { c.MaxSGE = 4 }, nil)
	g, ctx := r.g, r.ctx
	c := must[uint16](t)(g.CtxCreate(ctx))
	other := must[uint16](t)(g.CtxCreate(ctx))
	dev := must[uint64](t)(g.MemAlloc(ctx, c, 4096, 0))
	foreign := must[uint64](t)(g.MemAlloc(ctx, other, 4096, 0))
	freed := must[uint64](t)(g.MemAlloc(ctx, c, 4096, 0))
	if err := g.MemFree(ctx, c, freed); err != nil {
		t.Fatal(err)
	}
	host := must[uint64](t)(g.Alloc(8192, 64))
	seg := must[uint64](t)(g.Alloc(4096, 64))
	sgl := func(segs ...gpu.SGE) uint64 { return putSGL(t, r, segs) }
	const hole = 0x80000000 // q35: the PCI hole below 4 GiB (RAM is 64 MiB, so all of it is outside)
	cp := func(op uint16, dst, src, n uint64, sg uint32) gpu.Cmd {
		return gpu.NewCmd(op, c, 0, 0, gpu.ArgsCopy{Dst: dst, Src: src, Len: n, SGCount: sg})
	}
	fill := func(dt uint8, n, dst uint64) gpu.Cmd {
		return gpu.NewCmd(gpu.OpLaunch, c, 0, 0, gpu.ArgsLaunch{Kernel: gpu.KernelFill, DType: dt, Count: n, Dst: dst})
	}
	red := func(op uint8, dst, a, b uint64) gpu.Cmd {
		return gpu.NewCmd(gpu.OpLaunch, c, 0, 0, gpu.ArgsLaunch{Kernel: gpu.KernelReduce, DType: gpu.DTF32, Op: op, Count: 1024, Dst: dst, Src0: a, Src1: b})
	}
	for _, tc := range []struct {
		name string
		cmd  gpu.Cmd
		want uint16
	}{
		{"unknown opcode", gpu.Cmd{Opcode: gpu.OpMax, CtxID: c}, gpu.StEOPNOTSUPP},
		{"opcode 0", gpu.Cmd{Opcode: 0, CtxID: c}, gpu.StEOPNOTSUPP},
		{"opcode 0xffff", gpu.Cmd{Opcode: 0xffff}, gpu.StEOPNOTSUPP},
		{"unknown flag", gpu.Cmd{Opcode: gpu.OpNop, CtxID: c, Flags: 0x8}, gpu.StEINVAL},
		{"unknown context", gpu.Cmd{Opcode: gpu.OpNop, CtxID: 999}, gpu.StENOENT},
		{"context 0", gpu.Cmd{Opcode: gpu.OpMemAlloc, CtxID: 0}, gpu.StENOENT},
		{"stream out of range", gpu.Cmd{Opcode: gpu.OpNop, CtxID: c, StreamID: gpu.DefaultMaxStreams}, gpu.StENOENT},
		{"copy beyond the allocation", cp(gpu.OpCopyH2D, dev+4000, host, 97, 0), gpu.StEACCES},
		{"copy from beyond the allocation", cp(gpu.OpCopyD2H, host, dev+1, 4096, 0), gpu.StEACCES},
		{"copy to freed memory", cp(gpu.OpCopyH2D, freed, host, 16, 0), gpu.StEACCES},
		{"copy to another context's memory", cp(gpu.OpCopyH2D, foreign, host, 16, 0), gpu.StEACCES},
		{"copy from another context's memory", cp(gpu.OpCopyD2D, dev, foreign, 16, 0), gpu.StEACCES},
		{"copy to address 0", cp(gpu.OpCopyH2D, 0, host, 16, 0), gpu.StEACCES},
		{"copy to another GPU's range", cp(gpu.OpCopyH2D, gpu.VABase(3), host, 16, 0), gpu.StEACCES},
		{"copy of 0 bytes", cp(gpu.OpCopyH2D, dev, host, 0, 0), gpu.StEINVAL},
		{"copy with a huge length", cp(gpu.OpCopyD2D, dev, dev, ^uint64(0), 0), gpu.StEACCES},
		{"H2D from outside RAM", cp(gpu.OpCopyH2D, dev, hole, 16, 0), gpu.StEFAULT},
		{"D2H to outside RAM", cp(gpu.OpCopyD2H, testRAM-8, dev, 16, 0), gpu.StEFAULT},
		{"D2H wrapping the GPA space", cp(gpu.OpCopyD2H, ^uint64(0)-4, dev, 16, 0), gpu.StEFAULT},
		{"scatter list outside RAM", cp(gpu.OpCopyH2D, dev, hole, 16, 1), gpu.StEFAULT},
		{"scatter segment outside RAM", cp(gpu.OpCopyH2D, dev, sgl(gpu.SGE{GPA: hole, Len: 16}), 16, 1), gpu.StEFAULT},
		{"scatter list misaligned", cp(gpu.OpCopyH2D, dev, sgl(gpu.SGE{GPA: seg, Len: 16})+8, 16, 1), gpu.StEINVAL},
		{"scatter lengths short", cp(gpu.OpCopyH2D, dev, sgl(gpu.SGE{GPA: seg, Len: 8}), 16, 1), gpu.StEINVAL},
		{"scatter lengths long", cp(gpu.OpCopyH2D, dev, sgl(gpu.SGE{GPA: seg, Len: 8}, gpu.SGE{GPA: seg, Len: 9}), 16, 2), gpu.StEINVAL},
		{"scatter segment of 0", cp(gpu.OpCopyD2H, sgl(gpu.SGE{GPA: seg, Len: 0}, gpu.SGE{GPA: seg, Len: 16}), dev, 16, 2), gpu.StEINVAL},
		{"scatter list too long", cp(gpu.OpCopyH2D, dev, sgl(make([]gpu.SGE, 5)...), 16, 5), gpu.StEINVAL},
		{"D2D with a scatter list", cp(gpu.OpCopyD2D, dev, dev+16, 16, 1), gpu.StEINVAL},
		{"memset beyond", gpu.NewCmd(gpu.OpMemset, c, 0, 0, gpu.ArgsMemset{Dst: dev, Len: 4097}), gpu.StEACCES},
		{"memset of 0", gpu.NewCmd(gpu.OpMemset, c, 0, 0, gpu.ArgsMemset{Dst: dev}), gpu.StEINVAL},
		{"unknown kernel", gpu.NewCmd(gpu.OpLaunch, c, 0, 0, gpu.ArgsLaunch{Kernel: 9, DType: gpu.DTF32, Count: 1, Dst: dev}), gpu.StEOPNOTSUPP},
		{"unknown dtype", fill(9, 1, dev), gpu.StEINVAL},
		{"fill of 0", fill(gpu.DTF32, 0, dev), gpu.StEINVAL},
		{"fill beyond", fill(gpu.DTF32, 1025, dev), gpu.StEACCES},
		{"fill overflowing count", fill(gpu.DTI64, 1<<61, dev), gpu.StEINVAL},
		{"fill with sources", gpu.NewCmd(gpu.OpLaunch, c, 0, 0, gpu.ArgsLaunch{Kernel: gpu.KernelFill, DType: gpu.DTF32, Count: 1, Dst: dev, Src0: dev}), gpu.StEINVAL},
		{"reduce with an unknown op", red(7, dev, dev, dev), gpu.StEINVAL},
		{"reduce of another context's", red(gpu.RedSum, dev, foreign, dev), gpu.StEACCES},
		{"reduce into freed memory", red(gpu.RedMax, freed, dev, dev), gpu.StEACCES},
		{"free of another context's", gpu.NewCmd(gpu.OpMemFree, c, 0, 0, gpu.ArgsFree{Addr: foreign}), gpu.StEACCES},
		{"free of freed memory", gpu.NewCmd(gpu.OpMemFree, c, 0, 0, gpu.ArgsFree{Addr: freed}), gpu.StENOENT},
		{"query of nothing", gpu.NewCmd(gpu.OpQuery, c, 0, 0, gpu.ArgsQuery{What: 9, RespGPA: host, RespLen: 128}), gpu.StEINVAL},
		{"query answer too short", gpu.NewCmd(gpu.OpQuery, c, 0, 0, gpu.ArgsQuery{What: gpu.QueryCtx, RespGPA: host, RespLen: 47}), gpu.StEINVAL},
		{"query answer outside RAM", gpu.NewCmd(gpu.OpQuery, 0, 0, 0, gpu.ArgsQuery{What: gpu.QueryDevice, RespGPA: hole, RespLen: 80}), gpu.StEFAULT},
		{"query of no context", gpu.NewCmd(gpu.OpQuery, 77, 0, 0, gpu.ArgsQuery{What: gpu.QueryCtx, RespGPA: host, RespLen: 48}), gpu.StENOENT},
		{"destroy of no context", gpu.Cmd{Opcode: gpu.OpCtxDestroy, CtxID: 77}, gpu.StENOENT},
	} {
		cpl, err := g.Do(ctx, tc.cmd)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if cpl.Status != tc.want || cpl.Opcode != tc.cmd.Opcode || cpl.CtxID != tc.cmd.CtxID {
			t.Errorf("%s: %+v, want status %d", tc.name, cpl, tc.want)
		}
	}
	if st := g.DevStatus(); st != gpu.DevReady|gpu.DevLive {
		t.Fatalf("dev_status %#x after bad commands", st)
	}
	// Exhausted memory and budgets.
	if _, err := g.MemAlloc(ctx, c, testMem, 0); status(t, err) != gpu.StENOMEM {
		t.Errorf("exhausted memory: %v", err)
	}
	// The error record: the first failure of the context, then clear.
	info := must[gpu.CtxInfo](t)(g.QueryCtx(ctx, c, gpu.QueryFClearErr))
	if info.Errors < 30 || info.ErrOpcode != gpu.OpMax || info.ErrStatus != gpu.StEOPNOTSUPP {
		t.Errorf("error record %+v", info)
	}
	if info := must[gpu.CtxInfo](t)(g.QueryCtx(ctx, c, 0)); info.Errors != 0 || info.ErrStatus != 0 || info.Allocs != 1 || info.MemUsed != 4096 {
		t.Errorf("after clear %+v", info)
	}
	if info := must[gpu.CtxInfo](t)(g.QueryCtx(ctx, other, 0)); info.Errors != 0 {
		t.Errorf("the other context has %d errors", info.Errors)
	}
	if e := g.Header().Errors; e < 40 {
		t.Errorf("device errors %d", e)
	}
	// The ring configuration and limits in BAR2 are the driver's to
	// read, not the device's: scribbling on them changes nothing.
	h := g.Header()
	atomic.StoreUint64(&h.CmdRingGPA, 0x80000000)
	atomic.StoreUint64(&h.CplRingGPA, ^uint64(0))
	atomic.StoreUint32(&h.CmdEntries, 3)
	atomic.StoreUint32(&h.MaxSGE, 1<<30)
	atomic.StoreUint64(&h.MemBudget, ^uint64(0))
	if _, err := g.MemAlloc(ctx, c, 4096, 0); err != nil {
		t.Fatalf("after scribbling on the header: %v", err)
	}
	if cpl := must[gpu.Cpl](t)(g.Do(ctx, cp(gpu.OpCopyH2D, dev, sgl(make([]gpu.SGE, 5)...), 16, 5))); cpl.Status != gpu.StEINVAL {
		t.Errorf("max_sge from BAR2 was used: %+v", cpl)
	}
}

func TestBudgets(t *testing.T) {
	r := liveRig(t, func(c *gpu.GPUConfig) {
		c.MaxContexts, c.MaxAllocs, c.MemBudget = 2, 5, 64<<10
		c.CtxMaxAllocs, c.CtxMemBudget = 3, 32<<10
	}, nil)
	g, ctx := r.g, r.ctx
	a := must[uint16](t)(g.CtxCreate(ctx))
	b := must[uint16](t)(g.CtxCreate(ctx))
	if _, err := g.CtxCreate(ctx); status(t, err) != gpu.StENOSPC {
		t.Errorf("third context: %v", err)
	}
	if _, err := g.MemAlloc(ctx, a, 32<<10+1, 0); status(t, err) != gpu.StENOMEM {
		t.Errorf("past the context's bytes: %v", err)
	}
	for range 3 {
		must[uint64](t)(g.MemAlloc(ctx, a, 256, 0))
	}
	if _, err := g.MemAlloc(ctx, a, 256, 0); status(t, err) != gpu.StENOSPC {
		t.Errorf("past the context's allocations: %v", err)
	}
	x := must[uint64](t)(g.MemAlloc(ctx, b, 32<<10, 0))
	if _, err := g.MemAlloc(ctx, b, 256, 0); status(t, err) != gpu.StENOMEM {
		t.Errorf("past the guest's bytes: %v", err)
	}
	if err := g.MemFree(ctx, b, x); err != nil {
		t.Fatal(err)
	}
	must[uint64](t)(g.MemAlloc(ctx, b, 256, 0))
	must[uint64](t)(g.MemAlloc(ctx, b, 256, 0))
	if _, err := g.MemAlloc(ctx, b, 256, 0); status(t, err) != gpu.StENOSPC {
		t.Errorf("past the guest's allocations: %v", err)
	}
	// Destroying a context returns its share.
	if err := g.CtxDestroy(ctx, a); err != nil {
		t.Fatal(err)
	}
	must[uint16](t)(g.CtxCreate(ctx))
	must[uint64](t)(g.MemAlloc(ctx, b, 256, 0))
}

// TestFatal: a broken handshake or ring index makes the device fatal
// with its code; only a reset leaves it, and the device then works.
func TestFatal(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rings gpusim.Rings
		after func(r *rig)
		want  uint32
	}{
		{name: "ABI", rings: gpusim.Rings{ABI: 2 << 16}, want: gpu.FatalABI},
		{name: "entries not a power of two", rings: gpusim.Rings{CmdN: 24}, want: gpu.FatalRingConfig},
		{name: "too few entries", rings: gpusim.Rings{CplN: 4}, want: gpu.FatalRingConfig},
		{name: "too many entries", rings: gpusim.Rings{CmdN: 8192}, want: gpu.FatalRingConfig},
		{name: "misaligned ring", rings: gpusim.Rings{CplGPA: 1<<20 + 32}, want: gpu.FatalRingConfig},
		{name: "ring outside RAM", rings: gpusim.Rings{CmdGPA: testRAM - 64}, want: gpu.FatalRingConfig},
		{name: "ring in the PCI hole", rings: gpusim.Rings{CmdGPA: 0x80000000}, want: gpu.FatalRingConfig},
		{name: "cmd_prod past the ring", after: func(r *rig) { r.g.SetCmdProd(65) }, want: gpu.FatalCmdIndex},
		{name: "cmd_prod behind cmd_cons", after: func(r *rig) { r.g.SetCmdProd(^uint32(0)) }, want: gpu.FatalCmdIndex},
		{name: "cpl_cons past cpl_prod", after: func(r *rig) {
			atomic.StoreUint32(&r.g.Header().CplCons, 1)
			r.g.Ring(gpu.DBCpl)
		}, want: gpu.FatalCplIndex},
		{name: "cpl_cons far behind", after: func(r *rig) {
			atomic.StoreUint32(&r.g.Header().CplCons, 1<<31)
			r.g.Ring(gpu.DBCmd)
		}, want: gpu.FatalCplIndex},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, nil, nil)
			g, ctx := r.g, r.ctx
			err := g.HandshakeWith(ctx, tc.rings)
			if tc.after != nil {
				if err != nil {
					t.Fatal(err)
				}
				tc.after(r)
				code, werr := g.WaitFatal(ctx)
				if werr != nil {
					t.Fatal(werr)
				}
				err = &gpusim.FatalError{Code: code}
			}
			var fe *gpusim.FatalError
			if !errors.As(err, &fe) || fe.Code != tc.want {
				t.Fatalf("%v, want fatal code %d", err, tc.want)
			}
			if st := g.DevStatus(); st&gpu.DevLive != 0 {
				t.Errorf("dev_status %#x: fatal and live", st)
			}
			// A fatal device ignores commands until reset.
			g.Ring(gpu.DBCmd)
			if err := g.Reset(ctx); err != nil {
				t.Fatal(err)
			}
			if rc := g.Header().ResetCount; rc != 1 || g.FatalCode() != 0 {
				t.Errorf("reset_count %d fatal_code %d", rc, g.FatalCode())
			}
			if err := g.Handshake(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := g.CtxCreate(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestKilledMidStream: a context destroyed, or the driver reset, or the
// guest gone while commands are queued behind a wait that never ends:
// nothing hangs, nothing leaks, the device goes on.
func TestKilledMidStream(t *testing.T) {
	r := liveRig(t, nil, nil)
	g, ctx := r.g, r.ctx

	// CTX_DESTROY: the queued commands complete ECANCELED, then the
	// destroy, and the context's memory is free.
	c := must[uint16](t)(g.CtxCreate(ctx))
	dev := must[uint64](t)(g.MemAlloc(ctx, c, 1<<20, 0))
	host := must[uint64](t)(g.Alloc(1<<20, 64))
	queued := tagged(g, wait(c, 0, 0, 1),
		gpu.NewCmd(gpu.OpCopyH2D, c, 0, 0, gpu.ArgsCopy{Dst: dev, Src: host, Len: 1 << 20}),
		gpu.Cmd{Opcode: gpu.OpNop, CtxID: c, StreamID: 0},
		wait(c, 1, 1, 5))
	if err := g.Post(ctx, queued...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	destroy := gpu.Cmd{Opcode: gpu.OpCtxDestroy, CtxID: c, Tag: g.Tag()}
	if err := g.Post(ctx, destroy); err != nil {
		t.Fatal(err)
	}
	dcpl := must[gpu.Cpl](t)(g.Wait(ctx, destroy.Tag))
	if dcpl.Status != gpu.StOK {
		t.Fatal(dcpl)
	}
	for _, q := range queued {
		cpl := must[gpu.Cpl](t)(g.Wait(ctx, q.Tag))
		if cpl.Status != gpu.StECANCELED || cpl.TimestampNS > dcpl.TimestampNS {
			t.Errorf("queued %d: %+v (destroy at %d)", q.Opcode, cpl, dcpl.TimestampNS)
		}
	}
	order := g.Order()
	if order[len(order)-1] != destroy.Tag {
		t.Error("CTX_DESTROY completed before the context's commands")
	}
	if cpl := must[gpu.Cpl](t)(g.Do(ctx, gpu.Cmd{Opcode: gpu.OpNop, CtxID: c})); cpl.Status != gpu.StENOENT {
		t.Errorf("command of a destroyed context: %+v", cpl)
	}
	if dev := must[gpu.DevInfo](t)(g.QueryDevice(ctx)); dev.MemUsed != 0 || dev.Contexts != 0 || dev.Inflight != 0 {
		t.Errorf("after destroy %+v", dev)
	}

	// Reset with work in flight: no completion reaches the old rings.
	c = must[uint16](t)(g.CtxCreate(ctx))
	must[uint64](t)(g.MemAlloc(ctx, c, 1<<20, 0))
	stuck := tagged(g, wait(c, 0, 0, 1), gpu.Cmd{Opcode: gpu.OpNop, CtxID: c}, wait(c, 2, 3, 1))
	if err := g.Post(ctx, stuck...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	prod := atomic.LoadUint32(&g.Header().CplProd)
	if err := g.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	h := g.Header()
	if p := atomic.LoadUint32(&h.CplProd); p != 0 {
		t.Errorf("cpl_prod %d after reset (was %d)", p, prod)
	}
	if h.MemUsed != 0 || h.Contexts != 0 || h.Allocs != 0 {
		t.Errorf("after reset: mem %d contexts %d allocs %d", h.MemUsed, h.Contexts, h.Allocs)
	}
	if err := g.Handshake(ctx); err != nil {
		t.Fatal(err)
	}
	c = must[uint16](t)(g.CtxCreate(ctx))
	if c != 1 {
		t.Errorf("first context after reset: %d", c)
	}
	if dev := must[gpu.DevInfo](t)(g.QueryDevice(ctx)); dev.MemUsed != 0 || dev.Contexts != 1 || dev.Inflight != 0 {
		t.Errorf("after reset %+v", dev)
	}
	// Clearing DRV_OK of a live device resets it too.
	atomic.StoreUint32(&h.DriverStatus, 0)
	g.Ring(gpu.DBCtrl)
	for atomic.LoadUint32(&h.ResetCount) != 2 {
		if ctx.Err() != nil {
			t.Fatal("no reset on DRV_OK cleared")
		}
		time.Sleep(time.Millisecond)
	}

	// The guest gone (QEMU killed) with work stuck: a new guest finds
	// a fresh device.
	if err := g.Handshake(ctx); err != nil {
		t.Fatal(err)
	}
	c = must[uint16](t)(g.CtxCreate(ctx))
	must[uint64](t)(g.MemAlloc(ctx, c, 1<<20, 0))
	if err := g.Post(ctx, tagged(g, wait(c, 0, 0, 1))...); err != nil {
		t.Fatal(err)
	}
	g.Close()
	g2 := reconnect(t, r)
	if err := g2.Handshake(ctx); err != nil {
		t.Fatal(err)
	}
	if dev := must[gpu.DevInfo](t)(g2.QueryDevice(ctx)); dev.MemUsed != 0 || dev.Contexts != 0 {
		t.Errorf("new guest sees %+v", dev)
	}
}

// reconnect connects a new guest to r's GPU once the old session ended.
func reconnect(t *testing.T, r *rig) *gpusim.Guest {
	t.Helper()
	for {
		st := r.srv.Status()
		if !st.GPUs[0].Guest {
			break
		}
		if r.ctx.Err() != nil {
			t.Fatal("old session did not end")
		}
		time.Sleep(time.Millisecond)
	}
	g, err := gpusim.Connect(r.ctx, gpusim.Config{Socket: r.cfg.Socket, RAMPath: r.cfg.RAMPath, RAMSize: r.cfg.RAMSize})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}
