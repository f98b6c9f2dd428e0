package rdma_test

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/PacketFive/hinic/internal/rdma"
	"github.com/PacketFive/hinic/internal/rdma/rdmatest"
)

// TestRNRUnderFaults: the receiver keeps only two receives posted, so the
// requester meets RNR NAKs all the time, while the wire drops,
// duplicates, reorders and corrupts frames. Every message must complete,
// in order.
func TestRNRUnderFaults(t *testing.T) {
	n := 3000
	if testing.Short() || raceEnabled {
		n = 600
	}
	for _, seed := range []int64{1, 2, 3} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			p := newPair(t, pairOpts{mtu: 1024, seed: seed, memSize: 1 << 20, sendWR: 64, recvWR: 8, cqe: 256,
				faults: rdmatest.Faults{Drop: 0.01, Duplicate: 0.01, Reorder: 0.01, Corrupt: 0.001}, minRNR: 1})
			rng := rand.New(rand.NewSource(seed))
			posted, recvd, sent, done := 0, 0, 0, 0
			post := func() {
				for posted-recvd < 2 {
					mustPost(t, p.qb.PostRecv([]rdma.RecvWR{{WRID: uint64(posted), SGList: p.b.sge(0x80000, 8192)}}))
					posted++
				}
			}
			post()
			for done < n {
				for sent < n && sent-done < 32 {
					size := uint32(1 + rng.Intn(5000))
					wr := rdma.SendWR{WRID: uint64(sent), Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled, SGList: p.a.sge(0x1000, size)}
					if rng.Intn(3) == 0 {
						wr.Opcode, wr.RemoteAddr, wr.RKey = rdma.WRRDMAWriteWithImm, 0x40000, p.b.mr.RKey
					}
					mustPost(t, p.qa.PostSend([]rdma.SendWR{wr}))
					sent++
				}
				// Drain what the receiver got, then wait for a send.
				var rw [16]rdma.WC
				for k := p.b.rcq.Poll(rw[:]); k > 0; k = p.b.rcq.Poll(rw[:]) {
					for _, wc := range rw[:k] {
						if wc.Status != rdma.WCSuccess || int(wc.WRID) != recvd {
							t.Fatalf("receive %d: %+v", recvd, wc)
						}
						recvd++
					}
				}
				post()
				var sw [1]rdma.WC
				if p.a.scq.Poll(sw[:]) == 0 {
					p.settle()
					if p.a.scq.Poll(sw[:]) == 0 && p.b.rcq.Poll(rw[:0]) == 0 {
						if _, ok := p.clk.AdvanceToNext(); !ok {
							t.Fatalf("stuck: %d of %d sends done, %d received, %d receives posted; a: %+v", done, n, recvd, posted, p.a.dev.Counters())
						}
						continue
					}
				}
				wc := sw[0]
				if wc.Status != rdma.WCSuccess || int(wc.WRID) != done {
					t.Fatalf("send %d: %+v", done, wc)
				}
				done++
			}
			t.Logf("%d messages; a: RNR NAKs %d, retransmits %d", n, p.a.dev.Counters().RNRNAKsReceived, p.a.dev.Counters().Retransmits)
		})
	}
}

// TestRNRWaitEndsWithWorkPosted: a SEND gets an RNR NAK, then a
// duplicate of it (as a fabric may make) is accepted and acknowledged
// while the requester still waits; a SEND posted during the wait must go
// out when the RNR timer ends the wait, although nothing is left to resend.
func TestRNRWaitEndsWithWorkPosted(t *testing.T) {
	p, ia, _ := newInterceptPair(t, pairOpts{})
	ia.keep = true
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled, SGList: p.a.sge(0x1000, 64)}}))
	p.settle()
	if c := p.a.dev.Counters(); c.RNRNAKsReceived != 1 {
		t.Fatalf("RNR NAKs received %d, want 1", c.RNRNAKsReceived)
	}
	frames := ia.captured()
	if len(frames) != 1 {
		t.Fatalf("%d frames sent, want the one SEND", len(frames))
	}
	mustPost(t, p.qb.PostRecv([]rdma.RecvWR{{WRID: 1, SGList: p.b.sge(0x8000, 64)}}))
	mustPost(t, p.qb.PostRecv([]rdma.RecvWR{{WRID: 2, SGList: p.b.sge(0x9000, 64)}}))
	p.b.dev.Deliver(frames[0]) // the duplicate
	p.settle()
	var wc [2]rdma.WC
	if n := p.a.scq.Poll(wc[:]); n != 1 || wc[0].WRID != 1 || wc[0].Status != rdma.WCSuccess {
		t.Fatalf("the duplicate's ACK did not complete WR 1: %d %+v", n, wc[0])
	}
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 2, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled, SGList: p.a.sge(0x1000, 64)}}))
	wantWC(t, p.poll(p.a.scq, 1)[0], 2, rdma.WCSuccess, rdma.WCSend)
	wcs := p.poll(p.b.rcq, 2)
	wantWC(t, wcs[1], 2, rdma.WCSuccess, rdma.WCRecv)
}
