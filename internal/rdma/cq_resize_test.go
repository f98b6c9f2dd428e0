package rdma_test

import (
	"testing"

	"github.com/PacketFive/hinic/internal/rdma"
)

func TestCQResize(t *testing.T) {
	p := newPair(t, pairOpts{cqe: 4})
	for i := 0; i < 3; i++ {
		mustPost(t, p.qb.PostRecv([]rdma.RecvWR{{WRID: uint64(i), SGList: p.b.sge(0x8000, 64)}}))
		mustPost(t, p.qa.PostSend([]rdma.SendWR{{Opcode: rdma.WRSend, SGList: p.a.sge(0x1000, 8)}}))
	}
	p.settle()
	if err := p.b.rcq.Resize(2); !isErr(err, rdma.ErrInvalid) {
		t.Fatalf("resize below the 3 completions held: %v", err)
	}
	if err := p.b.rcq.Resize(1 << 30); !isErr(err, rdma.ErrInvalid) {
		t.Fatalf("resize above MaxCQE: %v", err)
	}
	if err := p.b.rcq.Resize(16); err != nil {
		t.Fatal(err)
	}
	if p.b.rcq.CQE() != 16 {
		t.Fatalf("CQE %d after the resize", p.b.rcq.CQE())
	}
	// 3 kept, in order, and room for 13 more where 1 was left.
	for i := 3; i < 10; i++ {
		mustPost(t, p.qb.PostRecv([]rdma.RecvWR{{WRID: uint64(i), SGList: p.b.sge(0x8000, 64)}}))
		mustPost(t, p.qa.PostSend([]rdma.SendWR{{Opcode: rdma.WRSend, SGList: p.a.sge(0x1000, 8)}}))
	}
	for i, wc := range p.poll(p.b.rcq, 10) {
		wantWC(t, wc, uint64(i), rdma.WCSuccess, rdma.WCRecv)
	}
	if c := p.b.dev.Counters(); c.CQOverflows != 0 {
		t.Fatalf("%d completions lost", c.CQOverflows)
	}
}
