package rdma_test

import (
	"sync"
	"testing"

	"github.com/PacketFive/hinic/internal/rdma"
)

// ringSink is a CQSink with room for room completions (a consumer's
// ring); taken records what it took, in order.
type ringSink struct {
	mu    sync.Mutex
	room  int
	taken []uint64
}

func (s *ringSink) Complete(wc rdma.WC) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.taken) >= s.room {
		return false
	}
	s.taken = append(s.taken, wc.WRID)
	return true
}

func (s *ringSink) grow(n int) {
	s.mu.Lock()
	s.room += n
	s.mu.Unlock()
}

func (s *ringSink) got() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint64(nil), s.taken...)
}

// TestCQSink: completions go straight to the sink; when it is full the CQ
// holds them in order, later ones queue behind them, Flush hands them
// over in order when there is room, and past the CQ's own bound they are
// lost with one CQ_ERR, as without a sink.
func TestCQSink(t *testing.T) {
	p := newPair(t, pairOpts{cqe: 4})
	sink := &ringSink{room: 2}
	p.b.rcq.SetSink(sink)
	send := func(id uint64) {
		mustPost(t, p.qb.PostRecv([]rdma.RecvWR{{WRID: id, SGList: p.b.sge(0x2000, 64)}}))
		mustPost(t, p.qa.PostSend([]rdma.SendWR{{Opcode: rdma.WRSend, SGList: p.a.sge(0x1000, 8)}}))
		p.settle()
	}
	for id := range uint64(4) {
		send(id)
	}
	if got := sink.got(); len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Fatalf("sink took %v, want [0 1]", got)
	}
	if n := p.b.rcq.Len(); n != 2 {
		t.Fatalf("CQ holds %d, want 2 (the sink is full)", n)
	}
	// Room for one: Flush moves the oldest held; a new completion still
	// queues behind the one left, never ahead of it.
	sink.grow(1)
	if left := p.b.rcq.Flush(); left != 1 {
		t.Fatalf("Flush left %d, want 1", left)
	}
	sink.grow(1)
	send(4)
	if got := sink.got(); len(got) != 3 {
		t.Fatalf("sink took %v, want [0 1 2]: 3 and 4 wait for Flush", got)
	}
	if left := p.b.rcq.Flush(); left != 1 {
		t.Fatalf("Flush left %d, want 1", left)
	}
	// The CQ's bound: it holds 4; 4 more completions lose 1.
	for id := uint64(5); id < 9; id++ {
		send(id)
	}
	if c := p.b.dev.Counters(); c.CQOverflows != 1 {
		t.Fatalf("CQ overflows %d, want 1", c.CQOverflows)
	}
	select {
	case ev := <-p.b.dev.AsyncEvents():
		if ev.Type != rdma.EventCQErr || ev.CQ != p.b.rcq {
			t.Fatalf("event %v, want CQ_ERR on b's receive CQ", ev.Type)
		}
	default:
		t.Fatal("no CQ_ERR event")
	}
	sink.grow(100)
	if left := p.b.rcq.Flush(); left != 0 {
		t.Fatalf("Flush left %d, want 0", left)
	}
	got := sink.got()
	want := []uint64{0, 1, 2, 3, 4, 5, 6, 7}
	if len(got) != len(want) {
		t.Fatalf("sink took %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("sink took %v, want %v (in completion order)", got, want)
		}
	}
	// Detached, the CQ keeps completions for Poll.
	p.b.rcq.SetSink(nil)
	send(9)
	if wc := p.poll(p.b.rcq, 1); wc[0].WRID != 9 {
		t.Fatalf("Poll got %d, want 9", wc[0].WRID)
	}
}
