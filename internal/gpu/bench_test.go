package gpu_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/gpu"
)

// BenchmarkCopy measures the copy engines through the whole path (ring,
// doorbell, stream goroutine, completion, interrupt), pipelined 16 deep
// on one stream, and reports the throughput as a ratio of a plain
// memmove of the same size measured in the same run
// (ratio_vs_memmove; 1 is the ceiling).
func BenchmarkCopy(b *testing.B) {
	for _, op := range []struct {
		name string
		op   uint16
	}{{"h2d", gpu.OpCopyH2D}, {"d2h", gpu.OpCopyD2H}, {"d2d", gpu.OpCopyD2D}} {
		for _, size := range []uint64{4 << 10, 64 << 10, 1 << 20, 4 << 20} {
			b.Run(fmt.Sprintf("op=%s/size=%d", op.name, size), func(b *testing.B) { benchCopy(b, op.op, size) })
		}
	}
}

func benchCopy(b *testing.B, op uint16, size uint64) {
	r := liveRig(b, func(c *gpu.GPUConfig) { c.MemSize = 16 << 20 }, nil)
	g, ctx := r.g, r.ctx
	c := must[uint16](b)(g.CtxCreate(ctx))
	d0 := must[uint64](b)(g.MemAlloc(ctx, c, size, 0))
	d1 := must[uint64](b)(g.MemAlloc(ctx, c, size, 0))
	h := must[uint64](b)(g.Alloc(size, 4096))
	a := gpu.ArgsCopy{Len: size}
	switch op {
	case gpu.OpCopyH2D:
		a.Dst, a.Src = d0, h
	case gpu.OpCopyD2H:
		a.Dst, a.Src = h, d0
	default:
		a.Dst, a.Src = d1, d0
	}
	// The ceiling: memmove between two host buffers of the size.
	src, dst := make([]byte, size), make([]byte, size)
	t0 := time.Now()
	for range b.N {
		copy(dst, src)
	}
	ceiling := time.Since(t0)

	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	const depth = 16
	for i := 0; i < b.N; {
		n := min(depth, b.N-i)
		cmds := make([]gpu.Cmd, n)
		for k := range cmds {
			cmds[k] = gpu.NewCmd(op, c, 0, g.Tag(), a)
			if k < n-1 {
				cmds[k].Flags = gpu.CmdFNoIRQ
			}
		}
		if err := g.Post(ctx, cmds...); err != nil {
			b.Fatal(err)
		}
		// One stream runs in order: the last completion is the batch's.
		for _, cmd := range cmds {
			if cpl, err := g.Wait(ctx, cmd.Tag); err != nil || cpl.Status != gpu.StOK {
				b.Fatalf("%+v %v", cpl, err)
			}
		}
		i += n
	}
	b.StopTimer()
	if el := b.Elapsed(); el > 0 {
		b.ReportMetric(float64(ceiling)/float64(el), "ratio_vs_memmove")
	}
}
