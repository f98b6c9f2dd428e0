package gpu

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/PacketFive/hinic/internal/ivshmem"
)

const (
	cmdSize = uint64(unsafe.Sizeof(Cmd{}))
	cplSize = uint64(unsafe.Sizeof(Cpl{}))
	sgeSize = uint64(unsafe.Sizeof(SGE{}))
)

// clockBase is the device clock's origin: one monotonic clock for every
// GPU of the backend, as the header says.
var clockBase = time.Now()

// clockNS is the device clock (never 0).
func clockNS() uint64 { return uint64(time.Since(clockBase).Nanoseconds()) + 1 }

// session is one connected guest on a GPU: its BAR2, eventfds, rings,
// contexts and allocations.
//
// Goroutines and ownership: the epoll goroutine owns the handshake, the
// command ring's consumer side (ring fields below marked "epoll") and
// runs the immediate commands; each stream with queued work has one
// goroutine that runs its commands in order. mu guards the completion
// ring, the context table and the counts of work in flight; memMu
// guards the heap and the per-context memory counts (stream goroutines
// hold it shared while they check and touch device memory, MEM_ALLOC and
// MEM_FREE exclusively). Lock order: memMu before mu.
type session struct {
	g      *GPU
	conn   *net.UnixConn
	peerID int
	bar    *ivshmem.Device // BAR2 and the eventfds; Extra[0] is the kick
	hdr    *DevHdr
	kickFD int // stream goroutines wake the epoll goroutine (room in flight)
	wg     sync.WaitGroup

	// epoll goroutine.
	lim     limits
	cmdRing uint64
	cmdN    uint32
	cmdCons uint32
	nextCtx uint16

	blocked atomic.Bool // max_inflight stopped the consumer

	mu       sync.Mutex
	cond     *sync.Cond // on mu: events recorded, contexts dying
	gen      uint64     // bumped by reset and fatal: older work writes nothing
	live     bool
	cplRing  uint64
	cplN     uint32
	cplProd  uint32
	inflight int
	ctxs     map[uint16]*gctx
	workers  sync.WaitGroup // stream goroutines and context teardowns

	// Peer access (mu): the contexts that enabled each GPU, and the
	// peer operations of this guest in flight.
	peerRefs [MaxGPUs]int
	peerOps  int

	memMu  sync.RWMutex
	heap   *heap
	nalloc int
}

// limits are the guest's budgets, fixed at session start and published
// in the header; never read back from BAR2, which the guest can write.
type limits struct {
	memBudget, ctxMem                         uint64
	maxCtx, maxAllocs, ctxAllocs, maxInflight int
	maxStreams, maxEvents, maxSGE, maxPeerOps int
}

func newSession(g *GPU, c *net.UnixConn, id int) (*session, error) {
	cfg := g.cfg
	s := &session{g: g, conn: c, peerID: id,
		ctxs: map[uint16]*gctx{}, nextCtx: 1,
		heap: newHeap(VABase(cfg.ID), cfg.MemSize, AllocAlgn),
		lim: limits{memBudget: cfg.MemBudget, ctxMem: cfg.CtxMemBudget, maxCtx: cfg.MaxContexts,
			maxAllocs: cfg.MaxAllocs, ctxAllocs: cfg.CtxMaxAllocs, maxInflight: cfg.MaxInflight,
			maxStreams: cfg.MaxStreams, maxEvents: cfg.MaxEvents, maxSGE: cfg.MaxSGE,
			maxPeerOps: cfg.MaxPeerOps}}
	s.cond = sync.NewCond(&s.mu)
	ok := false
	defer func() {
		if !ok {
			s.release()
		}
	}()
	var err error
	if s.bar, err = ivshmem.NewDevice("higpu-bar2", BAR2Size, cfg.Vectors, 1); err != nil {
		return nil, err
	}
	s.hdr = (*DevHdr)(unsafe.Pointer(&s.bar.SHM[0]))
	s.kickFD = s.bar.Extra[0]
	s.initHeader(0)
	// The header is complete before QEMU gets the fd.
	if err := s.bar.Setup(c, id); err != nil {
		return nil, fmt.Errorf("ivshmem setup: %w", err)
	}
	ok = true
	return s, nil
}

// initHeader writes the device header as at start with resetCount. The
// count never passes through another value (a driver waiting for old+1
// must not see 0) and magic is written last.
func (s *session) initHeader(resetCount uint32) {
	cfg := s.g.cfg
	h := s.hdr
	atomic.StoreUint32(&h.Magic, 0)
	old := atomic.LoadUint32(&h.ResetCount)
	*h = DevHdr{ResetCount: old}
	h.ABIMajor, h.ABIMinor = ABIMajor, ABIMinor
	h.VendorID, h.DeviceID = VendorID, DeviceID
	h.BARSize = BAR2Size
	h.GPUID = uint8(cfg.ID)
	h.NumVectors = uint32(cfg.Vectors)
	h.Caps = CapCopySG | CapKernels | CapEventWait
	if s.g.link != nil {
		h.Caps |= CapPeer
		h.HiLinkPort = 1
	}
	h.AllocAlign = AllocAlgn
	h.MemSize = cfg.MemSize
	h.VABase = VABase(cfg.ID)
	copy(h.Name[:], cfg.Name)
	l := &s.lim
	h.MemBudget = l.memBudget
	h.MaxContexts, h.MaxAllocs, h.MaxInflight = uint32(l.maxCtx), uint32(l.maxAllocs), uint32(l.maxInflight)
	h.MaxStreams, h.MaxEvents, h.MaxSGE = uint32(l.maxStreams), uint32(l.maxEvents), uint32(l.maxSGE)
	h.RingMin, h.RingMax = RingMin, RingMax
	atomic.StoreUint32(&h.DevStatus, DevReady)
	atomic.StoreUint32(&h.ResetCount, resetCount)
	atomic.StoreUint32(&h.Magic, Magic)
}

func (s *session) start() {
	s.wg.Add(1)
	go s.epollLoop()
}

// close stops the goroutines and releases everything: as a reset, with
// nobody to tell.
func (s *session) close() {
	ivshmem.Signal(s.bar.Stop)
	s.wg.Wait()
	s.dropAll()
	s.release()
}

func (s *session) release() {
	if s.bar != nil {
		s.hdr = nil
		s.bar.Close()
	}
	s.conn.Close()
}

// epollLoop waits for doorbells and kicks and runs them.
func (s *session) epollLoop() {
	defer s.wg.Done()
	events := s.bar.Events()
	kick := len(s.bar.DB) + 1
	for {
		n, ok := s.bar.Wait(events)
		if !ok {
			return
		}
		var ctrl, cmd bool
		for _, ev := range events[:n] {
			i := int(ev.Fd)
			switch {
			case i == kick:
				ivshmem.Drain(s.kickFD)
				cmd = true
			case ivshmem.Drain(s.bar.DB[i]):
				s.g.stats.doorbells.Add(1)
				atomic.AddUint64(&s.hdr.Doorbells, 1)
				switch i {
				case DBCtrl:
					ctrl = true
				case DBCmd, DBCpl:
					cmd = true
				}
			}
		}
		if ctrl {
			s.control()
		}
		if cmd {
			s.consume()
		}
	}
}

// raise signals MSI-X vector vec, unless the driver has not enabled
// MSI-X (QEMU would drop it).
func (s *session) raise(vec int) {
	if atomic.LoadUint32(&s.hdr.DriverStatus)&DrvMSIXOn == 0 {
		return
	}
	s.g.stats.interrupts.Add(1)
	atomic.AddUint64(&s.hdr.Interrupts, 1)
	ivshmem.Signal(s.bar.IRQ[vec])
}

// setStatus sets and clears dev_status bits atomically.
func (s *session) setStatus(set, clr uint32) {
	for {
		st := atomic.LoadUint32(&s.hdr.DevStatus)
		if atomic.CompareAndSwapUint32(&s.hdr.DevStatus, st, (st|set)&^clr) {
			return
		}
	}
}

// control runs the handshake and reset (epoll goroutine).
func (s *session) control() {
	drv := atomic.LoadUint32(&s.hdr.DriverStatus)
	st := atomic.LoadUint32(&s.hdr.DevStatus)
	if drv&DrvReset != 0 || (st&DevLive != 0 && drv&DrvOK == 0) {
		s.reset()
		return
	}
	if st&(DevLive|DevFatal) != 0 || drv&DrvOK == 0 {
		return
	}
	if atomic.LoadUint32(&s.hdr.DriverABI)>>16 != ABIMajor {
		s.setFatal(FatalABI)
		return
	}
	h := s.hdr
	cmdGPA, cplGPA := atomic.LoadUint64(&h.CmdRingGPA), atomic.LoadUint64(&h.CplRingGPA)
	cmdN, cplN := atomic.LoadUint32(&h.CmdEntries), atomic.LoadUint32(&h.CplEntries)
	if !s.ringOK(cmdGPA, cmdN, cmdSize) || !s.ringOK(cplGPA, cplN, cplSize) {
		s.setFatal(FatalRingConfig)
		return
	}
	// The ring configuration is copied: the guest may scribble on the
	// header later, the device uses what it accepted.
	s.cmdRing, s.cmdN = cmdGPA, cmdN
	s.cmdCons = 0
	s.blocked.Store(false)
	atomic.StoreUint32(&h.CmdCons, 0)
	atomic.StoreUint32(&h.CplProd, 0)
	s.mu.Lock()
	s.cplRing, s.cplN = cplGPA, cplN
	s.cplProd = 0
	s.live = true
	s.mu.Unlock()
	s.setStatus(DevLive, 0)
	s.raise(IRQCtrl)
	s.consume() // commands posted before the doorbell
}

// ringOK checks a ring at the handshake: entries a power of two in
// ring_min..ring_max, the GPA aligned, the whole ring in one RAM block.
func (s *session) ringOK(gpa uint64, n uint32, size uint64) bool {
	if n < RingMin || n > RingMax || n&(n-1) != 0 || gpa%RingAlign != 0 {
		return false
	}
	_, err := s.g.ram.Slice(gpa, uint64(n)*size)
	return err == nil
}

// setFatal stops the device: no command is taken and no completion is
// written until a reset; the work in flight is cancelled.
func (s *session) setFatal(code uint32) {
	s.g.stats.fatal.Add(1)
	s.g.stats.lastFatal.Store(code)
	s.g.log.Warn("guest GPU fatal", "code", code, "peer", s.peerID)
	s.mu.Lock()
	s.live = false
	s.gen++
	s.inflight = 0
	s.cond.Broadcast()
	s.mu.Unlock()
	atomic.StoreUint32(&s.hdr.FatalCode, code)
	s.setStatus(DevFatal, DevLive)
	s.raise(IRQCtrl)
}

// reset drops every command taken and not completed, every context and
// allocation, rewrites the header with reset_count + 1 and READY, and
// raises the control interrupt (epoll goroutine).
func (s *session) reset() {
	s.g.stats.resets.Add(1)
	s.dropAll()
	s.initHeader(atomic.LoadUint32(&s.hdr.ResetCount) + 1)
	s.raise(IRQCtrl)
}

// dropAll cancels all work, waits for the stream goroutines (a command
// running finishes first) and frees every context and allocation.
func (s *session) dropAll() {
	s.mu.Lock()
	s.live = false
	s.gen++
	s.inflight = 0
	for _, c := range s.ctxs {
		c.dying = true
	}
	s.cond.Broadcast()
	s.mu.Unlock()
	s.workers.Wait()
	s.memMu.Lock()
	s.heap.reset()
	s.nalloc = 0
	s.memMu.Unlock()
	s.mu.Lock()
	clear(s.ctxs)
	s.peerRefs = [MaxGPUs]int{}
	s.mu.Unlock()
	s.nextCtx = 1
	s.blocked.Store(false)
}

// consume takes commands from the ring while the completion ring and
// max_inflight leave room (epoll goroutine). It checks the guest's
// indices first: a broken one makes the device fatal.
func (s *session) consume() {
	h := s.hdr
	for {
		if atomic.LoadUint32(&h.DevStatus)&DevLive == 0 {
			return
		}
		prod := atomic.LoadUint32(&h.CmdProd) // acquire: entries before the index
		if prod-s.cmdCons > s.cmdN {
			s.setFatal(FatalCmdIndex)
			return
		}
		cplCons := atomic.LoadUint32(&h.CplCons)
		s.mu.Lock()
		cplProd, cplN, inflight := s.cplProd, s.cplN, s.inflight
		s.mu.Unlock()
		if cplProd-cplCons > cplN {
			s.setFatal(FatalCplIndex)
			return
		}
		if prod == s.cmdCons {
			return
		}
		// Every command taken has a completion slot: the commands
		// taken since the handshake less those the driver consumed.
		if s.cmdCons-cplCons >= cplN {
			return
		}
		if inflight >= s.lim.maxInflight {
			s.blocked.Store(true)
			// A completion may have come between the count and the
			// flag: look again.
			s.mu.Lock()
			again := s.inflight < s.lim.maxInflight
			s.mu.Unlock()
			if !again {
				return
			}
			s.blocked.Store(false)
			continue
		}
		b, err := s.g.ram.Slice(s.cmdRing+uint64(s.cmdCons&(s.cmdN-1))*cmdSize, cmdSize)
		if err != nil {
			s.setFatal(FatalRingDMA)
			return
		}
		var c Cmd
		copy(asBytes(&c), b)
		s.cmdCons++
		atomic.StoreUint32(&h.CmdCons, s.cmdCons)
		s.g.stats.commands.Add(1)
		atomic.AddUint64(&h.Commands, 1)
		s.take(&c)
	}
}

// asBytes views an ABI structure as its bytes (little-endian hosts).
func asBytes[T any](p *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
}

// work is a command taken from the ring, with what its completion needs.
type work struct {
	cmd Cmd
	gen uint64
	ctx *gctx // nil for commands without a (live) context
}

// complete writes w's completion unless the device was reset (or went
// fatal) since w was taken, then raises HIGPU_IRQ_CPL unless the
// command asked for none. Any goroutine.
func (s *session) complete(w *work, ctxID uint16, status uint16, result, ts uint64) {
	if ts == 0 {
		ts = clockNS()
	}
	c := Cpl{Tag: w.cmd.Tag, Opcode: w.cmd.Opcode, CtxID: ctxID, StreamID: w.cmd.StreamID,
		Status: status, Result: result, TimestampNS: ts}
	s.mu.Lock()
	if w.gen != s.gen {
		s.mu.Unlock()
		s.g.stats.canceled.Add(1)
		return
	}
	b, err := s.g.ram.Slice(s.cplRing+uint64(s.cplProd&(s.cplN-1))*cplSize, cplSize)
	if err != nil {
		// Accepted at the handshake, so unreachable; never write
		// outside the ring.
		s.mu.Unlock()
		s.setFatal(FatalRingDMA)
		return
	}
	copy(b, asBytes(&c))
	s.cplProd++
	atomic.StoreUint32(&s.hdr.CplProd, s.cplProd) // release: the entry before the index
	s.inflight--
	if w.ctx != nil {
		w.ctx.inflight--
		if status != StOK {
			w.ctx.noteError(&w.cmd, status)
		}
	}
	s.mu.Unlock()
	if status != StOK {
		s.g.stats.errors.Add(1)
		atomic.AddUint64(&s.hdr.Errors, 1)
	}
	if w.cmd.Flags&CmdFNoIRQ == 0 {
		s.raise(IRQCpl)
	}
	if s.blocked.Load() {
		ivshmem.Signal(s.kickFD)
	}
}

func atomic32(p *uint32, v uint32) { atomic.StoreUint32(p, v) }
func atomic64(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
