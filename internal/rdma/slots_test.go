package rdma_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/PacketFive/hinic/internal/rdma"
)

// A queue's WQE slots are allocated as the consumer uses them, not when
// it creates the queue: a guest that asks for the largest queues and
// posts nothing costs the backend next to nothing (the hardening issue's
// "allocated as used").
func TestWQESlotsAllocatedAsUsed(t *testing.T) {
	p := newPair(t, pairOpts{sendWR: 16384, recvWR: 16384})
	if s, r := rdma.SlotsAllocated(p.qa); s != 0 || r != 0 {
		t.Fatalf("a new QP of 16384 WRs holds %d send and %d receive slots, want 0", s, r)
	}
	srq, err := p.b.dev.CreateSRQ(p.b.pd, rdma.SRQInitAttr{MaxWR: 16384, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	if n := rdma.SRQSlotsAllocated(srq); n != 0 {
		t.Fatalf("a new SRQ of 16384 WRs holds %d slots, want 0", n)
	}
	for i := range 3 {
		mustPost(t, p.qb.PostRecv([]rdma.RecvWR{{WRID: uint64(i), SGList: p.b.sge(0x10000, 64)}}))
		mustPost(t, srq.PostRecv([]rdma.RecvWR{{WRID: uint64(i), SGList: p.b.sge(0x10000, 64)}}))
		mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: uint64(i), Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
			SGList: p.a.sge(0x1000, 64)}}))
	}
	p.poll(p.b.rcq, 3)
	p.poll(p.a.scq, 3)
	if s, _ := rdma.SlotsAllocated(p.qa); s != 64 {
		t.Errorf("after 3 sends the send ring holds %d slots, want one chunk (64)", s)
	}
	if _, r := rdma.SlotsAllocated(p.qb); r != 64 {
		t.Errorf("after 3 receives the receive ring holds %d slots, want one chunk (64)", r)
	}
	if n := rdma.SRQSlotsAllocated(srq); n != 64 {
		t.Errorf("after 3 receives the SRQ holds %d slots, want one chunk (64)", n)
	}
}

// Rings of several chunks wrap with every message intact, and stop
// allocating once every slot has been used.
func TestWQESlotsWrapAcrossChunks(t *testing.T) {
	const ring, msgs, burst, size = 128, 700, 100, 256
	p := newPair(t, pairOpts{sendWR: ring, recvWR: ring})
	want := make([]byte, size)
	got := make([]byte, size)
	for base := 0; base < msgs; base += burst {
		for i := base; i < base+burst; i++ {
			slot := uint64(i % burst)
			mustPost(t, p.qb.PostRecv([]rdma.RecvWR{{WRID: uint64(i), SGList: p.b.sge(0x20000+slot*size, size)}}))
			clear(want)
			copy(want, fmt.Sprintf("message %d of the wrap test ", i))
			if err := p.a.mem.WriteAt(want, 0x1000+slot*size); err != nil {
				t.Fatal(err)
			}
			mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: uint64(i), Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
				SGList: p.a.sge(0x1000+slot*size, size)}}))
		}
		for j, wc := range p.poll(p.b.rcq, burst) {
			i := base + j
			if wc.Status != rdma.WCSuccess || wc.WRID != uint64(i) {
				t.Fatalf("receive %d: %v, WR %d", i, wc.Status, wc.WRID)
			}
			clear(want)
			copy(want, fmt.Sprintf("message %d of the wrap test ", i))
			if err := p.b.mem.ReadAt(got, 0x20000+uint64(j)*size); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("message %d arrived as %q", i, got[:32])
			}
		}
		for j, wc := range p.poll(p.a.scq, burst) {
			if wc.Status != rdma.WCSuccess || wc.WRID != uint64(base+j) {
				t.Fatalf("send %d: %v, WR %d", base+j, wc.Status, wc.WRID)
			}
		}
	}
	if s, _ := rdma.SlotsAllocated(p.qa); s != ring {
		t.Errorf("send ring holds %d slots after %d sends, want %d", s, msgs, ring)
	}
	if _, r := rdma.SlotsAllocated(p.qb); r != ring {
		t.Errorf("receive ring holds %d slots after %d receives, want %d", r, msgs, ring)
	}
}
