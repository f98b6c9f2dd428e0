package device

import (
	"time"

	"github.com/PacketFive/hinic/internal/rdma"
)

// cqRing checks the ring and dbrec of a CREATE_CQ or RESIZE_CQ, and
// reads a paged ring's page table (CQFPaged, ABI 1.9) with pageList.
// nil pages: a contiguous ring at RingGPA.
func (s *session) cqRing(a *CmdCreateCQArgs) ([]uint64, uint16) {
	if a.Flags&^CQFPaged != 0 || a.Rsvd != 0 || a.DBRecGPA%16 != 0 {
		return nil, StEINVAL
	}
	if !s.ramRange(a.DBRecGPA, 16) {
		return nil, StEFAULT
	}
	bytes := uint64(a.Depth) * cqeSize
	if a.Flags&CQFPaged == 0 {
		if a.RingGPA%64 != 0 {
			return nil, StEINVAL
		}
		if !s.ramRange(a.RingGPA, bytes) {
			return nil, StEFAULT
		}
		return nil, StOK
	}
	n := bytes / CQPageSize
	if bytes%CQPageSize != 0 || n > CQMaxPages || a.RingGPA%8 != 0 {
		return nil, StEINVAL
	}
	return s.pageList(a.RingGPA, n, CQPageSize)
}

func (s *session) createCQ(a *CmdCreateCQArgs, out *AdminCQE) uint16 {
	if !isPow2(a.Depth) || a.Depth > s.lim.maxCQE {
		return StEINVAL
	}
	if int(a.CompVector)+IRQCQBase >= s.v.cfg.Vectors {
		return StEINVAL
	}
	pages, st := s.cqRing(a)
	if st != StOK {
		return st
	}
	cost := cqCost(a.Depth) + int64(len(pages))*8
	if len(s.cqs) >= int(s.lim.maxCQ) || !s.mem.charge(cost) {
		return StENOMEM
	}
	cq, err := s.dev.CreateCQ(int(a.Depth), nil)
	if err != nil {
		s.mem.refund(cost)
		return status(err)
	}
	n := nextHandle(&s.nextCQ, s.cqs)
	g := &gcq{s: s, cqn: n, cq: cq, ring: a.RingGPA, pages: pages, dbrec: a.DBRecGPA, depth: a.Depth,
		vector: IRQCQBase + int(a.CompVector), cost: cost}
	cq.SetSink(g) // the engine writes the guest ring itself
	s.cqs[n] = g
	out.Handle = n
	return StOK
}

// resizeCQ moves CQ cqn to a new ring of a.Depth entries with a new dbrec
// (ib_resize_cq): the completions the guest has not consumed are copied
// to the new ring's entries 0..n-1, its dbrec starts at prod n, cons 0,
// disarmed, and the engine CQ is resized to the same depth. comp_vector
// must stay the same. Nothing changes on an error.
// settleWait bounds how long a resize waits for the engine to run what
// the guest posted: work that waits on the wire (an RC send's ACK)
// completes later whatever the wait.
const settleWait = 100 * time.Millisecond

// settle lets the engine run the work taken from the rings until it has
// nothing it can do at once (UD sends complete as they leave), within
// settleWait; the waiter left behind ends when the engine idles or
// closes.
func (s *session) settle() {
	if s.dev == nil {
		return
	}
	done := make(chan struct{})
	go func(d *rdma.Device) {
		d.WaitIdle()
		close(done)
	}(s.dev)
	select {
	case <-done:
	case <-time.After(settleWait):
	}
}

func (s *session) resizeCQ(cqn uint32, a *CmdCreateCQArgs) uint16 {
	cq, ok := s.cqs[cqn]
	if !ok {
		return StENOENT
	}
	if !isPow2(a.Depth) || a.Depth > s.lim.maxCQE || IRQCQBase+int(a.CompVector) != cq.vector {
		return StEINVAL
	}
	pages, st := s.cqRing(a)
	if st != StOK {
		return st
	}
	// The work the guest posted before this command counts: its WQEs
	// are taken and its completions moved into the ring first, so that
	// what the CQ holds is known (ibv_resize_cq fails below it, and a
	// user-space post reaches the device only through its doorbell).
	if s.live() {
		s.serviceQPs()
		s.settle()
		s.moveCQ(cq)
	}
	// The engine CQ holds what completes from here on: the worker has
	// the ring to itself until the sink is back, then hands the guest
	// the held completions in the new ring (or the old one, on error).
	cq.cq.SetSink(nil)
	defer func() {
		cq.cq.SetSink(cq)
		s.moveCQ(cq)
	}()
	ram := s.v.ram
	cons, err := ram.Load32(cq.dbrec + 4)
	if err != nil {
		return StEFAULT
	}
	pending := cq.prod - cons
	if pending > cq.depth || uint64(pending)+uint64(cq.cq.Len()) > uint64(a.Depth) {
		return StEINVAL // a bad consumer index, or the new ring is too small
	}
	cost := cqCost(a.Depth) + int64(len(pages))*8
	if !s.mem.charge(cost) {
		return StENOMEM
	}
	if err := cq.cq.Resize(int(a.Depth)); err != nil {
		s.mem.refund(cost)
		return status(err)
	}
	s.mem.refund(cq.cost)
	cq.cost = cost
	nr := &gcq{ring: a.RingGPA, pages: pages, depth: a.Depth}
	var e [cqeSize]byte
	for i := uint32(0); i < pending; i++ {
		if ram.ReadAt(e[:], cq.slot(cons+i)) != nil || ram.WriteAt(e[:], nr.slot(i)) != nil {
			return StEFAULT
		}
	}
	ram.Store32(a.DBRecGPA+4, 0)
	ram.Store32(a.DBRecGPA+8, 0)
	ram.Store32(a.DBRecGPA+12, cq.events) // the count goes on (ABI 1.7)
	ram.Store32(a.DBRecGPA, pending)      // release: the entries are in place
	cq.mu.Lock()
	cq.ring, cq.pages, cq.dbrec, cq.depth, cq.prod = a.RingGPA, pages, a.DBRecGPA, a.Depth, pending
	cq.mu.Unlock()
	return StOK
}
