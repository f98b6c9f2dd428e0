package device

import (
	"sync/atomic"

	"github.com/PacketFive/hinic/internal/ivshmem"
)

// Receive doorbells the device does not need (ABI 1.18,
// hicain_wq_dbrec.no_db).
//
// A guest that posts a receive WQE rings HICAIN_DB_QP so that the device
// fetches it into the engine. Under TCG that doorbell is the dearest part
// of a receive: an MMIO exit in the guest and a wake-up of the backend,
// once per message for a consumer that reposts each buffer it gets back.
// The device needs the WQEs only before the engine runs out, so for an RQ
// or SRQ of a 1.18 driver it says so in the dbrec's no_db word:
//
//   - after a fetch that leaves the engine holding at least high WRs,
//     half the queue (and the QP able to take them: not RESET or ERR, not
//     fatal; an SRQ with no limit armed), it stores 1, and the guest
//     posts without ringing;
//   - when the engine retires a WR and fewer than low remain, a quarter
//     of the queue, or the QP
//     enters ERR (rdma.QPInitAttr.OnRecvLow), it stores 0 and kicks its
//     own doorbell eventfd, so that the epoll goroutine fetches what the
//     guest posted meanwhile; from then on the guest rings again until a
//     fetch restores the stock.
//
// The quarter of the queue between the kick and an empty queue is the
// slack the fetch has to arrive in: a burst of UD datagrams that ran the
// engine dry would be lost (an RC SEND would get an RNR NAK), so it
// grows with the queue, as a sender's burst does.
//
// The guest stores prod, then a full barrier, then reads no_db; the
// device stores no_db, then (for 1) reads the engine's stock again or
// (for 0) fetches the ring after its kick. Either the guest sees 0 and
// rings, or the device's later fetch sees the guest's prod: no WQE waits
// for a doorbell that never comes. The device only writes the word,
// never reads it.

// recvNotify is the device's side of one receive queue's no_db word.
type recvNotify struct {
	// at is the GPA of the no_db word, 0 when the queue rings always (a
	// driver before 1.18, a queue shallower than minNoDBDepth, a TM SRQ).
	// Atomic: a resized SRQ moves its dbrec while the engine may call
	// want.
	at   atomic.Uint64
	on   atomic.Bool // the word says 1
	low  int         // fewer engine WRs than this: want doorbells again
	high int         // at least this many after a fetch: store 1
}

// minNoDBDepth is the shallowest queue that goes without doorbells: below
// it the low mark would leave too little slack for the fetch.
const minNoDBDepth = 16

// noDBMarks are the low and high marks of a receive queue of depth WRs,
// 0 when it rings always.
func noDBMarks(depth uint32) (low, high int) {
	if depth < minNoDBDepth {
		return 0, 0
	}
	return int(depth / 4), int(depth / 2)
}

// init points n at the dbrec at db (its no_db word) when the driver
// speaks 1.18 and the queue is deep enough, and stores 0 there: a driver
// may reuse dbrec memory without zeroing it. It returns the engine's low
// mark (0: the engine need not call back).
func (n *recvNotify) init(s *session, db uint64, depth uint32) int {
	n.on.Store(false)
	n.low, n.high = noDBMarks(depth)
	if !s.driverAtLeast(18) || n.low == 0 {
		n.low, n.high = 0, 0
		n.at.Store(0)
		return 0
	}
	n.at.Store(db + 8)
	s.v.ram.Store32(db+8, 0)
	return n.low
}

// want is the engine's call (OnRecvLow, OnLow): the queue runs short or
// its QP entered ERR. Any goroutine; it takes no lock.
func (n *recvNotify) want(s *session) {
	if !n.on.CompareAndSwap(true, false) {
		return
	}
	if at := n.at.Load(); at != 0 {
		s.v.ram.Store32(at, 0)
	}
	s.v.stats.recvFetches.Add(1)
	s.kickQP()
}

// kickQP rings the QP doorbell the guest rings, from the device's side:
// the epoll goroutine wakes and fetches every ring (serviceQPs). Any
// goroutine; the engine's uses it where it must not fetch itself.
func (s *session) kickQP() {
	ivshmem.Signal(s.bar.DB[DBQP])
}

// off stores 0 for good reasons of the device's own (a QP to RESET, an
// SRQ's limit armed): the guest rings until a fetch settles it again.
// s.work is held.
func (n *recvNotify) off(s *session) {
	n.on.Store(false)
	if at := n.at.Load(); at != 0 {
		s.v.ram.Store32(at, 0)
	}
}

// settle runs after a fetch (s.work held): it stores 1 when the engine
// holds at least high WRs and ready says the queue may go without
// doorbells, then looks again, and takes the 1 back (want: with a kick)
// when the engine ran short meanwhile.
func (n *recvNotify) settle(s *session, held func() int, ready func() bool) {
	at := n.at.Load()
	if at == 0 || n.on.Load() || !ready() || held() < n.high {
		return
	}
	n.on.Store(true)
	s.v.ram.Store32(at, 1)
	if held() < n.low || !ready() {
		n.want(s)
	}
}

// wqDBRecLen is the size of the guest's struct hicain_wq_dbrec: 16 bytes
// from ABI 1.18 (no_db), 8 before.
func (s *session) wqDBRecLen() uint64 {
	if s.driverAtLeast(18) {
		return 16
	}
	return 8
}

// driverAtLeast reports whether the guest's driver speaks ABI 1.minor or
// later (its driver_abi word, set before DRIVER_OK).
func (s *session) driverAtLeast(minor uint32) bool {
	abi := atomic.LoadUint32(&s.hdr.DriverABI)
	return abi>>16 == ABIMajor && abi&0xffff >= minor
}
