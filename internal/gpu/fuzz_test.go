package gpu_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"
	"unsafe"

	"github.com/PacketFive/hinic/internal/gpu"
)

func cmdBytes(cmds ...gpu.Cmd) []byte {
	var b []byte
	for i := range cmds {
		b = append(b, unsafe.Slice((*byte)(unsafe.Pointer(&cmds[i])), 64)...)
	}
	return b
}

// FuzzGPUCommands feeds command-ring contents to the backend through a
// simulated guest. Each run starts from a reset device with context 1
// holding two allocations (at VABase(2) and VABase(2)+4096) and guest
// memory at 1 MiB. Properties: no panic, the device stays live (no
// command is fatal; only indices are), every command taken gets
// exactly one completion, and destroying the contexts ends every wait.
func FuzzGPUCommands(f *testing.F) {
	base := gpu.VABase(2)
	const host = 1 << 20
	seeds := [][]gpu.Cmd{
		// The ordinary life of a context.
		{gpu.NewCmd(gpu.OpCopyH2D, 1, 0, 0, gpu.ArgsCopy{Dst: base, Src: host, Len: 4096}),
			gpu.NewCmd(gpu.OpLaunch, 1, 0, 0, gpu.ArgsLaunch{Kernel: gpu.KernelReduce, DType: gpu.DTF16, Op: gpu.RedSum, Count: 2048, Dst: base + 4096, Src0: base, Src1: base}),
			gpu.NewCmd(gpu.OpEventRecord, 1, 0, 0, gpu.ArgsEvent{EventID: 3}),
			gpu.NewCmd(gpu.OpEventWait, 1, 1, 0, gpu.ArgsEvent{EventID: 3, Count: 1}),
			gpu.NewCmd(gpu.OpCopyD2H, 1, 1, 0, gpu.ArgsCopy{Dst: host, Src: base + 4096, Len: 4096})},
		// Allocation churn and queries.
		{gpu.NewCmd(gpu.OpMemAlloc, 1, 0, 0, gpu.ArgsAlloc{Size: 1000, Align: 1 << 16}),
			gpu.NewCmd(gpu.OpMemFree, 1, 0, 0, gpu.ArgsFree{Addr: base}),
			gpu.NewCmd(gpu.OpMemset, 1, 2, 0, gpu.ArgsMemset{Dst: base, Len: 16, Value: 1}),
			gpu.NewCmd(gpu.OpQuery, 1, 0, 0, gpu.ArgsQuery{What: gpu.QueryCtx, Flags: gpu.QueryFClearErr, RespGPA: host, RespLen: 48}),
			gpu.NewCmd(gpu.OpQuery, 0, 0, 0, gpu.ArgsQuery{What: gpu.QueryDevice, RespGPA: host, RespLen: 80})},
		// Scatter lists, D2D, fills.
		{gpu.NewCmd(gpu.OpCopyH2D, 1, 0, 0, gpu.ArgsCopy{Dst: base, Src: host, Len: 32, SGCount: 2}),
			gpu.NewCmd(gpu.OpCopyD2D, 1, 0, 0, gpu.ArgsCopy{Dst: base + 1, Src: base, Len: 4000}),
			gpu.NewCmd(gpu.OpLaunch, 1, 3, 0, gpu.ArgsLaunch{Kernel: gpu.KernelFill, DType: gpu.DTI64, Count: 512, Dst: base + 4096, Value: 7})},
		// Contexts made and destroyed, a wait that only the destroy ends.
		{{Opcode: gpu.OpCtxCreate}, gpu.NewCmd(gpu.OpEventWait, 2, 0, 0, gpu.ArgsEvent{EventID: 0, Count: 9}),
			{Opcode: gpu.OpCtxDestroy, CtxID: 2}, {Opcode: gpu.OpNop, CtxID: 2}},
		// Nonsense.
		{{Opcode: 0xffff, Flags: 0xffff, CtxID: 0xffff, StreamID: 0xffff}, {Opcode: gpu.OpLaunch, CtxID: 1}},
	}
	for _, s := range seeds {
		f.Add(cmdBytes(s...))
	}
	r := newRig(f, func(c *gpu.GPUConfig) { c.MemSize = 1 << 20; c.MaxContexts = 4; c.MaxSGE = 8 }, nil)
	g := r.g
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if g.DevStatus() != gpu.DevReady {
			if err := g.Reset(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := g.Handshake(ctx); err != nil {
			t.Fatal(err)
		}
		c := must[uint16](t)(g.CtxCreate(ctx))
		must[uint64](t)(g.MemAlloc(ctx, c, 4096, 0))
		must[uint64](t)(g.MemAlloc(ctx, c, 4096, 0))
		if c != 1 {
			t.Fatalf("context %d", c)
		}
		// Guest memory at host: a scatter list of two entries.
		sgl := g.Mem(host, 32)
		binary.LittleEndian.PutUint64(sgl, host+64)
		binary.LittleEndian.PutUint64(sgl[8:], 16)
		binary.LittleEndian.PutUint64(sgl[16:], host+128)
		binary.LittleEndian.PutUint64(sgl[24:], 16)
		var cmds []gpu.Cmd
		for len(data) >= 64 && len(cmds) < 48 {
			var c gpu.Cmd
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&c)), 64), data[:64])
			c.Tag = g.Tag()
			cmds = append(cmds, c)
			data = data[64:]
		}
		for id := uint16(1); id <= 4; id++ {
			cmds = append(cmds, gpu.Cmd{Opcode: gpu.OpCtxDestroy, CtxID: id, Tag: g.Tag()})
		}
		start := len(g.Order())
		if err := g.Post(ctx, cmds...); err != nil {
			t.Fatal(err)
		}
		for _, c := range cmds {
			cpl, err := g.Wait(ctx, c.Tag)
			if err != nil {
				t.Fatalf("command %+v: %v", c, err)
			}
			if cpl.Opcode != c.Opcode || cpl.StreamID != c.StreamID {
				t.Fatalf("completion %+v of %+v", cpl, c)
			}
		}
		order := g.Order()[start:]
		seen := map[uint64]int{}
		for _, tag := range order {
			seen[tag]++
		}
		if len(order) != len(cmds) || len(seen) != len(cmds) {
			t.Fatalf("%d completions of %d distinct tags for %d commands", len(order), len(seen), len(cmds))
		}
		if st := g.DevStatus(); st != gpu.DevReady|gpu.DevLive {
			t.Fatalf("dev_status %#x", st)
		}
		if err := g.Reset(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
