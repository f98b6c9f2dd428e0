package device

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/PacketFive/hinic/internal/ibagent"
	"github.com/PacketFive/hinic/internal/ivshmem"
	"github.com/PacketFive/hinic/internal/rdma"
)

// session is one connected guest on a vNIC: its BAR2 (shared memory),
// eventfds, engine device and verbs objects.
//
// Ownership: whoever holds work owns the object tables and the admin and
// work queue consumer state: the epoll goroutine, which runs the
// doorbells it wakes for itself, or the worker (retries, the tick, engine
// async events); the vNIC's fabric rx goroutine owns the L2 RX ring
// (l2mu). The CQ rings are shared (gcq.mu): the engine writes
// its completions there itself, the worker those it makes or held back.
// The event queue is shared (eqMu), and so are the LIVE and LINK_UP bits
// of dev_status with the events that announce them (goLive, portDown).
// Engine async events reach the worker through the engine's channel.
type session struct {
	v      *VNIC
	conn   *net.UnixConn
	peerID int
	bar    *ivshmem.Device // BAR2 and the eventfds
	shm    []byte          // bar.SHM until release, which clears it under l2mu
	hdr    *DevHdr
	dev    *rdma.Device                // worker-owned (under work)
	rxDev  atomic.Pointer[rdma.Device] // what the fabric rx goroutine delivers to
	// portCtr are the port counters of rxDev (QUERY_COUNTERS).
	portCtr atomic.Pointer[portCounters]
	mac     atomic.Uint64 // the engine's MAC, for RoCE steering

	// blocked says some queue left WQEs in its ring because the engine
	// queue was full (worker sets, retryBlocked clears): completions
	// then wake the worker to retry.
	blocked atomic.Bool
	retry   chan struct{} // completions freed room a blocked queue waits for
	done    chan struct{}
	wg      sync.WaitGroup

	// work is held by the goroutine running the device: the epoll
	// goroutine for doorbells, the worker for retries, the tick and
	// async events. It guards the fields marked "Worker-owned" below,
	// the object tables and s.dev.
	work sync.Mutex

	eqMu sync.Mutex

	statMu sync.Mutex // guards snap
	snap   sessionSnap
	l2mu   sync.Mutex

	// Worker-owned.
	adminCons uint32
	adminCQ   uint32
	l2TxCons  uint32
	l2RxCons  uint32 // under l2mu
	txBuf     [L2MaxFrame]byte
	pds       map[uint32]*rdma.PD
	mrs       map[uint32]*rdma.MR
	mrCost    map[uint32]int64    // budget charged per MR, by lkey
	mws       map[uint32]*rdma.MW // by R_Key without its variant byte
	cqs       map[uint32]*gcq
	qps       map[uint32]*gqp
	ahs       map[uint32]*gah
	srqs      map[uint32]*gsrq
	xrcds     map[uint32]*gxrcd
	flows     map[uint32]*gflow // ABI 1.16, raw.go
	nRawQP    int               // raw packet QPs in qps
	nextCQ    atomic.Uint32     // handle counters; atomic only for tests' hooks
	nextAH    atomic.Uint32
	nextFlow  atomic.Uint32
	devMAC    [6]byte // the engine's MAC and path MTU limit (SET_ADDR)
	devMTU    int
	lim       limits
	mem       budget
	scratch   wqeScratch
}

// wqeScratch is where the worker decodes a WQE on its way to the engine,
// so that taking work from the rings allocates nothing. The engine copies
// what it keeps (the SGE list) when the WR is posted.
type wqeScratch struct {
	send   SendWQE
	recv   RecvWQE
	av     WQEAV
	sendWR [1]rdma.SendWR
	recvWR [1]rdma.RecvWR
	sges   [32]rdma.SGE
	raw    [32 * sgeSize]byte
}

// MaxAH is the number of address handles one guest may hold.
const MaxAH = 1024

// limits are the device limits the backend enforces (worker-owned). They
// are set with the engine and published in BAR2 for the driver, but
// never read back from BAR2: the guest can write there.
type limits struct {
	maxCQ, maxAH, maxQPWR, maxCQE, maxSGE, maxInline uint32
}

func newLimits(a rdma.DeviceAttr) limits {
	return limits{maxCQ: uint32(a.MaxCQ), maxAH: uint32(min(a.MaxAH, MaxAH)), maxQPWR: uint32(a.MaxQPWR),
		maxCQE: uint32(a.MaxCQE), maxSGE: uint32(a.MaxSGE), maxInline: uint32(a.MaxInlineData)}
}

// nextHandle returns the first handle from next on that is neither 0
// nor in used, and moves next past it. The counter may wrap after 2^32
// creations; a handle the guest still holds is never given out again.
// The tables are bounded (limits), so a free handle is near.
func nextHandle[V any](next *atomic.Uint32, used map[uint32]V) uint32 {
	for {
		h := next.Add(1) - 1
		if _, live := used[h]; h != 0 && !live {
			return h
		}
	}
}

// gcq is a guest CQ: an engine CQ whose completions go straight into the
// ring in guest memory (gcq is the engine CQ's sink), written by the
// goroutine that completes the work: the engine's, or the worker for the
// completions it makes itself (errorCQE) and those the engine CQ held
// while the ring was full (moveCQ).
//
// Locking: mu guards the ring state below (prod, events, stalled and,
// while a sink is attached, the ring's place and size), because the
// engine and the worker both write the ring. The engine calls Complete
// with the engine CQ's lock held, so the order is engine CQ, then mu:
// nothing holding mu calls into the engine CQ.
type gcq struct {
	s     *session
	cqn   uint32
	cq    *rdma.CQ
	users int
	cost  int64 // budget charged

	mu      sync.Mutex
	ring    uint64   // the ring's GPA, when pages is nil
	pages   []uint64 // the ring's pages in order (CQFPaged), checked at creation
	dbrec   uint64
	depth   uint32
	vector  int
	prod    uint32
	events  uint32 // interrupts raised: dbrec events (ABI 1.7)
	stalled bool   // the ring was full: the engine CQ holds completions
}

// Complete writes one engine completion to the guest ring and raises the
// CQ's interrupt if the guest armed it (rdma.CQSink: engine goroutine,
// or the worker in moveCQ). With the ring full it refuses: the engine CQ
// keeps the completion and the ring is stalled until the guest consumes
// (doorbell 3 or the worker's tick). It wakes the worker when a queue
// waits for room in the engine, which completions make.
func (c *gcq) Complete(wc rdma.WC) bool {
	s := c.s
	c.mu.Lock()
	ok := s.writeCQEs(c, unsafe.Slice(&wc, 1))
	c.stalled = !ok
	if ok {
		s.notifyCQ(c)
	}
	c.mu.Unlock()
	if ok && s.blocked.Load() {
		s.wake()
	}
	return ok
}

// slot is the GPA of CQE i of the ring (any index: it wraps). A CQE
// never straddles a page of a paged ring.
func (c *gcq) slot(i uint32) uint64 {
	off := uint64(i&(c.depth-1)) * cqeSize
	if c.pages == nil {
		return c.ring + off
	}
	return c.pages[off/CQPageSize] + off%CQPageSize
}

// gqp is a guest QP: an engine QP fed from the SQ and RQ rings in guest
// memory.
type gqp struct {
	qp               *rdma.QP
	typ              rdma.QPType
	pd               uint32
	scq, rcq         *gcq
	sq, rq           uint64
	sqDB, rqDB       uint64
	sqDepth, rqDepth uint32
	sqStride         uint32
	rqStride         uint32
	maxSendSGE       uint32
	maxRecvSGE       uint32
	maxInline        uint32
	sqCons, rqCons   uint32
	srq              *gsrq  // receive WRs come from this SRQ (no RQ ring)
	xrcd             *gxrcd // XRC target: its domain
	noSQ, noRQ       bool   // XRC: the target has no rings, the initiator no RQ
	sqBlocked        bool   // the engine's send queue was full
	rqBlocked        bool
	fatal            bool
	flows            int        // raw packet QP: its flows (DESTROY_QP is EBUSY while it has any)
	rssTable         []*gqp     // RSS QP: its work queues (SET_RSS)
	rssUsers         int        // work queue: the RSS QPs whose table has it
	cost             int64      // budget charged
	rqNotify         recvNotify // the RQ's no_db word (recvnotify.go)
}

// gah is a guest address handle: an engine AH of the guest PD pd.
type gah struct {
	pd uint32
	ah *rdma.AH
}

// gsrq is a guest SRQ: an engine SRQ fed from a receive ring in guest
// memory (the layout of a QP's RQ, with its own dbrec).
type gsrq struct {
	srqn    uint32
	srq     *rdma.SRQ
	pd      uint32
	ring    uint64
	db      uint64
	depth   uint32
	stride  uint32
	maxSGE  uint32
	cons    uint32
	blocked bool // the engine SRQ was full
	fatal   bool // the guest broke the ring: no more WQEs are taken
	users   int  // QPs created with it
	cost    int64
	// XRC SRQ: its domain and CQ; TM SRQ: its CQ (nil otherwise).
	xrcd *gxrcd
	cq   *gcq
	// TM SRQ: the ops ring (ABI 1.13), 0 otherwise.
	ops, opsDB        uint64
	opsDepth, opsCons uint32
	notify            recvNotify // the ring's no_db word (recvnotify.go)
}

// gxrcd is a guest XRC domain.
type gxrcd struct {
	xrcd  *rdma.XRCD
	users int // XRC SRQs and target QPs in it
	cost  int64
}

func newSession(v *VNIC, c *net.UnixConn, id int) (*session, error) {
	s := &session{v: v, conn: c, peerID: id,
		retry: make(chan struct{}, 1), done: make(chan struct{}),
		pds: map[uint32]*rdma.PD{}, mrs: map[uint32]*rdma.MR{}, mrCost: map[uint32]int64{}, cqs: map[uint32]*gcq{},
		mws: map[uint32]*rdma.MW{},
		qps: map[uint32]*gqp{}, ahs: map[uint32]*gah{}, srqs: map[uint32]*gsrq{},
		xrcds: map[uint32]*gxrcd{}, flows: map[uint32]*gflow{}}
	s.nextCQ.Store(1)
	s.nextAH.Store(1)
	s.nextFlow.Store(1)
	s.mem.limit = int64(v.cfg.MemBudget)
	ok := false
	defer func() {
		if !ok {
			s.release()
		}
	}()
	var err error
	if s.bar, err = ivshmem.NewDevice("hicain-bar2", int(v.cfg.ShmSize), v.cfg.Vectors, 0); err != nil {
		return nil, err
	}
	s.shm = s.bar.SHM
	s.hdr = (*DevHdr)(unsafe.Pointer(&s.shm[0]))
	if err := s.newDevice(v.cfg.MAC, v.cfg.IPv4, v.cfg.MTU); err != nil {
		return nil, err
	}
	s.initHeader(0)
	// The header is complete before QEMU gets the fd: the guest may read
	// it as soon as it maps BAR2.
	if err := s.bar.Setup(c, id); err != nil {
		return nil, fmt.Errorf("ivshmem setup: %w", err)
	}
	ok = true
	return s, nil
}

func (s *session) newDevice(mac [6]byte, ips []netip.Addr, mtu int) error {
	cfg := s.v.cfg
	dc := rdma.DeviceConfig{
		Name: "hicain0", NodeGUID: cfg.NodeGUID, PortGUID: cfg.PortGUID, MAC: mac,
		IPv4: ips, MTU: mtu, Memory: s.v.ram, RawTxFilter: s.l2Allowed,
	}
	if cfg.ib() {
		// The port waits in Init for a subnet manager to give it a LID
		// (the engine's SMA answers on QP0); IP addresses make no GIDs.
		dc = rdma.DeviceConfig{Name: "hicain0", LinkLayer: rdma.LinkLayerInfiniBand, NodeGUID: cfg.NodeGUID,
			PortGUID: cfg.PortGUID, Description: cfg.Name, MTU: mtu, Memory: s.v.ram}
	}
	pc := new(portCounters)
	port := newFabricPort(s.v.fabric, pc, cfg.ib())
	dev, err := rdma.NewDevice(dc, port)
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	port.mu.Lock()
	port.ready = dev.TxReady
	port.mu.Unlock()
	link := s.v.fabric
	dev.SetPMATotals(func() ibagent.PortTotals { return pmaTotals(dev, pc, link) })
	s.mac.Store(macKey(mac))
	s.devMAC, s.devMTU = mac, mtu
	s.lim = newLimits(dev.QueryDevice())
	old := s.dev
	s.dev = dev
	s.portCtr.Store(pc)
	s.rxDev.Store(dev)
	if old != nil {
		old.Close()
		s.wake() // the worker waits on the old device's events
	}
	return nil
}

// initHeader writes the device header with resetCount as reset_count.
// The count never passes through another value while the header is
// rebuilt (a driver waiting for old+1 after a reset must not see 0), and
// magic is written last, so a driver that sees the new count and the
// magic sees the whole header.
func (s *session) initHeader(resetCount uint32) {
	cfg := s.v.cfg
	a := s.dev.QueryDevice()
	lim := &s.lim
	h := s.hdr
	atomic.StoreUint32(&h.Magic, 0)
	old := atomic.LoadUint32(&h.ResetCount)
	clearHeader(h)
	h.ResetCount = old
	h.ABIMajor, h.ABIMinor = ABIMajor, ABIMinor
	h.VendorID, h.DeviceID = VendorID, DeviceID
	h.BARSize = uint32(cfg.ShmSize)
	h.MAC = cfg.MAC
	h.LinkLayer = LinkEthernet
	h.PhysPortCnt = 1
	h.NodeGUID, h.PortGUID = cfg.NodeGUID, cfg.PortGUID
	h.Caps = CapRC | CapUD | CapSRQ | CapAtomic | CapL2 | CapXRC | CapCQETS | CapTM | CapRaw
	if cfg.ib() {
		// No Ethernet on an IB port: the L2 rings carry nothing.
		h.LinkLayer, h.Caps = LinkInfiniBand, CapRC|CapUD|CapSRQ|CapAtomic|CapXRC|CapCQETS|CapTM
	}
	h.MaxMTU = MaxNetdevMTU
	h.NumVectors = uint32(cfg.Vectors)
	h.MaxQP, h.MaxCQ, h.MaxMR, h.MaxPD = uint32(a.MaxQP), lim.maxCQ, uint32(a.MaxMR), uint32(a.MaxPD)
	h.MaxAH = lim.maxAH
	h.MaxQPWR, h.MaxCQE, h.MaxSGE = lim.maxQPWR, lim.maxCQE, lim.maxSGE
	h.MaxInline, h.MaxQPRdAtom = lim.maxInline, uint32(a.MaxQPRdAtom)
	status := uint32(DevReady)
	if s.v.linkUp() {
		status |= DevLinkUp
	}
	atomic.StoreUint32(&h.DevStatus, status)
	atomic.StoreUint32(&h.ResetCount, resetCount)
	// Magic last: a reader that sees it sees the rest.
	atomic.StoreUint32(&h.Magic, Magic)
}

// clearHeader zeroes the header but for its heartbeat, which the
// heartbeat goroutine owns and bumps atomically at any time.
func clearHeader(h *DevHdr) {
	b := unsafe.Slice((*byte)(unsafe.Pointer(h)), unsafe.Sizeof(*h))
	off := unsafe.Offsetof(h.Heartbeat)
	clear(b[:off])
	clear(b[off+unsafe.Sizeof(h.Heartbeat):])
}

func (s *session) start() {
	s.wg.Add(3)
	go s.epollLoop()
	go s.worker()
	go s.heartbeat()
}

// heartbeat bumps the header's heartbeat every HeartbeatMS for as long
// as the session runs (ABI 1.14). It takes no lock and waits for
// nothing else, so it says only that the backend process runs: a
// driver that sees it stop takes the backend for dead and can be given
// a new device (docs/device.md, "Backend restarts").
func (s *session) heartbeat() {
	defer s.wg.Done()
	tick := time.NewTicker(HeartbeatMS * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
			atomic.AddUint32(&s.hdr.Heartbeat, 1)
		}
	}
}

// close stops the goroutines, the engine and releases everything.
func (s *session) close() {
	close(s.done)
	ivshmem.Signal(s.bar.Stop)
	s.wg.Wait()
	s.release()
}

func (s *session) release() {
	if s.dev != nil {
		s.dev.Close()
	}
	s.l2mu.Lock()
	s.shm, s.hdr = nil, nil
	if s.bar != nil {
		s.bar.Close()
	}
	s.l2mu.Unlock()
	s.conn.Close()
}

// epollLoop waits on the doorbell eventfds and runs the doorbells
// itself (run to completion): the thread the guest's doorbell wakes
// reads the rings and posts to the engine, with no hand-off to another
// goroutine on the way.
func (s *session) epollLoop() {
	defer s.wg.Done()
	events := s.bar.Events()
	for {
		n, ok := s.bar.Wait(events)
		if !ok {
			return
		}
		var rung uint32 // doorbell vectors rung, bit per vector
		for _, ev := range events[:n] {
			i := int(ev.Fd)
			if ivshmem.Drain(s.bar.DB[i]) {
				s.v.stats.doorbells.Add(1)
				atomic.AddUint64(&s.hdr.Doorbells, 1)
				rung |= 1 << min(i, 31)
			}
		}
		if rung != 0 {
			// The posts the doorbells make are run by this goroutine
			// once s.work is free (RunInline), not handed to the
			// engine goroutine: a doorbell's frame leaves without a
			// thread wake-up.
			s.work.Lock()
			dev := s.dev
			dev.HoldKick()
			s.doorbells(rung)
			s.work.Unlock()
			dev.RunInline(true)
		}
	}
}

// doorbells does what the rung vectors ask for; s.work is held.
func (s *session) doorbells(rung uint32) {
	if rung&(1<<DBCtrl) != 0 {
		s.control()
	}
	if s.live() {
		if rung&(1<<DBQP) != 0 {
			s.serviceQPs()
		}
		if rung&(1<<DBL2) != 0 {
			s.l2Transmit()
		}
		s.moveAllCQs(rung&(1<<DBCQ) != 0)
	}
}

// worker retries queues blocked on a full engine queue when completions
// free room, hands a stalled CQ's held completions to its ring when the
// guest has consumed (the 10 ms tick: a guest need not ring for that),
// and turns engine async events into event queue entries.
func (s *session) worker() {
	defer s.wg.Done()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		// s.dev changes only under s.work (reset, SET_ADDR), which
		// then wakes this loop to read the new device's channel.
		s.work.Lock()
		async := s.dev.AsyncEvents()
		s.work.Unlock()
		select {
		case <-s.done:
			return
		case <-s.retry:
			s.work.Lock()
			if s.live() {
				s.retryBlocked()
			}
			s.work.Unlock()
		case ev := <-async:
			// The engine's event channel is the handoff: the tables
			// that map engine objects to guest handles are s.work's.
			s.work.Lock()
			s.asyncEvent(ev)
			s.work.Unlock()
		case <-tick.C:
			s.work.Lock()
			if s.live() {
				s.moveAllCQs(false)
				s.retryBlocked()
			}
			s.work.Unlock()
		}
	}
}

// wake asks the worker to retry the blocked queues (any goroutine).
func (s *session) wake() {
	select {
	case s.retry <- struct{}{}:
	default:
	}
}

func (s *session) live() bool {
	st := atomic.LoadUint32(&s.hdr.DevStatus)
	return st&DevLive != 0 && st&DevFatal == 0
}

// raise signals MSI-X vector vec, but only once the driver said MSI-X
// is on: QEMU drops earlier interrupts (device-facts §1.6).
func (s *session) raise(vec int) {
	if vec < 0 || vec >= len(s.bar.IRQ) {
		return
	}
	if atomic.LoadUint32(&s.hdr.DriverStatus)&DrvMSIXOn == 0 {
		return
	}
	s.v.stats.interrupts.Add(1)
	atomic.AddUint64(&s.hdr.Interrupts, 1)
	ivshmem.Signal(s.bar.IRQ[vec])
}

// postEvent writes an event queue entry and interrupts the guest. When
// the queue is full the event is lost (counted by seq gaps).
func (s *session) postEvent(typ, handle, data uint32) {
	s.eqMu.Lock()
	s.postEventLocked(typ, handle, data)
	s.eqMu.Unlock()
	s.raise(IRQCtrl)
}

// postEventLocked writes an event queue entry; the caller holds eqMu and
// raises the interrupt.
func (s *session) postEventLocked(typ, handle, data uint32) {
	prod := atomic.LoadUint32(&s.hdr.EQProd)
	cons := atomic.LoadUint32(&s.hdr.EQCons)
	if prod-cons < EQEntries {
		e := EQE{Type: typ, Handle: handle, Data: data, Seq: prod}
		off := EQOff + int(prod%EQEntries)*int(unsafe.Sizeof(e))
		copy(s.shm[off:], AsBytes(&e))
		atomic.StoreUint32(&s.hdr.EQProd, prod+1)
	} else {
		s.v.stats.eventsLost.Add(1)
	}
}

// asyncEvent turns an engine event into an event queue entry, naming the
// object by its guest handle (worker). Events of objects the guest has
// destroyed since are dropped.
func (s *session) asyncEvent(ev rdma.AsyncEvent) {
	switch ev.Type {
	case rdma.EventCQErr:
		for _, cq := range s.cqs {
			if cq.cq == ev.CQ {
				s.v.stats.cqOverflows.Add(1)
				s.postEvent(EvCQErr, cq.cqn, CQErrOverrun)
				return
			}
		}
	case rdma.EventSRQLimitReached:
		if ev.SRQ == nil {
			return
		}
		if q, ok := s.srqs[ev.SRQ.Handle()]; ok && q.srq == ev.SRQ {
			s.postEvent(EvSRQLimit, q.srqn, 0)
		}
	case rdma.EventPortActive, rdma.EventPortErr, rdma.EventLIDChange, rdma.EventSMChange, rdma.EventClientReregister:
		// An InfiniBand port's state and LID follow its subnet manager
		// (SMA Sets over the wire or through MAD_IFC); the driver
		// refreshes what ib_core caches. An Ethernet port's events
		// follow the fabric link (goLive, portDown) instead.
		if !s.v.cfg.ib() || !s.live() {
			return
		}
		typ := uint32(EvLIDChange)
		switch ev.Type {
		case rdma.EventPortActive:
			typ = EvPortActive
		case rdma.EventPortErr:
			typ = EvPortErr
		case rdma.EventSMChange:
			typ = EvSMChange
		case rdma.EventClientReregister:
			typ = EvClientReregister
		}
		s.postEvent(typ, 1, 0)
	case rdma.EventQPFatal, rdma.EventQPLastWQEReached:
		if ev.QP == nil {
			return
		}
		q, ok := s.qps[ev.QP.QPN()]
		if !ok || q.qp != ev.QP {
			return
		}
		if ev.Type == rdma.EventQPFatal {
			s.postEvent(EvQPFatal, ev.QP.QPN(), QPFatalTransport)
		} else {
			s.postEvent(EvQPLastWQE, ev.QP.QPN(), 0)
		}
	}
}

// setStatus sets the dev_status bits set and clears clr atomically and
// returns the previous value.
func (s *session) setStatus(set, clr uint32) uint32 {
	for {
		st := atomic.LoadUint32(&s.hdr.DevStatus)
		if atomic.CompareAndSwapUint32(&s.hdr.DevStatus, st, (st|set)&^clr) {
			return st
		}
	}
}

// goLive accepts the driver: LIVE, the interrupt, and PORT_ACTIVE when
// the link is up. eqMu orders it with portDown, so the guest never sees
// PORT_ACTIVE after PORT_ERR.
func (s *session) goLive() {
	s.eqMu.Lock()
	st := s.setStatus(DevLive, 0)
	// An InfiniBand port is active once a subnet manager made it so,
	// which an SM elsewhere on the fabric may have done before the
	// driver came: PORT_ACTIVE says so then, and not before.
	if st&DevLinkUp != 0 && (!s.v.cfg.ib() || s.dev.QueryPort().State == rdma.PortActive) {
		s.postEventLocked(EvPortActive, 1, 0)
	}
	s.eqMu.Unlock()
	s.raise(IRQCtrl)
}

// portDown clears LINK_UP and posts PORT_ERR to a live guest; called
// when the fabric connection is gone (any goroutine, with the session
// held current by v.mu). Idempotent.
func (s *session) portDown() {
	if s.v.cfg.ib() {
		// An InfiniBand port goes Down in the engine, whose PORT_ERR
		// (an active port's) reaches the guest through the event
		// switch above, as any other port state change.
		s.setStatus(0, DevLinkUp)
		s.dev.SetLinkUp(false)
		return
	}
	s.eqMu.Lock()
	st := s.setStatus(0, DevLinkUp)
	post := st&DevLinkUp != 0 && st&DevLive != 0
	if post {
		s.postEventLocked(EvPortErr, 1, 0)
	}
	s.eqMu.Unlock()
	if post {
		s.raise(IRQCtrl)
	}
}

// setFatal puts the vNIC in the guest-visible fatal state; only a reset
// (DrvReset) leaves it.
func (s *session) setFatal(code uint32) {
	s.v.stats.fatal.Add(1)
	s.v.stats.lastFatal.Store(code)
	s.v.log.Warn("guest vNIC fatal", "code", code, "peer", s.peerID)
	atomic.StoreUint32(&s.hdr.FatalCode, code)
	s.setStatus(DevFatal, 0)
	s.postEvent(EvDeviceFatal, 0, code)
}

// control handles the handshake and reset, then the admin queue.
func (s *session) control() {
	drv := atomic.LoadUint32(&s.hdr.DriverStatus)
	if drv&DrvReset != 0 {
		s.reset()
		return
	}
	st := atomic.LoadUint32(&s.hdr.DevStatus)
	if drv&DrvOK != 0 && st&DevLive == 0 && st&DevFatal == 0 {
		if atomic.LoadUint32(&s.hdr.DriverABI)>>16 != ABIMajor {
			s.setFatal(FatalABI)
			return
		}
		s.goLive()
	}
	if s.live() {
		s.adminQueue()
	}
}

// reset destroys every object of the guest and returns the device to
// READY (not LIVE); the driver then redoes the handshake.
func (s *session) reset() {
	s.destroyAll()
	if err := s.newDevice(s.v.cfg.MAC, s.v.cfg.IPv4, s.v.cfg.MTU); err != nil {
		s.setFatal(FatalABI)
		return
	}
	s.adminCons, s.adminCQ, s.l2TxCons = 0, 0, 0
	rc := atomic.LoadUint32(&s.hdr.ResetCount)
	// The rx goroutine (L2 RX) and event posters stay out while the
	// header is rebuilt.
	s.l2mu.Lock()
	s.eqMu.Lock()
	s.l2RxCons = 0
	s.initHeader(rc + 1)
	s.eqMu.Unlock()
	s.l2mu.Unlock()
	s.publishQPs()
	s.raise(IRQCtrl)
}

func (s *session) destroyAll() {
	for k, f := range s.flows {
		f.flow.Destroy()
		delete(s.flows, k)
	}
	s.nRawQP = 0
	for k, q := range s.qps {
		q.qp.Destroy()
		delete(s.qps, k)
	}
	for k, q := range s.srqs {
		q.srq.Destroy()
		delete(s.srqs, k)
	}
	for k, x := range s.xrcds {
		x.xrcd.Dealloc()
		delete(s.xrcds, k)
	}
	for k, a := range s.ahs {
		a.ah.Destroy()
		delete(s.ahs, k)
	}
	for k, w := range s.mws {
		w.Dealloc()
		delete(s.mws, k)
	}
	for k, m := range s.mrs {
		m.Dereg()
		delete(s.mrs, k)
		delete(s.mrCost, k)
	}
	for k, c := range s.cqs {
		c.cq.Destroy()
		delete(s.cqs, k)
	}
	for k, p := range s.pds {
		p.Dealloc()
		delete(s.pds, k)
	}
	s.mem.used = 0
}

func macKey(m [6]byte) uint64 {
	return uint64(m[0])<<40 | uint64(m[1])<<32 | uint64(m[2])<<24 | uint64(m[3])<<16 | uint64(m[4])<<8 | uint64(m[5])
}

// forEngine reports whether a RoCEv2 frame goes to the engine: addressed
// to its MAC, or to a group (multicast UD; the engine delivers it to the
// QPs attached to the group and drops it otherwise).
func (s *session) forEngine(f []byte) bool {
	return len(f) >= 6 && (f[0]&1 != 0 || macKey([6]byte(f[:6])) == s.mac.Load())
}
