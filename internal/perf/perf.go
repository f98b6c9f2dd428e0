// Package perf holds HiNIC's RDMA workloads: the equivalents of
// ibv_rc_pingpong and of perftest's ib_send_bw, ib_write_bw, ib_read_bw,
// ib_send_lat, ib_write_lat and ib_read_lat, run between two hosts of an
// embedded rack through the Go verbs API, each checking every byte it moves;
// and the raw ceiling those figures are compared with. The e2e gate
// (internal/verify) and `hinic bench rdma` both run them.
package perf

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"
	"time"

	"github.com/PacketFive/hinic/internal/rack"
	"github.com/PacketFive/hinic/internal/rdma"
)

// Result is what a workload measured. Figure and Unit are its headline
// (µs per iteration, MiB/s, or the typical latency in µs); the other fields
// hold the numbers behind it.
type Result struct {
	Figure float64
	Unit   string
	Detail string

	Size    int           // message size, bytes
	Iters   int           // messages or round trips
	Elapsed time.Duration // bandwidth: first post to last completion

	// Latencies, in µs (halved round trips for SEND and WRITE).
	Typical, Avg, P99, Max float64
}

// MiBps is the bandwidth of a bandwidth result.
func (r Result) MiBps() float64 { return mibps(r.Size*r.Iters, r.Elapsed) }

// slots is how many message buffers each side of a bandwidth case cycles
// through; a slot is reused only after its completion was checked.
const slots = 64

// pair is a connected QP pair with pollers, closed with close.
type pair struct {
	c, s       *rack.Endpoint // client (initiator) and server
	cSend, cRx *rack.Poller
	sSend, sRx *rack.Poller
}

func connect(a, b *rack.Host, bufSize int) (*pair, error) {
	return connectOpts(a, b, rack.RCOptions{BufSize: uint64(bufSize), Events: true, SendDepth: 128, RecvDepth: 512 + 8})
}

// stallTimeout is the local ACK timeout of the workloads' QPs: code 17,
// 0.54 s, so 7 retries span about 3.8 s. The embedded rack loses
// nothing, so a retransmission only follows a stall of this process (the
// race detector, or a loaded 2-core host, can hold a 64 KiB WRITE window
// for longer than the usual 67 ms); resending the window then only adds
// load, and running out of retries fails a case that would pass.
const stallTimeout = 17

func connectOpts(a, b *rack.Host, o rack.RCOptions) (*pair, error) {
	if o.Timeout == 0 {
		o.Timeout = stallTimeout
	}
	c, s, err := rack.ConnectRC(a, b, o)
	if err != nil {
		return nil, err
	}
	return &pair{c: c, s: s,
		cSend: rack.NewPoller(c.SendCQ, c.SendEvents), cRx: rack.NewPoller(c.RecvCQ, c.RecvEvents),
		sSend: rack.NewPoller(s.SendCQ, s.SendEvents), sRx: rack.NewPoller(s.RecvCQ, s.RecvEvents)}, nil
}

func (p *pair) close() { p.c.Close(); p.s.Close() }

// slotSGEs returns the scatter/gather list of each of e's slots of size
// bytes, made once so that posting a work request allocates nothing (as
// perftest builds its lists before it measures).
func slotSGEs(e *rack.Endpoint, size int) [][]rdma.SGE {
	l := make([][]rdma.SGE, slots)
	for i := range l {
		l[i] = sge(e, i*size, size)
	}
	return l
}

func sge(e *rack.Endpoint, off, n int) []rdma.SGE {
	return []rdma.SGE{{Addr: e.Buf + uint64(off), Length: uint32(n), LKey: e.MR.LKey}}
}

// fillSlots writes the pattern of slot i (seed i) into every slot of e.
func fillSlots(e *rack.Endpoint, size int) error {
	buf := make([]byte, size)
	for i := range slots {
		fillPattern(buf, uint64(i))
		if err := e.Host.Memory.WriteAt(buf, e.Buf+uint64(i*size)); err != nil {
			return err
		}
	}
	return nil
}

// checkSlot compares slot i of e with the pattern seeded by seed.
func checkSlot(e *rack.Endpoint, size, slot int, seed uint64, want []uint32, scratch []byte) error {
	if err := e.Host.Memory.ReadAt(scratch[:size], e.Buf+uint64(slot*size)); err != nil {
		return err
	}
	if got := crc32.ChecksumIEEE(scratch[:size]); got != want[seed] {
		return fmt.Errorf("data check failed: %s slot %d holds crc %08x, want %08x", e.Host.Name, slot, got, want[seed])
	}
	return nil
}

func slotCRCs(size int) []uint32 {
	crcs := make([]uint32, slots)
	for i := range crcs {
		crcs[i] = patternCRC(size, uint64(i))
	}
	return crcs
}

func mibps(bytes int, d time.Duration) float64 { return float64(bytes) / d.Seconds() / (1 << 20) }

// run2 runs the server and client functions concurrently, as the two
// processes of a perftest run. When one fails the other is cancelled, and
// the error returned is the one that came first (not the other side's
// cancellation).
func run2(ctx context.Context, server, client func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		first error
	)
	fail := func(side string, err error) {
		mu.Lock()
		if first == nil {
			first = fmt.Errorf("%s: %w", side, err)
		}
		mu.Unlock()
		cancel()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := server(ctx); err != nil {
			fail("server", err)
		}
	}()
	if err := client(ctx); err != nil {
		fail("client", err)
	}
	<-done
	return first
}

// PingPong is ibv_rc_pingpong: the client sends size bytes, the server
// checks them and sends them back, the client checks the echo; iters round
// trips. The figure is µs per iteration, as the tool prints.
func PingPong(ctx context.Context, a, b *rack.Host, size, iters int) (Result, error) {
	return pingPong(ctx, a, b, size, iters, false)
}

// UCPingPong is ibv_uc_pingpong: PingPong over UC QPs. Each side reposts
// its receive before the peer can send again, so on the lossless class
// no message is dropped; a lost one would stop the run at the poller's
// timeout rather than pass.
func UCPingPong(ctx context.Context, a, b *rack.Host, size, iters int) (Result, error) {
	return pingPong(ctx, a, b, size, iters, true)
}

func pingPong(ctx context.Context, a, b *rack.Host, size, iters int, uc bool) (Result, error) {
	p, err := connectOpts(a, b, rack.RCOptions{BufSize: uint64(2 * size), Events: true, SendDepth: 128,
		RecvDepth: slots + 8, UC: uc})
	if err != nil {
		return Result{}, err
	}
	defer p.close()
	crcs := make([]uint32, iters)
	for i := range crcs {
		crcs[i] = patternCRC(size, uint64(i))
	}
	if err := p.s.QP.PostRecv([]rdma.RecvWR{{WRID: 0, SGList: sge(p.s, 0, size)}}); err != nil {
		return Result{}, err
	}
	if err := p.c.QP.PostRecv([]rdma.RecvWR{{WRID: 0, SGList: sge(p.c, size, size)}}); err != nil {
		return Result{}, err
	}
	var elapsed time.Duration
	err = run2(ctx, func(ctx context.Context) error {
		scratch := make([]byte, size)
		for i := range iters {
			if _, err := p.sRx.Next(ctx); err != nil {
				return err
			}
			if err := p.s.Host.Memory.ReadAt(scratch, p.s.Buf); err != nil {
				return err
			}
			if crc32.ChecksumIEEE(scratch) != crcs[i] {
				return fmt.Errorf("iteration %d: received data differs from what was sent", i)
			}
			if i+1 < iters {
				if err := p.s.QP.PostRecv([]rdma.RecvWR{{WRID: uint64(i + 1), SGList: sge(p.s, 0, size)}}); err != nil {
					return err
				}
			}
			if err := p.s.QP.PostSend([]rdma.SendWR{{WRID: uint64(i), Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled, SGList: sge(p.s, 0, size)}}); err != nil {
				return err
			}
			if _, err := p.sSend.Next(ctx); err != nil {
				return err
			}
		}
		return nil
	}, func(ctx context.Context) error {
		buf := make([]byte, size)
		start := time.Now()
		for i := range iters {
			fillPattern(buf, uint64(i))
			if err := p.c.Host.Memory.WriteAt(buf, p.c.Buf); err != nil {
				return err
			}
			if err := p.c.QP.PostSend([]rdma.SendWR{{WRID: uint64(i), Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled, SGList: sge(p.c, 0, size)}}); err != nil {
				return err
			}
			if _, err := p.cSend.Next(ctx); err != nil {
				return err
			}
			if _, err := p.cRx.Next(ctx); err != nil {
				return err
			}
			if err := p.c.Host.Memory.ReadAt(buf, p.c.Buf+uint64(size)); err != nil {
				return err
			}
			if crc32.ChecksumIEEE(buf) != crcs[i] {
				return fmt.Errorf("iteration %d: echo differs from what was sent", i)
			}
			if i+1 < iters {
				if err := p.c.QP.PostRecv([]rdma.RecvWR{{WRID: uint64(i + 1), SGList: sge(p.c, size, size)}}); err != nil {
					return err
				}
			}
		}
		elapsed = time.Since(start)
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	usec := float64(elapsed.Microseconds()) / float64(iters)
	return Result{Figure: usec, Unit: "us/iter", Size: size, Iters: iters, Elapsed: elapsed,
		Detail: fmt.Sprintf("%d iters of %d B over %s, %.1f Mbit/s, every byte checked both ways", iters, size, map[bool]string{false: "RC", true: "UC"}[uc],
			float64(2*size*iters*8)/elapsed.Seconds()/1e6)}, nil
}

// recvDepth is how many receives ib_send_bw's server keeps posted, each
// on a buffer of its own: perftest's rx_depth (512), as far as the
// hosts' free memory holds them, and never fewer than slots. The sender
// keeps a quarter of them in flight (perftest: tx_depth 128), at most
// sendBWDepth, so its figure is the link's, not the RNR timer's: the
// server's reposting may lag the sender by the rest.
func recvDepth(a, b *rack.Host, size, iters int) int {
	room := int(min(a.Available(), b.Available()) / 2 / uint64(size))
	return max(slots, min(512, room, iters))
}

// sendBWDepth is the most SENDs ib_send_bw keeps in flight.
const sendBWDepth = 128

// SendBW is ib_send_bw: iters SENDs of size bytes with up to a quarter of
// recvDepth in flight, from the client's slots; the server checks each
// message in its own receive buffer against the pattern of the slot it
// came from before reposting the receive. The figure is MiB/s at the
// sender.
func SendBW(ctx context.Context, a, b *rack.Host, size, iters int) (Result, error) {
	depth := recvDepth(a, b, size, iters)
	p, crcs, err := bwPairBuf(a, b, size, depth*size, true)
	if err != nil {
		return Result{}, err
	}
	defer p.close()
	var recvs []rdma.RecvWR
	for i := range min(depth, iters) {
		recvs = append(recvs, rdma.RecvWR{WRID: uint64(i), SGList: sge(p.s, i*size, size)})
	}
	if err := p.s.QP.PostRecv(recvs); err != nil {
		return Result{}, err
	}
	var elapsed time.Duration
	err = run2(ctx, func(ctx context.Context) error {
		scratch := make([]byte, size)
		for i := range iters {
			wc, err := p.sRx.Next(ctx)
			if err != nil {
				return err
			}
			if int(wc.WRID) != i || wc.ByteLen != uint32(size) {
				return fmt.Errorf("message %d: completion for WR %d with %d bytes (out of order or short)", i, wc.WRID, wc.ByteLen)
			}
			buf := i % depth
			if err := checkSlot(p.s, size, buf, uint64(i%slots), crcs, scratch); err != nil {
				return fmt.Errorf("message %d: %w", i, err)
			}
			if next := i + depth; next < iters {
				if err := p.s.QP.PostRecv([]rdma.RecvWR{{WRID: uint64(next), SGList: sge(p.s, buf*size, size)}}); err != nil {
					return err
				}
			}
		}
		return nil
	}, func(ctx context.Context) error {
		sgl := slotSGEs(p.c, size)
		return stream(ctx, p.c, p.cSend, iters, min(sendBWDepth, depth/4), &elapsed, func(i int) rdma.SendWR {
			return rdma.SendWR{Opcode: rdma.WRSend, SGList: sgl[i%slots]}
		})
	})
	if err != nil {
		return Result{}, err
	}
	return bwResult(size, iters, elapsed, "every message checked at the receiver"), nil
}

// bwPair connects a pair for a bandwidth workload with slots buffers of
// size bytes on each side, fills the data side's (the client's, or the
// server's for READs) with the slot patterns, and returns their CRCs.
func bwPair(a, b *rack.Host, size int, clientHoldsData bool) (*pair, []uint32, error) {
	return bwPairBuf(a, b, size, slots*size, clientHoldsData)
}

// bwPairBuf is bwPair with buffers of bufSize (at least slots*size)
// bytes.
func bwPairBuf(a, b *rack.Host, size, bufSize int, clientHoldsData bool) (*pair, []uint32, error) {
	p, err := connect(a, b, bufSize)
	if err != nil {
		return nil, nil, err
	}
	data := p.c
	if !clientHoldsData {
		data = p.s
	}
	if err := fillSlots(data, size); err != nil {
		p.close()
		return nil, nil, err
	}
	return p, slotCRCs(size), nil
}

// stream posts iters work requests built by wr with at most depth in
// flight, every one signaled, and waits for all completions, calling check
// (when given) with each completed request's index; elapsed is set from
// the first post to the last completion, as perftest measures.
func stream(ctx context.Context, e *rack.Endpoint, cq *rack.Poller, iters, depth int, elapsed *time.Duration,
	wr func(i int) rdma.SendWR, check ...func(i int) error) error {
	start := time.Now()
	posted, done := 0, 0
	one := make([]rdma.SendWR, 1)
	for done < iters {
		for posted < iters && posted-done < depth {
			w := &one[0]
			*w = wr(posted)
			w.WRID, w.SendFlags = uint64(posted), w.SendFlags|rdma.SendSignaled
			if err := e.QP.PostSend(one); err != nil {
				return err
			}
			posted++
		}
		wc, err := cq.Next(ctx)
		if err != nil {
			return err
		}
		if int(wc.WRID) != done {
			return fmt.Errorf("completion for WR %d, expected %d (out of order)", wc.WRID, done)
		}
		for _, c := range check {
			if err := c(done); err != nil {
				return err
			}
		}
		done++
	}
	*elapsed = time.Since(start)
	return nil
}

func bwResult(size, iters int, d time.Duration, what string) Result {
	bw := mibps(size*iters, d)
	return Result{Figure: bw, Unit: "MiB/s", Size: size, Iters: iters, Elapsed: d,
		Detail: fmt.Sprintf("%d x %d B in %v (%.2f Gbit/s); %s", iters, size, d.Round(time.Millisecond), bw*(1<<20)*8/1e9, what)}
}

// WriteBW is ib_write_bw: iters RDMA WRITEs into the server's slots, then a
// WRITE with immediate tells the server to check every slot.
func WriteBW(ctx context.Context, a, b *rack.Host, size, iters int) (Result, error) {
	p, crcs, err := bwPair(a, b, size, true)
	if err != nil {
		return Result{}, err
	}
	defer p.close()
	if err := p.s.QP.PostRecv([]rdma.RecvWR{{WRID: 1}}); err != nil {
		return Result{}, err
	}
	var elapsed time.Duration
	err = run2(ctx, func(ctx context.Context) error {
		wc, err := p.sRx.Next(ctx)
		if err != nil {
			return err
		}
		if wc.Opcode != rdma.WCRecvRDMAWithImm || wc.ImmData != uint32(iters) {
			return fmt.Errorf("final notice: %v imm %d, want RECV_RDMA_WITH_IMM %d", wc.Opcode, wc.ImmData, iters)
		}
		scratch := make([]byte, size)
		for slot := range min(slots, iters) {
			if err := checkSlot(p.s, size, slot, uint64(slot), crcs, scratch); err != nil {
				return err
			}
		}
		return nil
	}, func(ctx context.Context) error {
		sgl := slotSGEs(p.c, size)
		if err := stream(ctx, p.c, p.cSend, iters, 128, &elapsed, func(i int) rdma.SendWR {
			slot := i % slots
			return rdma.SendWR{Opcode: rdma.WRRDMAWrite, SGList: sgl[slot],
				RemoteAddr: p.c.RemoteBuf + uint64(slot*size), RKey: p.c.RemoteRKey}
		}); err != nil {
			return err
		}
		var d time.Duration
		return stream(ctx, p.c, p.cSend, 1, 1, &d, func(int) rdma.SendWR {
			return rdma.SendWR{Opcode: rdma.WRRDMAWriteWithImm, ImmData: uint32(iters), SGList: sge(p.c, 0, 1),
				RemoteAddr: p.c.RemoteBuf, RKey: p.c.RemoteRKey}
		})
	})
	if err != nil {
		return Result{}, err
	}
	return bwResult(size, iters, elapsed, "every slot checked at the target"), nil
}

// ReadBW is ib_read_bw: iters RDMA READs of the server's slots; the client
// checks each read's data before reusing its buffer.
func ReadBW(ctx context.Context, a, b *rack.Host, size, iters int) (Result, error) {
	p, crcs, err := bwPair(a, b, size, false)
	if err != nil {
		return Result{}, err
	}
	defer p.close()
	scratch := make([]byte, size)
	sgl := slotSGEs(p.c, size)
	wr := make([]rdma.SendWR, 1)
	var elapsed time.Duration
	start := time.Now()
	posted, done := 0, 0
	for done < iters {
		for posted < iters && posted-done < slots {
			slot := posted % slots
			wr[0] = rdma.SendWR{WRID: uint64(posted), Opcode: rdma.WRRDMARead, SendFlags: rdma.SendSignaled,
				SGList: sgl[slot], RemoteAddr: p.c.RemoteBuf + uint64(slot*size), RKey: p.c.RemoteRKey}
			if err := p.c.QP.PostSend(wr); err != nil {
				return Result{}, err
			}
			posted++
		}
		wc, err := p.cSend.Next(ctx)
		if err != nil {
			return Result{}, err
		}
		if int(wc.WRID) != done {
			return Result{}, fmt.Errorf("completion for READ %d, expected %d", wc.WRID, done)
		}
		slot := done % slots
		if err := checkSlot(p.c, size, slot, uint64(slot), crcs, scratch); err != nil {
			return Result{}, fmt.Errorf("READ %d: %w", done, err)
		}
		done++
	}
	elapsed = time.Since(start)
	return bwResult(size, iters, elapsed, "every READ checked at the reader"), nil
}

// latencyResult reports perftest's "typical" (median) latency with the
// average and 99th percentile in the detail. half halves round trips, as
// ib_send_lat and ib_write_lat do.
func latencyResult(samples []time.Duration, size int, half bool, what string) Result {
	slices.Sort(samples)
	div := 1.0
	if half {
		div = 2
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / div }
	var sum time.Duration
	for _, s := range samples {
		sum += s
	}
	n := len(samples)
	r := Result{Unit: "us", Size: size, Iters: n,
		Typical: us(samples[n/2]), Avg: us(sum / time.Duration(n)), P99: us(samples[n*99/100]), Max: us(samples[n-1])}
	r.Figure = r.Typical
	r.Detail = fmt.Sprintf("%d x %d B: typical %.2f, avg %.2f, 99%% %.2f, max %.2f us; %s",
		n, size, r.Typical, r.Avg, r.P99, r.Max, what)
	return r
}

// SendLat is ib_send_lat: SEND ping-pong; latency is half the round trip.
func SendLat(ctx context.Context, a, b *rack.Host, size, iters int) (Result, error) {
	return pingLat(ctx, a, b, size, iters, false)
}

// WriteLat is ib_write_lat. perftest's receiver polls its memory for the
// last byte to change; here each WRITE carries an immediate so the
// receiver learns of it from its CQ (the engine's memory is not polled
// from outside), and the data is checked.
func WriteLat(ctx context.Context, a, b *rack.Host, size, iters int) (Result, error) {
	return pingLat(ctx, a, b, size, iters, true)
}

func pingLat(ctx context.Context, a, b *rack.Host, size, iters int, write bool) (Result, error) {
	off := (max(size, 2048) + 63) &^ 63 // send buffer at 0, arrivals at off
	p, err := connect(a, b, 2*off)
	if err != nil {
		return Result{}, err
	}
	defer p.close()
	samples := make([]time.Duration, iters)
	op := rdma.WRSend
	if write {
		op = rdma.WRRDMAWriteWithImm
	}
	mkwr := func(e *rack.Endpoint, i int) rdma.SendWR {
		w := rdma.SendWR{WRID: uint64(i), Opcode: op, SendFlags: rdma.SendSignaled, SGList: sge(e, 0, size), ImmData: uint32(i)}
		if write {
			w.RemoteAddr, w.RKey = e.RemoteBuf+uint64(off), e.RemoteRKey
		}
		return w
	}
	recvInto := func(e *rack.Endpoint) []rdma.RecvWR {
		return []rdma.RecvWR{{SGList: sge(e, off, size)}}
	}
	// check compares what arrived at e (at off) with the pattern of
	// message i.
	check := func(e *rack.Endpoint, i int, scratch, want []byte) error {
		fillPattern(want, uint64(i))
		if err := e.Host.Memory.ReadAt(scratch, e.Buf+uint64(off)); err != nil {
			return err
		}
		if string(scratch) != string(want) {
			return fmt.Errorf("message %d: data differs from what was sent", i)
		}
		return nil
	}
	for _, e := range []*rack.Endpoint{p.c, p.s} {
		if err := e.QP.PostRecv(recvInto(e)); err != nil {
			return Result{}, err
		}
	}
	what := "SEND ping-pong, data checked"
	if write {
		what = "WRITE with immediate ping-pong, data checked"
	}
	err = run2(ctx, func(ctx context.Context) error {
		scratch, want := make([]byte, size), make([]byte, size)
		for i := range iters {
			if _, err := p.sRx.Next(ctx); err != nil {
				return err
			}
			if err := check(p.s, i, scratch, want); err != nil {
				return err
			}
			if err := p.s.QP.PostRecv(recvInto(p.s)); err != nil {
				return err
			}
			if err := p.s.Host.Memory.WriteAt(want, p.s.Buf); err != nil {
				return err
			}
			if err := p.s.QP.PostSend([]rdma.SendWR{mkwr(p.s, i)}); err != nil {
				return err
			}
			if _, err := p.sSend.Next(ctx); err != nil {
				return err
			}
		}
		return nil
	}, func(ctx context.Context) error {
		scratch, want := make([]byte, size), make([]byte, size)
		for i := range iters {
			fillPattern(want, uint64(i))
			if err := p.c.Host.Memory.WriteAt(want, p.c.Buf); err != nil {
				return err
			}
			start := time.Now()
			if err := p.c.QP.PostSend([]rdma.SendWR{mkwr(p.c, i)}); err != nil {
				return err
			}
			if _, err := p.cRx.Next(ctx); err != nil {
				return err
			}
			samples[i] = time.Since(start)
			if _, err := p.cSend.Next(ctx); err != nil {
				return err
			}
			if err := check(p.c, i, scratch, want); err != nil {
				return err
			}
			if err := p.c.QP.PostRecv(recvInto(p.c)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	return latencyResult(samples, size, true, what), nil
}

// ReadLat is ib_read_lat: one READ at a time; latency is the full round
// trip, as perftest reports it for READ.
func ReadLat(ctx context.Context, a, b *rack.Host, size, iters int) (Result, error) {
	p, err := connect(a, b, max(size, 4096))
	if err != nil {
		return Result{}, err
	}
	defer p.close()
	want, got := make([]byte, size), make([]byte, size)
	samples := make([]time.Duration, iters)
	for i := range iters {
		fillPattern(want, uint64(i))
		if err := p.s.Host.Memory.WriteAt(want, p.s.Buf); err != nil {
			return Result{}, err
		}
		start := time.Now()
		if err := p.c.QP.PostSend([]rdma.SendWR{{WRID: uint64(i), Opcode: rdma.WRRDMARead, SendFlags: rdma.SendSignaled,
			SGList: sge(p.c, 0, size), RemoteAddr: p.c.RemoteBuf, RKey: p.c.RemoteRKey}}); err != nil {
			return Result{}, err
		}
		if _, err := p.cSend.Next(ctx); err != nil {
			return Result{}, err
		}
		samples[i] = time.Since(start)
		if err := p.c.Host.Memory.ReadAt(got, p.c.Buf); err != nil {
			return Result{}, err
		}
		if string(got) != string(want) {
			return Result{}, fmt.Errorf("READ %d: data differs from the target's", i)
		}
	}
	return latencyResult(samples, size, false, "READ, data checked"), nil
}

// AtomicBW is ib_atomic_bw: iters FETCH_AND_ADDs of 1 on one word of the
// server, as many in flight as max_rd_atomic allows (the engine queues the
// rest). Every original value must be distinct and the word must end at
// iters: each atomic executed exactly once. The figure is operations per
// second.
func AtomicBW(ctx context.Context, a, b *rack.Host, iters int) (Result, error) {
	p, err := connect(a, b, max(8*slots, 4096))
	if err != nil {
		return Result{}, err
	}
	defer p.close()
	if err := p.s.Host.Memory.WriteAt(make([]byte, 8), p.s.Buf); err != nil {
		return Result{}, err
	}
	seen := make([]bool, iters)
	var elapsed time.Duration
	err = stream(ctx, p.c, p.cSend, iters, slots, &elapsed, func(i int) rdma.SendWR {
		return rdma.SendWR{Opcode: rdma.WRAtomicFetchAndAdd, SGList: sge(p.c, 8*(i%slots), 8),
			RemoteAddr: p.c.RemoteBuf, RKey: p.c.RemoteRKey, CompareAdd: 1}
	}, func(i int) error {
		orig, err := readWord(p.c, 8*(i%slots))
		if err != nil {
			return err
		}
		if orig >= uint64(iters) || seen[orig] {
			return fmt.Errorf("atomic %d returned %d: seen before or out of range", i, orig)
		}
		seen[orig] = true
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	final, err := readWord(p.s, 0)
	if err != nil {
		return Result{}, err
	}
	if final != uint64(iters) {
		return Result{}, fmt.Errorf("the target word is %d after %d FETCH_ADDs of 1", final, iters)
	}
	ops := float64(iters) / elapsed.Seconds()
	return Result{Figure: ops, Unit: "ops/s", Size: 8, Iters: iters, Elapsed: elapsed,
		Detail: fmt.Sprintf("%d FETCH_ADDs in %v; every original value distinct, the word ends at %d", iters,
			elapsed.Round(time.Millisecond), final)}, nil
}

// AtomicLat is ib_atomic_lat: one CMP_AND_SWP at a time, each swapping the
// value the previous one left; latency is the whole round trip.
func AtomicLat(ctx context.Context, a, b *rack.Host, iters int) (Result, error) {
	p, err := connect(a, b, 4096)
	if err != nil {
		return Result{}, err
	}
	defer p.close()
	if err := p.s.Host.Memory.WriteAt(make([]byte, 8), p.s.Buf); err != nil {
		return Result{}, err
	}
	samples := make([]time.Duration, iters)
	for i := range iters {
		start := time.Now()
		if err := p.c.QP.PostSend([]rdma.SendWR{{WRID: uint64(i), Opcode: rdma.WRAtomicCmpAndSwp, SendFlags: rdma.SendSignaled,
			SGList: sge(p.c, 0, 8), RemoteAddr: p.c.RemoteBuf, RKey: p.c.RemoteRKey,
			CompareAdd: uint64(i), Swap: uint64(i + 1)}}); err != nil {
			return Result{}, err
		}
		if _, err := p.cSend.Next(ctx); err != nil {
			return Result{}, err
		}
		samples[i] = time.Since(start)
		if orig, err := readWord(p.c, 0); err != nil || orig != uint64(i) {
			return Result{}, fmt.Errorf("CMP_AND_SWP %d found %d, want %d (%v)", i, orig, i, err)
		}
	}
	return latencyResult(samples, 8, false, "CMP_AND_SWP chain, every swap checked"), nil
}

// readWord reads the little-endian 64-bit word at offset off of e's buffer.
func readWord(e *rack.Endpoint, off int) (uint64, error) {
	var b [8]byte
	if err := e.Host.Memory.ReadAt(b[:], e.Buf+uint64(off)); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}
