package gpu_test

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"

	"github.com/PacketFive/hinic/internal/gpu"
)

func TestHeaderIdentity(t *testing.T) {
	r := newRig(t, nil, nil)
	h := r.g.Header()
	if atomic.LoadUint32(&h.Magic) != gpu.Magic || h.ABIMajor != gpu.ABIMajor || h.ABIMinor != gpu.ABIMinor ||
		h.VendorID != gpu.VendorID || h.DeviceID != gpu.DeviceID || h.BARSize != gpu.BAR2Size {
		t.Fatalf("identity %+v", *h)
	}
	if h.GPUID != 2 || h.VABase != gpu.VABase(2) || h.MemSize != testMem || h.AllocAlign != gpu.AllocAlgn {
		t.Errorf("gpu_id %d va_base %#x mem %d align %d", h.GPUID, h.VABase, h.MemSize, h.AllocAlign)
	}
	if string(bytes.TrimRight(h.Name[:], "\x00")) != "HiGPU-test" {
		t.Errorf("name %q", h.Name)
	}
	if h.Caps != gpu.CapCopySG|gpu.CapKernels|gpu.CapEventWait || h.RingMin != gpu.RingMin || h.RingMax != gpu.RingMax {
		t.Errorf("caps %#x rings %d..%d", h.Caps, h.RingMin, h.RingMax)
	}
	if h.MemBudget != testMem || h.MaxContexts != gpu.DefaultMaxContexts || h.MaxAllocs != gpu.DefaultMaxAllocs ||
		h.MaxInflight != gpu.DefaultMaxInflight || h.MaxStreams != gpu.DefaultMaxStreams ||
		h.MaxEvents != gpu.DefaultMaxEvents || h.MaxSGE != gpu.DefaultMaxSGE || h.NumVectors != gpu.DefaultVectors {
		t.Errorf("limits %+v", *h)
	}
	if st := r.g.DevStatus(); st != gpu.DevReady {
		t.Errorf("dev_status %#x before the handshake", st)
	}
	if err := r.g.Handshake(r.ctx); err != nil {
		t.Fatal(err)
	}
	if st := r.g.DevStatus(); st != gpu.DevReady|gpu.DevLive {
		t.Errorf("dev_status %#x after the handshake", st)
	}
	if r.g.IRQs(gpu.IRQCtrl) == 0 && atomic.LoadUint64(&h.Interrupts) == 0 {
		t.Error("no HIGPU_IRQ_CTRL for LIVE")
	}
}

func TestAllocFree(t *testing.T) {
	r := liveRig(t, nil, nil)
	g, ctx := r.g, r.ctx
	c := must[uint16](t)(g.CtxCreate(ctx))
	if c == 0 {
		t.Fatal("context id 0")
	}
	base := gpu.VABase(2)
	a := must[uint64](t)(g.MemAlloc(ctx, c, 1000, 0))
	b := must[uint64](t)(g.MemAlloc(ctx, c, 4000, 4096))
	if a < base || a >= base+testMem || a%gpu.AllocAlgn != 0 || b%4096 != 0 || b < a+1024 {
		t.Errorf("addresses %#x %#x", a, b)
	}
	info := must[gpu.CtxInfo](t)(g.QueryCtx(ctx, c, 0))
	if info.Allocs != 2 || info.MemUsed != 1024+4096 {
		t.Errorf("ctx info %+v", info)
	}
	if err := g.MemFree(ctx, c, a); err != nil {
		t.Fatal(err)
	}
	if st := status(t, g.MemFree(ctx, c, a)); st != gpu.StENOENT {
		t.Errorf("double free: %d", st)
	}
	if st := status(t, g.MemFree(ctx, c, b+256)); st != gpu.StEINVAL {
		t.Errorf("free inside an allocation: %d", st)
	}
	if st := status(t, g.MemFree(ctx, c, 0)); st != gpu.StENOENT {
		t.Errorf("free of 0: %d", st)
	}
	for _, bad := range []gpu.ArgsAlloc{{Size: 0}, {Size: 1, Align: 3}} {
		_, err := g.MemAlloc(ctx, c, bad.Size, bad.Align)
		if st := status(t, err); st != gpu.StEINVAL {
			t.Errorf("alloc %+v: %d", bad, st)
		}
	}
	if _, err := g.MemAlloc(ctx, c, testMem+1, 0); status(t, err) != gpu.StENOMEM {
		t.Errorf("alloc beyond memory: %v", err)
	}
	if err := g.MemFree(ctx, c, b); err != nil {
		t.Fatal(err)
	}
	// Free coalesces: many small allocations freed out of order leave
	// room for one of the whole memory.
	var addrs []uint64
	for range 64 {
		addrs = append(addrs, must[uint64](t)(g.MemAlloc(ctx, c, testMem/64, 0)))
	}
	if _, err := g.MemAlloc(ctx, c, 256, 0); status(t, err) != gpu.StENOMEM {
		t.Errorf("full memory: %v", err)
	}
	for _, i := range []int{5, 3, 4, 0, 63, 1, 2} {
		if err := g.MemFree(ctx, c, addrs[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i, a := range addrs {
		switch i {
		case 5, 3, 4, 0, 63, 1, 2:
			continue
		}
		if err := g.MemFree(ctx, c, a); err != nil {
			t.Fatal(err)
		}
	}
	whole := must[uint64](t)(g.MemAlloc(ctx, c, testMem, 0))
	if whole != base {
		t.Errorf("whole memory at %#x", whole)
	}
	dev := must[gpu.DevInfo](t)(g.QueryDevice(ctx))
	if dev.MemUsed != testMem || dev.MemSize != testMem || dev.MemFreeLargest != 0 || dev.Allocs != 1 || dev.Contexts != 1 {
		t.Errorf("device info %+v", dev)
	}
	if err := g.CtxDestroy(ctx, c); err != nil {
		t.Fatal(err)
	}
	dev = must[gpu.DevInfo](t)(g.QueryDevice(ctx))
	if dev.MemUsed != 0 || dev.Allocs != 0 || dev.Contexts != 0 || dev.MemFreeLargest != testMem {
		t.Errorf("after destroy %+v", dev)
	}
}

// TestServerConfig: GPUs of one guest share its RAM; conflicting or
// invalid configurations are refused before anything listens.
func TestServerConfig(t *testing.T) {
	dir := shortDir(t)
	ram := dir + "/ram"
	ok := func(id int, sock string) gpu.GPUConfig {
		return gpu.GPUConfig{ID: id, Socket: dir + "/" + sock, RAMPath: ram, RAMSize: 16 << 20, MemSize: 1 << 20}
	}
	srv, err := gpu.Start(context.Background(), gpu.Config{GPUs: []gpu.GPUConfig{ok(0, "a"), ok(1, "b")}})
	if err != nil {
		t.Fatal(err)
	}
	st := srv.Status()
	if len(st.GPUs) != 2 || st.GPUs[1].VABase != gpu.VABase(1) || st.GPUs[0].Name != gpu.DefaultName || st.GPUs[0].State != "waiting" {
		t.Errorf("status %+v", st)
	}
	srv.Close()
	for _, tc := range []struct {
		name string
		gpus []gpu.GPUConfig
	}{
		{"none", nil},
		{"same id twice", []gpu.GPUConfig{ok(0, "a"), ok(0, "b")}},
		{"same socket twice", []gpu.GPUConfig{ok(0, "a"), ok(1, "a")}},
		{"id 8", []gpu.GPUConfig{ok(8, "a")}},
		{"RAM of two sizes", []gpu.GPUConfig{ok(0, "a"), func() gpu.GPUConfig { c := ok(1, "b"); c.RAMSize = 32 << 20; return c }()}},
		{"RAM of two machines", []gpu.GPUConfig{func() gpu.GPUConfig { c := ok(0, "a"); c.RAMSize = 4 << 30; return c }(),
			func() gpu.GPUConfig { c := ok(1, "b"); c.RAMSize = 4 << 30; c.Machine = "pc"; return c }()}},
		{"odd memory size", []gpu.GPUConfig{func() gpu.GPUConfig { c := ok(0, "a"); c.MemSize = 1000; return c }()}},
		{"long name", []gpu.GPUConfig{func() gpu.GPUConfig { c := ok(0, "a"); c.Name = string(make([]byte, 32)); return c }()}},
		{"one vector", []gpu.GPUConfig{func() gpu.GPUConfig { c := ok(0, "a"); c.Vectors = 1; return c }()}},
		{"no RAM", []gpu.GPUConfig{func() gpu.GPUConfig { c := ok(0, "a"); c.RAMPath = ""; return c }()}},
	} {
		if srv, err := gpu.Start(context.Background(), gpu.Config{GPUs: tc.gpus}); err == nil {
			srv.Close()
			t.Errorf("%s: accepted", tc.name)
		}
	}
}
