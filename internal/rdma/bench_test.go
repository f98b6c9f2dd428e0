package rdma_test

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/PacketFive/hinic/internal/rdma"
)

// roundTrip posts one request (and its receive) and spins until it has
// completed on both sides. It allocates nothing itself.
type roundTrip struct {
	p    *pair
	op   rdma.WROpcode
	send []rdma.SendWR
	recv []rdma.RecvWR
	wcs  []rdma.WC
}

func newRoundTrip(p *pair, op rdma.WROpcode, size int) *roundTrip {
	return &roundTrip{
		p: p, op: op,
		send: []rdma.SendWR{{Opcode: op, SendFlags: rdma.SendSignaled, SGList: p.a.sge(0, uint32(size)),
			RemoteAddr: 1 << 20, RKey: p.b.mr.RKey}},
		recv: []rdma.RecvWR{{SGList: p.b.sge(1<<20, uint32(size))}},
		wcs:  make([]rdma.WC, 1),
	}
}

func (r *roundTrip) needRecv() bool {
	return r.op == rdma.WRSend || r.op == rdma.WRSendWithImm || r.op == rdma.WRRDMAWriteWithImm
}

func (r *roundTrip) run(tb testing.TB) {
	if r.needRecv() {
		if err := r.p.qb.PostRecv(r.recv); err != nil {
			tb.Fatal(err)
		}
	}
	if err := r.p.qa.PostSend(r.send); err != nil {
		tb.Fatal(err)
	}
	r.wait(tb, r.p.a.scq)
	if r.needRecv() {
		r.wait(tb, r.p.b.rcq)
	}
}

func (r *roundTrip) wait(tb testing.TB, cq *rdma.CQ) {
	for cq.Poll(r.wcs) == 0 {
		runtime.Gosched()
	}
	if r.wcs[0].Status != rdma.WCSuccess {
		tb.Fatalf("completion %+v", r.wcs[0])
	}
}

// TestZeroAllocDataPath asserts that the steady-state data path allocates
// nothing: PostSend/PostRecv, the requester building frames, the wire,
// Deliver, the responder placing data and ACKing, the completer and Poll,
// for every operation, at 4 KiB messages over 1 KiB packets (so segmentation
// and ACK coalescing are on the path). testing.AllocsPerRun counts the
// allocations of all goroutines, engines included.
func TestZeroAllocDataPath(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, op := range []rdma.WROpcode{rdma.WRSend, rdma.WRSendWithImm, rdma.WRRDMAWrite, rdma.WRRDMAWriteWithImm, rdma.WRRDMARead} {
		t.Run(op.String(), func(t *testing.T) {
			p := newPair(t, pairOpts{mtu: 1024, memSize: 4 << 20})
			r := newRoundTrip(p, op, 4096)
			for range 200 { // warm up the buffer pools
				r.run(t)
			}
			if n := testing.AllocsPerRun(500, func() { r.run(t) }); n != 0 {
				t.Fatalf("%v allocations per round trip", n)
			}
		})
	}
}

// benchPair is a pair on the real clock at MTU 4096, the setting of the
// bandwidth figures.
func benchPair(b *testing.B) *pair {
	return newPair(b, pairOpts{mtu: 4096, realClock: true, memSize: 8 << 20, sendWR: 128, recvWR: 128, cqe: 512})
}

var benchSizes = []int{64, 4096, 65536}

// streamOps keeps depth requests of size bytes in flight for b.N requests:
// the bandwidth of one QP between two devices over an in-memory wire.
func streamOps(b *testing.B, op rdma.WROpcode, size int) {
	p := benchPair(b)
	const depth = 64
	recv := op == rdma.WRSend
	swr := []rdma.SendWR{{Opcode: op, SendFlags: rdma.SendSignaled, SGList: p.a.sge(0, uint32(size)),
		RemoteAddr: 4 << 20, RKey: p.b.mr.RKey}}
	rwr := []rdma.RecvWR{{SGList: p.b.sge(4<<20, uint32(size))}}
	wcs := make([]rdma.WC, 64)
	if recv {
		for range depth {
			if err := p.qb.PostRecv(rwr); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	posted, done := 0, 0
	for done < b.N {
		for posted < b.N && posted-done < depth {
			if err := p.qa.PostSend(swr); err != nil {
				b.Fatal(err)
			}
			posted++
		}
		n := p.a.scq.Poll(wcs)
		for _, wc := range wcs[:n] {
			if wc.Status != rdma.WCSuccess {
				b.Fatalf("completion %+v", wc)
			}
		}
		done += n
		if recv {
			k := p.b.rcq.Poll(wcs)
			for range k {
				if err := p.qb.PostRecv(rwr); err != nil {
					b.Fatal(err)
				}
			}
			n += k
		}
		if n == 0 {
			runtime.Gosched()
		}
	}
	b.StopTimer()
	c := p.a.dev.Counters()
	if c.Retransmits != 0 || c.RxDropped != 0 || p.b.dev.Counters().RxDropped != 0 {
		b.Logf("retransmits %d, receive drops %d/%d", c.Retransmits, c.RxDropped, p.b.dev.Counters().RxDropped)
	}
}

// BenchmarkWrite measures RDMA WRITE bandwidth between two devices.
func BenchmarkWrite(b *testing.B) {
	for _, size := range benchSizes {
		b.Run("size="+strconv.Itoa(size), func(b *testing.B) { streamOps(b, rdma.WRRDMAWrite, size) })
	}
}

// BenchmarkSend measures SEND bandwidth between two devices (receives are
// reposted as they complete).
func BenchmarkSend(b *testing.B) {
	for _, size := range benchSizes {
		b.Run("size="+strconv.Itoa(size), func(b *testing.B) { streamOps(b, rdma.WRSend, size) })
	}
}

// BenchmarkRead measures RDMA READ bandwidth (64 outstanding READs, the
// posting depth, under max_rd_atomic 128).
func BenchmarkRead(b *testing.B) {
	for _, size := range benchSizes {
		b.Run("size="+strconv.Itoa(size), func(b *testing.B) { streamOps(b, rdma.WRRDMARead, size) })
	}
}

// BenchmarkMemcpy is the ceiling for the benchmarks above: copying the same
// bytes once from one buffer to another. The engine copies each byte at
// least four times (into the frame, into the receive queue, into memory,
// plus the wire's copy in a real fabric) and CRCs it twice.
func BenchmarkMemcpy(b *testing.B) {
	for _, size := range benchSizes {
		b.Run("size="+strconv.Itoa(size), func(b *testing.B) {
			src, dst := make([]byte, size), make([]byte, size)
			fill(src, 1)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				copy(dst, src)
			}
		})
	}
}

// BenchmarkRoundTrip is the latency of one signaled WRITE of 64 bytes
// (post to completion) between two devices.
func BenchmarkRoundTrip(b *testing.B) {
	p := benchPair(b)
	r := newRoundTrip(p, rdma.WRRDMAWrite, 64)
	b.ReportAllocs()
	for b.Loop() {
		r.run(b)
	}
}
