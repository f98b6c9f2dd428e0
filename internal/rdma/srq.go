package rdma

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// SRQInitAttr are the creation attributes of a shared receive queue
// (struct ibv_srq_init_attr).
type SRQInitAttr struct {
	MaxWR int // receive WRs the SRQ holds
	// XRCD, when set, makes this an XRC SRQ (IBV_SRQT_XRC): XRC target
	// QPs of the domain deliver into it the requests that name its
	// number (Num), and its receive completions go to CQ (required
	// then). The PD checks the receive lkeys and the R_Keys of remote
	// accesses through those target QPs.
	XRCD   *XRCD
	CQ     *CQ
	MaxSGE int // scatter elements per WR
	// Limit arms the limit event at creation: EventSRQLimitReached is
	// raised once when fewer than Limit WRs remain. Zero leaves it unarmed.
	Limit int
	// TM, when set, makes this a tag-matching SRQ (IBV_SRQT_TM, tm.go):
	// CQ (required then) gets the completions of its tag operations.
	TM *TMAttr
	// OnLow, when set, runs on the engine's goroutine whenever a WR is
	// taken and fewer than Low remain, as QPInitAttr.OnRecvLow.
	OnLow func()
	Low   int
	// OnEmpty is QPInitAttr.OnRecvEmpty for the SRQ: it may PostRecv
	// to the SRQ and reports whether it did.
	OnEmpty func() bool
}

// SRQAttr are the attributes of an SRQ (struct ibv_srq_attr).
type SRQAttr struct {
	MaxWR  int
	MaxSGE int
	Limit  int // 0: the limit event is not armed
}

// SRQAttrMask selects what SRQ.Modify changes (enum ibv_srq_attr_mask).
type SRQAttrMask uint32

// SRQ attribute mask bits.
const (
	SRQAttrMaxWR SRQAttrMask = 1 << 0 // IBV_SRQ_MAX_WR: resize the queue
	SRQAttrLimit SRQAttrMask = 1 << 1 // IBV_SRQ_LIMIT: arm the limit event
)

// SRQ is a shared receive queue: receive WRs that every QP created with it
// consumes in the order they were posted (IBA 10.2.9). A SEND (or a
// WRITE with immediate) takes the WR at the head when its first packet
// arrives; the WR then belongs to that QP until the message completes.
//
// Ownership: PostRecv, Modify, Query and Destroy are safe for concurrent
// use; the ring is guarded by mu (posters, the engine taking a WR, and a
// resize all hold it briefly).
type SRQ struct {
	dev    *Device
	pd     *PD
	handle uint32

	mu     sync.Mutex
	ring   slots[recvWQE]
	maxWR  int
	maxSGE int
	prod   uint32 // WRs posted (free-running)
	cons   uint32 // WRs taken by QPs
	limit  int    // armed limit, 0 = disarmed
	onLow  func() // SRQInitAttr.OnLow
	low    int
	// onEmpty is SRQInitAttr.OnEmpty.
	onEmpty func() bool

	refs atomic.Int32 // QPs using the SRQ
	dead atomic.Bool

	xrcd *XRCD // XRC SRQ: its domain and completion queue
	cq   *CQ   // XRC and TM SRQs
	tm   *tmState
}

// Num returns the SRQ number an XRC request names in its XRCETH
// (ibv_get_srq_num). It is 0 for an SRQ that is not an XRC SRQ.
func (s *SRQ) Num() uint32 {
	if s.xrcd == nil {
		return 0
	}
	return s.handle & xrcSRQNMask
}

// XRCD returns the XRC domain of an XRC SRQ, or nil.
func (s *SRQ) XRCD() *XRCD { return s.xrcd }

// Handle returns a number that identifies the SRQ on its device.
func (s *SRQ) Handle() uint32 { return s.handle }

// PD returns the SRQ's protection domain.
func (s *SRQ) PD() *PD { return s.pd }

// CreateSRQ creates a shared receive queue in pd (ibv_create_srq).
func (d *Device) CreateSRQ(pd *PD, attr SRQInitAttr) (*SRQ, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	if err := d.checkPD(pd); err != nil {
		return nil, fmt.Errorf("rdma: create SRQ: %w", err)
	}
	c := &d.cfg
	switch {
	case attr.MaxWR < 1 || attr.MaxWR > c.MaxSRQWR:
		return nil, fmt.Errorf("rdma: create SRQ: MaxWR %d outside 1..%d: %w", attr.MaxWR, c.MaxSRQWR, ErrInvalid)
	case attr.MaxSGE < 0 || attr.MaxSGE > c.MaxSRQSGE:
		return nil, fmt.Errorf("rdma: create SRQ: MaxSGE %d outside 0..%d: %w", attr.MaxSGE, c.MaxSRQSGE, ErrInvalid)
	case attr.Limit < 0 || attr.Limit > attr.MaxWR:
		return nil, fmt.Errorf("rdma: create SRQ: Limit %d outside 0..MaxWR (%d): %w", attr.Limit, attr.MaxWR, ErrInvalid)
	}
	if attr.XRCD != nil {
		if err := d.checkXRCD(attr.XRCD); err != nil {
			return nil, fmt.Errorf("rdma: create XRC SRQ: %w", err)
		}
		if attr.CQ == nil || attr.CQ.dev != d {
			return nil, fmt.Errorf("rdma: create XRC SRQ: a CQ of this device is required: %w", ErrInvalid)
		}
	}
	if tm := attr.TM; tm != nil {
		switch {
		case attr.XRCD != nil:
			return nil, fmt.Errorf("rdma: create TM SRQ: it cannot be an XRC SRQ too: %w", ErrInvalid)
		case attr.CQ == nil || attr.CQ.dev != d:
			return nil, fmt.Errorf("rdma: create TM SRQ: a CQ of this device is required: %w", ErrInvalid)
		case tm.MaxNumTags < 1 || tm.MaxNumTags > TMMaxNumTags:
			return nil, fmt.Errorf("rdma: create TM SRQ: MaxNumTags %d outside 1..%d: %w", tm.MaxNumTags, TMMaxNumTags, ErrInvalid)
		case tm.MaxOps < 1 || tm.MaxOps > TMMaxOps:
			return nil, fmt.Errorf("rdma: create TM SRQ: MaxOps %d outside 1..%d: %w", tm.MaxOps, TMMaxOps, ErrInvalid)
		}
	}
	s := &SRQ{dev: d, pd: pd, maxWR: attr.MaxWR, maxSGE: max(attr.MaxSGE, 1), limit: attr.Limit,
		onLow: attr.OnLow, low: attr.Low, onEmpty: attr.OnEmpty}
	if tm := attr.TM; tm != nil {
		s.tm = &tmState{maxTags: tm.MaxNumTags, maxOps: tm.MaxOps, tags: make([]tmTag, tm.MaxNumTags),
			order: make([]uint32, 0, tm.MaxNumTags)}
		s.cq = attr.CQ
	}
	s.ring = newSlots[recvWQE](attr.MaxWR)
	d.mu.Lock()
	if d.nSRQ >= c.MaxSRQ {
		d.mu.Unlock()
		return nil, fmt.Errorf("rdma: create SRQ: %d SRQs exist (MaxSRQ): %w", d.nSRQ, ErrNoResources)
	}
	if x := attr.XRCD; x != nil {
		if x.dead.Load() {
			d.mu.Unlock()
			return nil, fmt.Errorf("rdma: create XRC SRQ: XRCD %d deallocated: %w", x.handle, ErrInvalid)
		}
		s.xrcd, s.cq = x, attr.CQ
		x.refs.Add(1)
		attr.CQ.refs.Add(1)
	}
	if s.tm != nil {
		attr.CQ.refs.Add(1)
	}
	d.nSRQ++
	d.srqID++
	if s.xrcd != nil && d.srqID&xrcSRQNMask == 0 {
		d.srqID++ // XRC SRQ number 0 is never handed out
	}
	s.handle = d.srqID
	pd.refs.Add(1)
	d.mu.Unlock()
	if s.xrcd != nil {
		var busy bool
		err := d.eng.do(func() {
			n := s.Num()
			if busy = d.eng.xsrqs[n] != nil; !busy {
				d.eng.xsrqs[n] = s
			}
		})
		if err == nil && busy {
			err = fmt.Errorf("XRC SRQ number %#x in use: %w", s.Num(), ErrBusy)
		}
		if err != nil {
			s.xrcd = nil // not registered: release only the counts
			d.mu.Lock()
			d.nSRQ--
			pd.refs.Add(-1)
			attr.XRCD.refs.Add(-1)
			attr.CQ.refs.Add(-1)
			d.mu.Unlock()
			return nil, fmt.Errorf("rdma: create XRC SRQ: %w", err)
		}
	}
	return s, nil
}

// Room reports whether PostRecv has room for one more request now (see
// QP.SendRoom).
func (s *SRQ) Room() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int(s.prod-s.cons) < s.maxWR
}

// PostRecv posts receive work requests to the SRQ (ibv_post_srq_recv),
// with the checks and error reporting of QP.PostRecv.
func (s *SRQ) PostRecv(wrs []RecvWR) error {
	if s.dev.closed.Load() {
		return &PostError{Index: 0, Err: ErrClosed}
	}
	if s.dead.Load() {
		return &PostError{Index: 0, Err: fmt.Errorf("post recv to SRQ %d: destroyed: %w", s.handle, ErrInvalid)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range wrs {
		wr := &wrs[i]
		if len(wr.SGList) > s.maxSGE {
			return &PostError{Index: i, Err: fmt.Errorf("%d SGEs, SRQ %d allows %d: %w", len(wr.SGList), s.handle, s.maxSGE, ErrInvalid)}
		}
		if int(s.prod-s.cons) >= s.maxWR {
			return &PostError{Index: i, Err: fmt.Errorf("SRQ %d full (%d WRs): %w", s.handle, s.maxWR, ErrNoResources)}
		}
		w := s.ring.slot(s.prod)
		w.wrID = wr.WRID
		w.sgeBuf = sgeSlots(w.sgeBuf, len(wr.SGList))
		w.sge = w.sgeBuf[:len(wr.SGList)]
		copy(w.sge, wr.SGList)
		w.length = 0
		for _, g := range wr.SGList {
			w.length += uint64(g.Length)
		}
		s.prod++
	}
	return nil
}

// Modify resizes the SRQ (SRQAttrMaxWR; it cannot shrink below the WRs it
// holds) and/or arms the limit event (SRQAttrLimit; 0 disarms it)
// (ibv_modify_srq).
func (s *SRQ) Modify(attr SRQAttr, mask SRQAttrMask) error {
	if s.dead.Load() {
		return fmt.Errorf("rdma: modify SRQ %d: destroyed: %w", s.handle, ErrInvalid)
	}
	if mask&^(SRQAttrMaxWR|SRQAttrLimit) != 0 {
		return fmt.Errorf("rdma: modify SRQ %d: unknown mask bits %#x: %w", s.handle, uint32(mask&^(SRQAttrMaxWR|SRQAttrLimit)), ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	maxWR := s.maxWR
	if mask&SRQAttrMaxWR != 0 {
		held := int(s.prod - s.cons)
		if attr.MaxWR < 1 || attr.MaxWR > s.dev.cfg.MaxSRQWR || attr.MaxWR < held {
			return fmt.Errorf("rdma: modify SRQ %d: MaxWR %d outside %d..%d (it holds %d WRs): %w",
				s.handle, attr.MaxWR, max(held, 1), s.dev.cfg.MaxSRQWR, held, ErrInvalid)
		}
		maxWR = attr.MaxWR
	}
	if mask&SRQAttrLimit != 0 && (attr.Limit < 0 || attr.Limit > maxWR) {
		return fmt.Errorf("rdma: modify SRQ %d: Limit %d outside 0..%d: %w", s.handle, attr.Limit, maxWR, ErrInvalid)
	}
	if maxWR != s.maxWR {
		ring := newSlots[recvWQE](maxWR)
		n := uint32(0)
		for c := s.cons; c != s.prod; c++ {
			o, w := s.ring.at(c), ring.slot(n)
			w.wrID, w.length = o.wrID, o.length
			w.sgeBuf = sgeSlots(w.sgeBuf, len(o.sge))
			w.sge = w.sgeBuf[:len(o.sge)]
			copy(w.sge, o.sge)
			n++
		}
		s.ring, s.cons, s.prod, s.maxWR = ring, 0, n, maxWR
	}
	if mask&SRQAttrLimit != 0 {
		s.limit = attr.Limit
	}
	return nil
}

// Query returns the SRQ's attributes (ibv_query_srq).
func (s *SRQ) Query() SRQAttr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SRQAttr{MaxWR: s.maxWR, MaxSGE: s.maxSGE, Limit: s.limit}
}

// Len returns the number of receive WRs waiting in the SRQ.
func (s *SRQ) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int(s.prod - s.cons)
}

// Destroy destroys the SRQ (ibv_destroy_srq). It fails with ErrBusy while
// QPs use it; posted WRs are discarded without completions.
func (s *SRQ) Destroy() error {
	d := s.dev
	d.mu.Lock()
	if n := s.refs.Load(); n > 0 {
		d.mu.Unlock()
		return fmt.Errorf("rdma: destroy SRQ %d: %d QPs use it: %w", s.handle, n, ErrBusy)
	}
	if !s.dead.CompareAndSwap(false, true) {
		d.mu.Unlock()
		return fmt.Errorf("rdma: destroy SRQ %d: already destroyed: %w", s.handle, ErrInvalid)
	}
	d.nSRQ--
	s.pd.refs.Add(-1)
	if s.xrcd != nil {
		s.xrcd.refs.Add(-1)
	}
	if s.cq != nil {
		s.cq.refs.Add(-1)
	}
	d.mu.Unlock()
	if s.xrcd != nil {
		// Requests that name the number meanwhile find it dead
		// (xrcSelect); after Close the engine's table is gone anyway.
		_ = d.eng.do(func() { delete(d.eng.xsrqs, s.Num()) })
	}
	return nil
}

// take moves the WR at the head of the SRQ into dst (a QP's holder) and
// reports whether there was one. Engine goroutine; it raises the limit
// event when the queue falls below an armed limit.
func (s *SRQ) take(dst *recvWQE) bool {
	s.mu.Lock()
	if s.cons == s.prod {
		s.mu.Unlock()
		return false
	}
	w := s.ring.at(s.cons)
	dst.wrID, dst.length = w.wrID, w.length
	dst.sge = dst.sgeBuf[:len(w.sge)]
	copy(dst.sge, w.sge)
	s.cons++
	left := int(s.prod - s.cons)
	if s.limit > 0 && left < s.limit && s.onEmpty != nil {
		// The limit counts what the consumer posted: WRs that OnEmpty
		// can still bring (a device that has not fetched its guest's
		// ring yet) count too, so they are brought first.
		s.mu.Unlock()
		s.refill()
		s.mu.Lock()
		left = int(s.prod - s.cons)
	}
	fire := s.limit > 0 && left < s.limit
	if fire {
		s.limit = 0 // one event per arming (IBA 11.5.2.4)
	}
	s.mu.Unlock()
	if fire {
		s.dev.raise(AsyncEvent{Type: EventSRQLimitReached, SRQ: s})
	}
	if s.onLow != nil && left < s.low {
		s.onLow()
	}
	return true
}

// refill asks the SRQ's OnEmpty for WRs (engine).
func (s *SRQ) refill() bool {
	return s.onEmpty != nil && s.onEmpty()
}

// Held is the number of WRs posted to the SRQ and not yet taken.
func (s *SRQ) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int(s.prod - s.cons)
}

// empty reports whether the SRQ holds no WR (engine).
func (s *SRQ) empty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cons == s.prod
}
