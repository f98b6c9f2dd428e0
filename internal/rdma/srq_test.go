package rdma_test

import (
	"bytes"
	"sync/atomic"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/rdma"
)

// srqSetup is a pair plus two more QPs on b that share one SRQ, each
// connected to its own sender on a.
type srqSetup struct {
	*pair
	srq      *rdma.SRQ
	s1, s2   *rdma.QP // senders on a
	r1, r2   *rdma.QP // receivers on b, with the SRQ
	recvBase uint64   // receive buffers on b: 1 KiB each from here
}

func newSRQSetup(t *testing.T, o pairOpts, srqAttr rdma.SRQInitAttr) *srqSetup {
	t.Helper()
	p := newPair(t, o)
	srq, err := p.b.dev.CreateSRQ(p.b.pd, srqAttr)
	if err != nil {
		t.Fatal(err)
	}
	s := &srqSetup{pair: p, srq: srq, recvBase: 0x40000}
	mk := func() *rdma.QP {
		qp, err := p.b.dev.CreateQP(p.b.pd, rdma.QPInitAttr{SendCQ: p.b.scq, RecvCQ: p.b.rcq, QPType: rdma.QPTypeRC,
			SRQ: srq, Cap: rdma.QPCap{MaxSendWR: 16, MaxRecvWR: 99, MaxSendSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return qp
	}
	s.s1, s.s2 = p.a.createQP(t, &p.o), p.a.createQP(t, &p.o)
	s.r1, s.r2 = mk(), mk()
	p.connect(s.s1, s.r1, p.b)
	p.connect(s.r1, s.s1, p.a)
	p.connect(s.s2, s.r2, p.b)
	p.connect(s.r2, s.s2, p.a)
	return s
}

func (s *srqSetup) postSRQ(t *testing.T, first, n int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		mustPost(t, s.srq.PostRecv([]rdma.RecvWR{{WRID: uint64(100 + i),
			SGList: s.b.sge(s.recvBase+uint64(i)*1024, 1024)}}))
	}
}

func TestSRQSharedByTwoQPs(t *testing.T) {
	s := newSRQSetup(t, pairOpts{}, rdma.SRQInitAttr{MaxWR: 16, MaxSGE: 2})
	if err := s.r1.PostRecv([]rdma.RecvWR{{WRID: 1}}); !isErr(err, rdma.ErrInvalid) {
		t.Fatalf("PostRecv on a QP with an SRQ: %v, want ErrInvalid", err)
	}
	s.postSRQ(t, 0, 8)
	// Alternate senders; each message names its sender and sequence.
	for i := 0; i < 8; i++ {
		qp := s.s1
		if i%2 == 1 {
			qp = s.s2
		}
		src := uint64(0x1000 + i*512)
		fill(s.a.mem.Bytes()[src:src+300], byte(i))
		mustPost(t, qp.PostSend([]rdma.SendWR{{WRID: uint64(i), Opcode: rdma.WRSendWithImm, ImmData: uint32(i),
			SendFlags: rdma.SendSignaled, SGList: s.a.sge(src, 300)}}))
		s.poll(s.a.scq, 1)
	}
	wcs := s.poll(s.b.rcq, 8)
	for i, wc := range wcs {
		wantWC(t, wc, uint64(100+i), rdma.WCSuccess, rdma.WCRecv)
		want := s.r1.QPN()
		if i%2 == 1 {
			want = s.r2.QPN()
		}
		if wc.QPNum != want || wc.ImmData != uint32(i) || wc.ByteLen != 300 {
			t.Errorf("wc %d: QP %#x imm %d len %d, want QP %#x imm %d len 300", i, wc.QPNum, wc.ImmData, wc.ByteLen, want, i)
		}
		// WR 100+i got message i: SRQ WRs go in posting order.
		got := s.b.mem.Bytes()[s.recvBase+uint64(i)*1024:][:300]
		exp := make([]byte, 300)
		fill(exp, byte(i))
		if !bytes.Equal(got, exp) {
			t.Errorf("receive buffer %d holds the wrong message", i)
		}
	}
	if n := s.srq.Len(); n != 0 {
		t.Errorf("SRQ holds %d WRs after 8 of 8 were used", n)
	}
}

func TestSRQRNRThenPost(t *testing.T) {
	s := newSRQSetup(t, pairOpts{}, rdma.SRQInitAttr{MaxWR: 4, MaxSGE: 1})
	mustPost(t, s.s1.PostSend([]rdma.SendWR{{WRID: 7, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
		SGList: s.a.sge(0x1000, 64)}}))
	s.settle()
	if c := s.b.dev.Counters(); c.RNRNAKsSent == 0 {
		t.Fatalf("no RNR NAK with an empty SRQ: %+v", c)
	}
	s.postSRQ(t, 0, 1)
	wantWC(t, s.poll(s.b.rcq, 1)[0], 100, rdma.WCSuccess, rdma.WCRecv)
	wantWC(t, s.poll(s.a.scq, 1)[0], 7, rdma.WCSuccess, rdma.WCSend)
}

func TestSRQWriteWithImmTakesAWR(t *testing.T) {
	s := newSRQSetup(t, pairOpts{}, rdma.SRQInitAttr{MaxWR: 4, MaxSGE: 1})
	s.postSRQ(t, 0, 1)
	mustPost(t, s.s2.PostSend([]rdma.SendWR{{WRID: 9, Opcode: rdma.WRRDMAWriteWithImm, ImmData: 0xabc,
		SendFlags: rdma.SendSignaled, SGList: s.a.sge(0x1000, 100), RemoteAddr: 0x8000, RKey: s.b.mr.RKey}}))
	wc := s.poll(s.b.rcq, 1)[0]
	wantWC(t, wc, 100, rdma.WCSuccess, rdma.WCRecvRDMAWithImm)
	if wc.ImmData != 0xabc || wc.QPNum != s.r2.QPN() {
		t.Errorf("wc %+v", wc)
	}
}

// wantLimitEvent waits for the SRQ's limit event.
func (s *srqSetup) wantLimitEvent(t *testing.T) {
	t.Helper()
	select {
	case ev := <-s.b.dev.AsyncEvents():
		if ev.Type != rdma.EventSRQLimitReached || ev.SRQ != s.srq {
			t.Fatalf("event %v (SRQ %v), want SRQ_LIMIT_REACHED", ev.Type, ev.SRQ)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no SRQ limit event")
	}
}

func TestSRQLimitEvent(t *testing.T) {
	s := newSRQSetup(t, pairOpts{}, rdma.SRQInitAttr{MaxWR: 16, MaxSGE: 1})
	s.postSRQ(t, 0, 10)
	if err := s.srq.Modify(rdma.SRQAttr{Limit: 17}, rdma.SRQAttrLimit); !isErr(err, rdma.ErrInvalid) {
		t.Fatalf("limit above MaxWR: %v", err)
	}
	if err := s.srq.Modify(rdma.SRQAttr{Limit: 4}, rdma.SRQAttrLimit); err != nil {
		t.Fatal(err)
	}
	send := func(n int) {
		for i := 0; i < n; i++ {
			mustPost(t, s.s1.PostSend([]rdma.SendWR{{Opcode: rdma.WRSend, SGList: s.a.sge(0x1000, 8)}}))
		}
		s.poll(s.b.rcq, n)
	}
	send(6) // 4 left: not below the limit
	select {
	case ev := <-s.b.dev.AsyncEvents():
		t.Fatalf("event %v with 4 WRs left and limit 4", ev.Type)
	default:
	}
	send(1) // 3 left
	s.wantLimitEvent(t)
	if a := s.srq.Query(); a.Limit != 0 || a.MaxWR != 16 {
		t.Errorf("after the event: %+v, want limit 0 (disarmed)", a)
	}
	send(2) // disarmed: no second event
	select {
	case ev := <-s.b.dev.AsyncEvents():
		t.Fatalf("second event %v without re-arming", ev.Type)
	default:
	}
}

func TestSRQResizeAndDestroy(t *testing.T) {
	s := newSRQSetup(t, pairOpts{}, rdma.SRQInitAttr{MaxWR: 4, MaxSGE: 1, Limit: 2})
	s.postSRQ(t, 0, 4)
	if err := s.srq.PostRecv([]rdma.RecvWR{{WRID: 1}}); !isErr(err, rdma.ErrNoResources) {
		t.Fatalf("post to a full SRQ: %v", err)
	}
	if err := s.srq.Modify(rdma.SRQAttr{MaxWR: 3}, rdma.SRQAttrMaxWR); !isErr(err, rdma.ErrInvalid) {
		t.Fatalf("shrink below the WRs held: %v", err)
	}
	if err := s.srq.Modify(rdma.SRQAttr{MaxWR: 8}, rdma.SRQAttrMaxWR); err != nil {
		t.Fatal(err)
	}
	s.postSRQ(t, 4, 4)
	for i := 0; i < 8; i++ {
		mustPost(t, s.s1.PostSend([]rdma.SendWR{{Opcode: rdma.WRSend, SGList: s.a.sge(0x1000, 8)}}))
	}
	for i, wc := range s.poll(s.b.rcq, 8) {
		wantWC(t, wc, uint64(100+i), rdma.WCSuccess, rdma.WCRecv)
	}
	if err := s.srq.Destroy(); !isErr(err, rdma.ErrBusy) {
		t.Fatalf("destroy an SRQ in use: %v", err)
	}
	for _, qp := range []*rdma.QP{s.r1, s.r2} {
		if err := qp.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.srq.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := s.srq.PostRecv([]rdma.RecvWR{{WRID: 1}}); !isErr(err, rdma.ErrInvalid) {
		t.Fatalf("post to a destroyed SRQ: %v", err)
	}
	if _, err := s.b.dev.CreateQP(s.b.pd, rdma.QPInitAttr{SendCQ: s.b.scq, RecvCQ: s.b.rcq, QPType: rdma.QPTypeRC,
		SRQ: s.srq}); !isErr(err, rdma.ErrInvalid) {
		t.Fatalf("QP with a destroyed SRQ: %v", err)
	}
}

func TestSRQLastWQEReached(t *testing.T) {
	s := newSRQSetup(t, pairOpts{}, rdma.SRQInitAttr{MaxWR: 4, MaxSGE: 1})
	s.postSRQ(t, 0, 2)
	if err := s.r1.Modify(&rdma.QPAttr{QPState: rdma.QPStateErr}, rdma.QPAttrState); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-s.b.dev.AsyncEvents():
		if ev.Type != rdma.EventQPLastWQEReached || ev.QP != s.r1 {
			t.Fatalf("event %v, want QP_LAST_WQE_REACHED for r1", ev.Type)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no last-WQE event")
	}
	// The SRQ's WRs stay for the other QP.
	if n := s.srq.Len(); n != 2 {
		t.Fatalf("SRQ holds %d WRs, want 2", n)
	}
	mustPost(t, s.s2.PostSend([]rdma.SendWR{{Opcode: rdma.WRSend, SGList: s.a.sge(0x1000, 8)}}))
	wc := s.poll(s.b.rcq, 1)[0]
	wantWC(t, wc, 100, rdma.WCSuccess, rdma.WCRecv)
}

func TestCQOverrunEvent(t *testing.T) {
	p := newPair(t, pairOpts{cqe: 2})
	for i := 0; i < 4; i++ {
		mustPost(t, p.qb.PostRecv([]rdma.RecvWR{{WRID: uint64(i), SGList: p.b.sge(0x2000, 64)}}))
		mustPost(t, p.qa.PostSend([]rdma.SendWR{{Opcode: rdma.WRSend, SGList: p.a.sge(0x1000, 8)}}))
	}
	p.settle()
	if c := p.b.dev.Counters(); c.CQOverflows != 2 {
		t.Fatalf("CQ overflows %d, want 2", c.CQOverflows)
	}
	select {
	case ev := <-p.b.dev.AsyncEvents():
		if ev.Type != rdma.EventCQErr || ev.CQ != p.b.rcq {
			t.Fatalf("event %v, want CQ_ERR on b's receive CQ", ev.Type)
		}
	default:
		t.Fatal("no CQ_ERR event")
	}
	select {
	case ev := <-p.b.dev.AsyncEvents():
		t.Fatalf("second event %v: CQ_ERR is raised once per CQ", ev.Type)
	default:
	}
}

// TestWriteImmOnlyRNRRetry: a one-packet WRITE_WITH_IMM that finds no
// receive gets an RNR NAK; its retry must be accepted once a receive is
// posted (the responder must not stay in the middle of a WRITE).
func TestWriteImmOnlyRNRRetry(t *testing.T) {
	for _, n := range []uint32{1, 3000} {
		p := newPair(t, pairOpts{})
		mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRRDMAWriteWithImm, ImmData: 5,
			SendFlags: rdma.SendSignaled, SGList: p.a.sge(0x1000, n), RemoteAddr: 0x20000, RKey: p.b.mr.RKey}}))
		p.settle()
		if c := p.b.dev.Counters(); c.RNRNAKsSent == 0 {
			t.Fatalf("%d B: no RNR NAK", n)
		}
		mustPost(t, p.qb.PostRecv([]rdma.RecvWR{{WRID: 9, SGList: p.b.sge(0x8000, 16)}}))
		wantWC(t, p.poll(p.a.scq, 1)[0], 1, rdma.WCSuccess, rdma.WCRDMAWrite)
		wc := p.poll(p.b.rcq, 1)[0]
		wantWC(t, wc, 9, rdma.WCSuccess, rdma.WCRecvRDMAWithImm)
		if wc.ImmData != 5 || wc.ByteLen != n {
			t.Fatalf("%d B: wc %+v", n, wc)
		}
	}
}

// TestSRQLimitCountsOnEmpty: WRs that OnEmpty can still bring (a device's
// guest ring it has not fetched) count toward the limit, so the event
// waits until they too run short.
func TestSRQLimitCountsOnEmpty(t *testing.T) {
	var srq atomic.Pointer[rdma.SRQ]
	var pending atomic.Int32
	pending.Store(4)
	onEmpty := func() bool {
		q := srq.Load()
		n := int(pending.Swap(0))
		if q == nil || n == 0 {
			return false
		}
		for i := range n {
			if err := q.PostRecv([]rdma.RecvWR{{WRID: uint64(200 + i), SGList: []rdma.SGE{}}}); err != nil {
				return false
			}
		}
		return true
	}
	s := newSRQSetup(t, pairOpts{}, rdma.SRQInitAttr{MaxWR: 16, MaxSGE: 1, Limit: 4, OnEmpty: onEmpty})
	srq.Store(s.srq)
	s.postSRQ(t, 0, 4)
	send := func(n int) {
		for range n {
			mustPost(t, s.s1.PostSend([]rdma.SendWR{{Opcode: rdma.WRSend}}))
		}
		s.poll(s.b.rcq, n)
	}
	send(1) // 3 held, 4 more to bring: 7 left
	select {
	case ev := <-s.b.dev.AsyncEvents():
		t.Fatalf("event %v with 7 WRs left counting OnEmpty's, limit 4", ev.Type)
	default:
	}
	if s.srq.Held() != 7 {
		t.Fatalf("%d WRs held, want 7", s.srq.Held())
	}
	send(4) // 3 left and nothing more to bring
	s.wantLimitEvent(t)
}
