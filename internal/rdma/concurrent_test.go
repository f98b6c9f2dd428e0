package rdma_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"runtime"
	"sync"
	"testing"

	"github.com/PacketFive/hinic/internal/rdma"
)

// qpPair is an extra pair of connected QPs on a pair's devices, with CQs
// of its own.
type qpPair struct {
	qa, qb   *rdma.QP
	scq, rcq *rdma.CQ
}

func (p *pair) extraQPs(t *testing.T) qpPair {
	t.Helper()
	var x qpPair
	var err error
	if x.scq, err = p.a.dev.CreateCQ(p.o.cqe, nil); err != nil {
		t.Fatal(err)
	}
	if x.rcq, err = p.b.dev.CreateCQ(p.o.cqe, nil); err != nil {
		t.Fatal(err)
	}
	c := rdma.QPCap{MaxSendWR: p.o.sendWR, MaxRecvWR: p.o.recvWR, MaxSendSGE: 1, MaxRecvSGE: 1}
	if x.qa, err = p.a.dev.CreateQP(p.a.pd, rdma.QPInitAttr{SendCQ: x.scq, RecvCQ: x.scq, QPType: rdma.QPTypeRC, Cap: c}); err != nil {
		t.Fatal(err)
	}
	if x.qb, err = p.b.dev.CreateQP(p.b.pd, rdma.QPInitAttr{SendCQ: x.rcq, RecvCQ: x.rcq, QPType: rdma.QPTypeRC, Cap: c}); err != nil {
		t.Fatal(err)
	}
	p.connect(x.qa, x.qb, p.b)
	p.connect(x.qb, x.qa, p.a)
	return x
}

// TestConcurrentQPs drives several QPs on the same two devices from
// separate goroutines with the real clock, while another goroutine reads
// counters and queries QPs: the race detector checks the ownership rules.
func TestConcurrentQPs(t *testing.T) { concurrentQPs(t, false) }

// TestConcurrentQPsInline is TestConcurrentQPs with the engine also run
// by the goroutines that bring it work, as the VM backend does: each
// device's frames arrive on an rx goroutine that runs the engine
// (inlineRx), and every post is followed by RunInline on the poster.
func TestConcurrentQPsInline(t *testing.T) { concurrentQPs(t, true) }

func concurrentQPs(t *testing.T, inline bool) {
	const workers, region = 4, 256 << 10
	n := 300
	if testing.Short() || raceEnabled {
		n = 100
	}
	// The real clock, with an ACK timeout (timeout 22, about 17 s) that an
	// overloaded machine cannot trip: a spurious retransmission of a READ
	// would make the responder replay it from memory the worker has
	// already reused for its next message (correct on the wire, but a data
	// race in this test's shared host memory).
	p := newPair(t, pairOpts{realClock: true, timeout: 22, mtu: 4096, memSize: workers * region, sendWR: 32, recvWR: 32, cqe: 128,
		rxInline: inline})
	pairs := make([]qpPair, workers)
	for i := range pairs {
		pairs[i] = p.extraQPs(t)
	}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { // concurrent readers of shared state
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = p.a.dev.Counters()
			if a, _ := pairs[0].qa.Query(); a.QPState != rdma.QPStateRTS {
				t.Errorf("QP in %v", a.QPState)
				return
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- runWorker(p, pairs[w], uint64(w*region), n, int64(w), inline)
		}()
	}
	wg.Wait()
	close(stop)
	bg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func runWorker(p *pair, x qpPair, base uint64, n int, seed int64, inline bool) error {
	rng := rand.New(rand.NewSource(seed))
	half := uint64(64 << 10)
	wcs := make([]rdma.WC, 8)
	ops := []rdma.WROpcode{rdma.WRSend, rdma.WRRDMAWrite, rdma.WRRDMARead, rdma.WRRDMAWriteWithImm}
	for i := range n {
		op := ops[rng.Intn(len(ops))]
		size := 1 + rng.Intn(int(half))
		src, dst := p.a.mem.Bytes()[base:base+uint64(size)], p.b.mem.Bytes()[base+half:base+half+uint64(size)]
		if op == rdma.WRRDMARead {
			src, dst = dst, src
		}
		fill(src, byte(i))
		needRecv := op == rdma.WRSend || op == rdma.WRRDMAWriteWithImm
		if needRecv {
			if err := x.qb.PostRecv([]rdma.RecvWR{{WRID: uint64(i), SGList: p.b.sge(base+half, uint32(half))}}); err != nil {
				return err
			}
		}
		if inline {
			p.a.dev.HoldKick()
		}
		err := x.qa.PostSend([]rdma.SendWR{{WRID: uint64(i), Opcode: op, SendFlags: rdma.SendSignaled,
			SGList: p.a.sge(base, uint32(size)), RemoteAddr: base + half, RKey: p.b.mr.RKey}})
		if inline {
			p.a.dev.RunInline(true)
		}
		if err != nil {
			return err
		}
		for got := false; !got; {
			if k := x.scq.Poll(wcs[:1]); k == 1 {
				if wcs[0].Status != rdma.WCSuccess || wcs[0].WRID != uint64(i) {
					return fmt.Errorf("message %d: completion %+v", i, wcs[0])
				}
				got = true
			} else {
				runtime.Gosched() // spinning pollers must let the engines run
			}
		}
		if needRecv {
			for got := false; !got; {
				if k := x.rcq.Poll(wcs[:1]); k == 1 {
					if wcs[0].Status != rdma.WCSuccess || wcs[0].WRID != uint64(i) || int(wcs[0].ByteLen) != size {
						return fmt.Errorf("message %d: receive completion %+v", i, wcs[0])
					}
					got = true
				} else {
					runtime.Gosched()
				}
			}
		}
		if !bytes.Equal(src, dst) {
			return fmt.Errorf("message %d (%v, %d B): data mismatch", i, op, size)
		}
	}
	return nil
}
