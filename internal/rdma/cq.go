package rdma

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// WC is a work completion (struct ibv_wc).
type WC struct {
	WRID      uint64
	Status    WCStatus
	Opcode    WCOpcode
	VendorErr uint32
	ByteLen   uint32
	// ImmData is the immediate data as the number the sender put in
	// SendWR.ImmData (it travels big-endian in the ImmDt header).
	ImmData   uint32
	QPNum     uint32
	SrcQP     uint32 // for RC: the remote QP number
	WCFlags   WCFlags
	PKeyIndex uint16
	SLID      uint16
	// SL is the LRH's service level on InfiniBand. On RoCEv2, where a
	// packet has no LRH, a UD receive carries the L3 header type here
	// instead, as ConnectX NICs report it (SLRoCEIPv4, SLRoCEIPv6):
	// UCX's UD transport reads it to find the destination GID in the
	// receive buffer's GRH area, and drops the datagram without it.
	SL           uint8
	DLIDPathBits uint8
	// Tag and TMAppCtx are a tag-matching receive's TMH tag and app_ctx
	// (ibv_wc_read_tm_info), set when WCFlags has WCTMMatch.
	Tag      uint64
	TMAppCtx uint32
	// TMHandle is the tag handle of a TM_ADD, a TM_DEL, and a TM_RECV
	// with WCTMMatch (the handle is free again then).
	TMHandle uint32
}

// The L3 header types of a RoCEv2 UD receive, in WC.SL.
const (
	SLRoCEIPv6 = 0x1
	SLRoCEIPv4 = 0x2
)

// CQ is a completion queue: a bounded ring the engine writes and Poll
// reads. Safe for concurrent use (a mutex guards the ring; the engine holds
// it only to append one entry).
type CQ struct {
	dev *Device
	ch  *CompChannel
	cqe int

	mu            sync.Mutex
	ring          []WC
	head, count   int
	armed         bool
	solicitedOnly bool
	dead          bool
	overrun       bool // a completion was lost (EventCQErr raised)
	sink          CQSink

	refs atomic.Int32 // QPs using the CQ
}

// CreateCQ creates a completion queue with room for cqe completions. ch,
// when not nil, receives an event each time the CQ is armed (ReqNotify) and
// gets a matching completion.
func (d *Device) CreateCQ(cqe int, ch *CompChannel) (*CQ, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	if cqe < 1 || cqe > d.cfg.MaxCQE {
		return nil, fmt.Errorf("rdma: create CQ: cqe %d outside 1..%d: %w", cqe, d.cfg.MaxCQE, ErrInvalid)
	}
	if ch != nil && ch.dev != d {
		return nil, fmt.Errorf("rdma: create CQ: completion channel of another device: %w", ErrInvalid)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.nCQ >= d.cfg.MaxCQ {
		return nil, fmt.Errorf("rdma: create CQ: %d CQs exist (MaxCQ): %w", d.nCQ, ErrNoResources)
	}
	d.nCQ++
	return &CQ{dev: d, ch: ch, cqe: cqe, ring: make([]WC, min(cqe, cqFirstRing))}, nil
}

// cqFirstRing is the ring a CQ starts with; push doubles it up to the
// CQ's size as completions wait, so a large CQ costs memory only once
// its consumer falls behind (a guest of the device backend sizes CQs).
const cqFirstRing = 64

// growLocked doubles the ring, up to cqe entries, keeping the pending
// completions in order; cq.mu is held.
func (cq *CQ) growLocked() {
	ring := make([]WC, min(2*len(cq.ring), cq.cqe))
	for i := range cq.count {
		ring[i] = cq.ring[(cq.head+i)%len(cq.ring)]
	}
	cq.ring, cq.head = ring, 0
}

// CQE returns the number of completions the CQ holds.
func (cq *CQ) CQE() int {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	return cq.cqe
}

// Resize changes the number of completions the CQ holds (ibv_resize_cq),
// keeping those not yet polled, in order. It fails with ErrInvalid for a
// size outside 1..MaxCQE or below the completions the CQ holds now.
func (cq *CQ) Resize(cqe int) error {
	d := cq.dev
	if cqe < 1 || cqe > d.cfg.MaxCQE {
		return fmt.Errorf("rdma: resize CQ: cqe %d outside 1..%d: %w", cqe, d.cfg.MaxCQE, ErrInvalid)
	}
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.dead {
		return fmt.Errorf("rdma: resize CQ: destroyed: %w", ErrInvalid)
	}
	if cqe < cq.count {
		return fmt.Errorf("rdma: resize CQ: cqe %d below the %d completions it holds: %w", cqe, cq.count, ErrInvalid)
	}
	ring := make([]WC, min(cqe, max(cq.count, cqFirstRing)))
	for i := range cq.count {
		ring[i] = cq.ring[(cq.head+i)%len(cq.ring)]
	}
	cq.ring, cq.head, cq.cqe = ring, 0, cqe
	return nil
}

// Len is how many completions the CQ holds.
func (cq *CQ) Len() int {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	return cq.count
}

// Poll moves up to len(wc) completions, oldest first, into wc and returns
// how many it moved (ibv_poll_cq).
func (cq *CQ) Poll(wc []WC) int {
	cq.mu.Lock()
	n := min(len(wc), cq.count)
	for i := 0; i < n; i++ {
		wc[i] = cq.ring[cq.head]
		cq.head++
		if cq.head == len(cq.ring) {
			cq.head = 0
		}
	}
	cq.count -= n
	cq.mu.Unlock()
	return n
}

// ReqNotify arms the CQ (ibv_req_notify_cq): the next completion added
// (with solicitedOnly, the next solicited receive completion or any error
// completion) sends one event to the CQ's completion channel, and disarms.
func (cq *CQ) ReqNotify(solicitedOnly bool) error {
	if cq.ch == nil {
		return fmt.Errorf("rdma: req notify CQ: no completion channel: %w", ErrInvalid)
	}
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.dead {
		return fmt.Errorf("rdma: req notify CQ: destroyed: %w", ErrInvalid)
	}
	if !cq.armed {
		cq.armed, cq.solicitedOnly = true, solicitedOnly
	} else if !solicitedOnly {
		cq.solicitedOnly = false // "next completion" is the wider request
	}
	return nil
}

// Destroy frees the CQ. It fails with ErrBusy while QPs use it.
func (cq *CQ) Destroy() error {
	d := cq.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if n := cq.refs.Load(); n > 0 {
		return fmt.Errorf("rdma: destroy CQ: %d QPs still use it: %w", n, ErrBusy)
	}
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.dead {
		return fmt.Errorf("rdma: destroy CQ: already destroyed: %w", ErrInvalid)
	}
	cq.dead = true
	d.nCQ--
	return nil
}

// CQSink takes completions straight from the engine into a ring of the
// consumer's own, such as a guest's CQ ring in the device backend: the
// goroutine that completes the work writes the completion where its
// consumer reads it, with no hop through a completion channel.
//
// Complete is called with the CQ's lock held, from the engine goroutine
// (or from Flush's caller), one completion at a time and in completion
// order; it must not call back into the CQ. It reports whether it took
// wc: false means its ring is full, and the CQ holds wc and every later
// completion, in order, until Flush hands them over. The CQ's own bound
// still applies to what it holds: past it completions are lost, counted
// and reported with EventCQErr, as without a sink.
type CQSink interface {
	Complete(wc WC) bool // by value: a pointer through an interface would move the engine's WC to the heap
}

// SetSink sends the CQ's completions to sink (nil: keep them for Poll).
// When it returns, no call of the previous sink is running or will run.
// Completions the CQ holds stay there until Flush or Poll.
func (cq *CQ) SetSink(sink CQSink) {
	cq.mu.Lock()
	cq.sink = sink
	cq.mu.Unlock()
}

// Flush hands the completions the CQ holds to its sink, oldest first,
// until the sink refuses one; it returns how many are still held. Safe
// for concurrent use with the engine.
func (cq *CQ) Flush() int {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	for cq.sink != nil && cq.count > 0 && cq.sink.Complete(cq.ring[cq.head]) {
		cq.head++
		if cq.head == len(cq.ring) {
			cq.head = 0
		}
		cq.count--
	}
	return cq.count
}

// push appends a completion (engine goroutine). A full CQ loses the
// completion, counts CQOverflows and raises EventCQErr the first time.
// With a sink, a completion goes straight to it while the CQ holds none
// (so order is kept); the CQ holds it when the sink refuses.
func (cq *CQ) push(wc *WC, solicited bool) {
	d := cq.dev
	if wc.Status != WCSuccess {
		d.ctr.completionErrors.Add(1)
	}
	cq.mu.Lock()
	if cq.sink != nil && cq.count == 0 && cq.sink.Complete(*wc) {
		cq.mu.Unlock()
		return
	}
	if cq.count == len(cq.ring) && len(cq.ring) < cq.cqe {
		cq.growLocked()
	}
	if cq.count == len(cq.ring) {
		first := !cq.overrun
		cq.overrun = true
		cq.mu.Unlock()
		d.ctr.cqOverflows.Add(1)
		if first {
			// The completion is lost: the consumer learns it from the
			// CQ error event (IBA 11.6.3.1), raised once per CQ.
			d.raise(AsyncEvent{Type: EventCQErr, CQ: cq})
		}
		return
	}
	i := cq.head + cq.count
	if i >= len(cq.ring) {
		i -= len(cq.ring)
	}
	cq.ring[i] = *wc
	cq.count++
	notify := cq.armed && (!cq.solicitedOnly || solicited || wc.Status != WCSuccess)
	if notify {
		cq.armed = false
	}
	cq.mu.Unlock()
	if notify {
		cq.ch.notify(cq)
	}
}

// CompChannel delivers CQ events (ibv_comp_channel). Receiving from
// Events is ibv_get_cq_event and ibv_ack_cq_events together: there is
// nothing to acknowledge. Safe for concurrent use.
type CompChannel struct {
	dev    *Device
	events chan *CQ
}

// NewCompChannel creates a completion channel. Its event queue holds
// MaxCQ events; since an event needs a ReqNotify, a consumer that reads
// events before re-arming never fills it. An event that finds it full is
// dropped.
func (d *Device) NewCompChannel() *CompChannel {
	return &CompChannel{dev: d, events: make(chan *CQ, d.cfg.MaxCQ)}
}

// Events returns the channel on which armed CQs that got a completion
// arrive, one event per arming.
func (ch *CompChannel) Events() <-chan *CQ { return ch.events }

func (ch *CompChannel) notify(cq *CQ) {
	select {
	case ch.events <- cq:
	default:
	}
}
