package rdma_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/rdma"
	"github.com/PacketFive/hinic/internal/rdma/rdmatest"
)

// deferPort is a FlushPort that holds every frame Send takes until
// Flush: a frame reaches the wire only if the engine flushes after the
// round that sent it. Owned by the engine goroutine, as Send and Flush
// are.
type deferPort struct {
	next    rdma.Port
	held    [][]byte
	flushes int
}

func (p *deferPort) Send(frame []byte) error {
	p.held = append(p.held, append([]byte(nil), frame...))
	return nil
}

func (p *deferPort) Flush() error {
	if len(p.held) > 0 {
		p.flushes++
	}
	for i, f := range p.held {
		if err := p.next.Send(f); err != nil {
			return err
		}
		p.held[i] = nil
	}
	p.held = p.held[:0]
	return nil
}

// TestFlushPortDelivers runs every operation between two devices whose
// ports pass frames on only when flushed: each completes, so the engine
// flushes after every round in which it sent, before it waits.
func TestFlushPortDelivers(t *testing.T) {
	o := pairOpts{mtu: 1024, memSize: 4 << 20}
	o.defaults()
	p := &pair{t: t, o: o, clk: rdmatest.NewFakeClock()}
	p.link = rdmatest.NewLink(o.seed, o.faults)
	da, db := &deferPort{next: p.link.A()}, &deferPort{next: p.link.B()}
	p.a = newNode(t, &p.o, da, p.clk, 1)
	p.b = newNode(t, &p.o, db, p.clk, 2)
	p.devs = []*rdma.Device{p.a.dev, p.b.dev}
	p.link.Connect(p.a.dev, p.b.dev)
	p.qa = p.a.createQP(t, &p.o)
	p.qb = p.b.createQP(t, &p.o)
	p.connect(p.qa, p.qb, p.b)
	p.connect(p.qb, p.qa, p.a)
	t.Cleanup(func() {
		p.a.dev.Close()
		p.b.dev.Close()
	})
	for _, op := range []rdma.WROpcode{rdma.WRSend, rdma.WRRDMAWrite, rdma.WRRDMAWriteWithImm, rdma.WRRDMARead} {
		r := newRoundTrip(p, op, 4096)
		for i := range 50 {
			if r.needRecv() {
				if err := p.qb.PostRecv(r.recv); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.qa.PostSend(r.send); err != nil {
				t.Fatal(err)
			}
			waitWC(t, p.a.scq, r.wcs, op, i)
			if r.needRecv() {
				waitWC(t, p.b.rcq, r.wcs, op, i)
			}
		}
	}
	// Read only after the engines are idle: the ports are theirs.
	p.a.dev.WaitIdle()
	p.b.dev.WaitIdle()
	if da.flushes == 0 || db.flushes == 0 {
		t.Fatalf("flushes: a %d, b %d", da.flushes, db.flushes)
	}
}

// waitWC waits for one completion on cq; the deadline only turns a
// hang (a frame held and never flushed) into a failure.
func waitWC(t *testing.T, cq *rdma.CQ, wcs []rdma.WC, op rdma.WROpcode, i int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for cq.Poll(wcs[:1]) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%v %d: no completion; frames held and never flushed", op, i)
		}
		runtime.Gosched()
	}
	if wcs[0].Status != rdma.WCSuccess {
		t.Fatalf("%v %d: %+v", op, i, wcs[0])
	}
}
