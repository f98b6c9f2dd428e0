package gpu_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/PacketFive/hinic/internal/gpu"
	"github.com/PacketFive/hinic/internal/gpu/gpusim"
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

	runBatches(b, g, ctx, int64(size), 16, ceiling, "ratio_vs_memmove", func(k, n int) gpu.Cmd {
		cmd := gpu.NewCmd(op, c, 0, g.Tag(), a)
		if k < n-1 {
			cmd.Flags = gpu.CmdFNoIRQ // one stream runs in order: the last completion is the batch's
		}
		return cmd
	})
}

// runBatches runs b.N commands of size bytes, depth at a time (mk makes
// the k-th of n), each checked, and reports the throughput against the
// ceiling's time for the same bytes as metric.
func runBatches(b *testing.B, g *gpusim.Guest, ctx context.Context, size int64, depth int, ceiling time.Duration,
	metric string, mk func(k, n int) gpu.Cmd) {
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; {
		n := min(depth, b.N-i)
		cmds := make([]gpu.Cmd, n)
		for k := range cmds {
			cmds[k] = mk(k, n)
		}
		if err := g.Post(ctx, cmds...); err != nil {
			b.Fatal(err)
		}
		for _, cmd := range cmds {
			if cpl, err := g.Wait(ctx, cmd.Tag); err != nil || cpl.Status != gpu.StOK {
				b.Fatalf("%+v %v", cpl, err)
			}
		}
		i += n
	}
	b.StopTimer()
	if el := b.Elapsed(); el > 0 {
		b.ReportMetric(float64(ceiling)/float64(el), metric)
	}
}

// BenchmarkPeerCopy measures COPY_PEER through the whole path (ring,
// stream goroutine, HiLink endpoint, switch, the peer's link goroutines,
// its memory, the answer back) between two backends, four streams deep,
// for a remote write (push) and a remote read (pull). The ceiling,
// measured in the same run, is the raw link: the same bytes in frames of
// the same size over one SOCK_SEQPACKET socket pair, from one goroutine
// to another, with no switch and no device (ratio_vs_raw_link).
func BenchmarkPeerCopy(b *testing.B) {
	for _, dir := range []string{"push", "pull"} {
		for _, size := range []uint64{64 << 10, 1 << 20, 4 << 20} {
			b.Run(fmt.Sprintf("op=%s/size=%d", dir, size), func(b *testing.B) { benchPeer(b, dir == "push", size) })
		}
	}
}

func benchPeer(b *testing.B, push bool, size uint64) {
	r := newPeerRigTB(b, nil)
	r.enable(b, 0)
	r.enable(b, 1)
	g, ctx := r.g[0], r.ctx
	local := must[uint64](b)(g.MemAlloc(ctx, r.ctxs[0], size, 0))
	remote := must[uint64](b)(r.g[1].MemAlloc(ctx, r.ctxs[1], size, 0))
	a := gpu.ArgsCopy{Dst: remote, Src: local, Len: size}
	if !push {
		a.Dst, a.Src = local, remote
	}
	ceiling := rawLink(b, int(size)*b.N)

	runBatches(b, g, ctx, int64(size), 4, ceiling, "ratio_vs_raw_link", func(k, _ int) gpu.Cmd {
		return gpu.NewCmd(gpu.OpCopyPeer, r.ctxs[0], uint16(k), g.Tag(), a) // four streams
	})
}

// rawLink returns the time to move n bytes in HiLink-sized frames (64 KiB
// of payload and a header) over a SOCK_SEQPACKET socket pair.
func rawLink(b *testing.B, n int) time.Duration {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	for _, fd := range fds {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 1<<20)
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
	}
	const frame = 24 + 64<<10
	frames := (n + frame - 25) / (frame - 24)
	t0 := time.Now()
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, frame)
		for range frames {
			if _, err := unix.Read(fds[1], buf); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	buf := make([]byte, frame)
	for range frames {
		if _, err := unix.Write(fds[0], buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}
