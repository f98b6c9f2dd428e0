package gpu

import (
	"encoding/binary"
	"sync/atomic"
	"time"
)

// gctx is a context: a process of the guest, with its streams, events,
// error record and (in the heap, by id) allocations. Fields under the
// session's mu, except memUsed and allocs (memMu).
type gctx struct {
	id       uint16
	dying    bool
	streams  []*stream // by stream id, made on first use
	events   []uint64  // record counts by event id
	inflight int
	running  int   // stream goroutines alive
	peers    uint8 // GPUs this context enabled peer access to, by bit

	memUsed uint64 // memMu
	allocs  int    // memMu

	errors    uint64
	errTag    uint64
	errOpcode uint16
	errStream uint16
	errStatus uint16
}

// noteError counts a failed command and keeps the first (mu held).
func (c *gctx) noteError(cmd *Cmd, status uint16) {
	c.errors++
	if c.errStatus == 0 {
		c.errTag, c.errOpcode, c.errStream, c.errStatus = cmd.Tag, cmd.Opcode, cmd.StreamID, status
	}
}

// stream is a queue of stream-ordered commands; one goroutine runs it
// while it is not empty (mu).
type stream struct {
	q       []*work
	running bool
}

// immediate reports whether op runs when taken.
func immediate(op uint16) bool {
	switch op {
	case OpCtxCreate, OpCtxDestroy, OpMemAlloc, OpMemFree, OpQuery, OpPeerAccess:
		return true
	}
	return false
}

// take runs or queues one command just taken (epoll goroutine). Every
// command gets exactly one completion.
func (s *session) take(c *Cmd) {
	s.mu.Lock()
	w := &work{cmd: *c, gen: s.gen}
	s.inflight++
	ctx := s.ctxs[c.CtxID]
	if ctx != nil && ctx.dying {
		ctx = nil
	}
	if ctx != nil {
		ctx.inflight++
		w.ctx = ctx
	}
	s.mu.Unlock()
	switch {
	case c.Opcode == 0 || c.Opcode >= OpMax:
		s.complete(w, c.CtxID, StEOPNOTSUPP, 0, 0)
	case c.Flags&^CmdFNoIRQ != 0:
		s.complete(w, c.CtxID, StEINVAL, 0, 0)
	case c.Opcode == OpCtxCreate:
		s.ctxCreate(w)
	case c.Opcode == OpQuery:
		st, res := s.query(w)
		s.complete(w, c.CtxID, st, res, 0)
	case ctx == nil:
		s.complete(w, c.CtxID, StENOENT, 0, 0)
	case c.Opcode == OpCtxDestroy:
		s.ctxDestroy(w)
	case c.Opcode == OpMemAlloc:
		st, res := s.memAlloc(w)
		s.complete(w, c.CtxID, st, res, 0)
	case c.Opcode == OpMemFree:
		s.complete(w, c.CtxID, s.memFree(w), 0, 0)
	case c.Opcode == OpPeerAccess:
		s.complete(w, c.CtxID, s.peerAccess(w), 0, 0)
	case int(c.StreamID) >= s.lim.maxStreams:
		s.complete(w, c.CtxID, StENOENT, 0, 0)
	default:
		s.enqueue(w)
	}
}

func (s *session) ctxCreate(w *work) {
	s.mu.Lock()
	if len(s.ctxs) >= s.lim.maxCtx {
		s.mu.Unlock()
		s.complete(w, 0, StENOSPC, 0, 0)
		return
	}
	id := s.nextCtx
	for id == 0 || s.ctxs[id] != nil {
		id++
	}
	s.nextCtx = id + 1
	c := &gctx{id: id, streams: make([]*stream, s.lim.maxStreams), events: make([]uint64, s.lim.maxEvents)}
	s.ctxs[id] = c
	n := len(s.ctxs)
	s.mu.Unlock()
	s.g.log.Debug("context created", "ctx", id)
	atomic32(&s.hdr.Contexts, uint32(n))
	s.complete(w, id, StOK, uint64(id), 0)
}

// ctxDestroy cancels the context's queued commands, lets its running
// ones finish, frees its memory and then completes (in its own
// goroutine, so the ring keeps moving).
func (s *session) ctxDestroy(w *work) {
	c := w.ctx
	s.mu.Lock()
	c.dying = true
	s.dropPeers(c)
	s.cond.Broadcast()
	w.ctx = nil // the destroy itself is no command of the dying context
	c.inflight--
	s.workers.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.workers.Done()
		s.mu.Lock()
		for c.running > 0 {
			s.cond.Wait()
		}
		s.mu.Unlock()
		s.memMu.Lock()
		_, n := s.heap.freeCtx(c.id)
		s.nalloc -= n
		s.publishMem()
		s.memMu.Unlock()
		s.mu.Lock()
		delete(s.ctxs, c.id)
		left := len(s.ctxs)
		s.mu.Unlock()
		atomic32(&s.hdr.Contexts, uint32(left))
		s.complete(w, c.id, StOK, 0, 0)
	}()
}

// publishMem updates the header's memory counters (memMu held).
func (s *session) publishMem() {
	atomic64(&s.hdr.MemUsed, s.heap.used)
	atomic32(&s.hdr.Allocs, uint32(s.nalloc))
}

func (s *session) memAlloc(w *work) (uint16, uint64) {
	a := ArgsOf[ArgsAlloc](&w.cmd)
	if a.Size == 0 || a.Align&(a.Align-1) != 0 {
		return StEINVAL, 0
	}
	size, ok := s.heap.roundSize(a.Size)
	if !ok {
		return StENOMEM, 0
	}
	align := max(a.Align, AllocAlgn)
	c := w.ctx
	s.memMu.Lock()
	defer s.memMu.Unlock()
	switch {
	case s.nalloc >= s.lim.maxAllocs || c.allocs >= s.lim.ctxAllocs:
		return StENOSPC, 0
	case size > s.lim.memBudget-s.heap.used || size > s.lim.ctxMem-c.memUsed:
		return StENOMEM, 0
	}
	addr, err := s.heap.alloc(size, align, c.id)
	if err != nil {
		return StENOMEM, 0
	}
	// Fresh memory is zeroed: another context (another process of the
	// guest, or an earlier guest) may have left data there.
	off := addr - s.heap.base
	clear(s.g.devMem[off : off+size])
	s.nalloc++
	c.allocs++
	c.memUsed += size
	s.publishMem()
	return StOK, addr
}

func (s *session) memFree(w *work) uint16 {
	a := ArgsOf[ArgsFree](&w.cmd)
	c := w.ctx
	s.memMu.Lock()
	defer s.memMu.Unlock()
	n, err := s.heap.freeAt(a.Addr, c.id)
	if err != nil {
		return status(err)
	}
	s.nalloc--
	c.allocs--
	c.memUsed -= n
	s.publishMem()
	return StOK
}

// status maps an allocator error to a completion status.
func status(err error) uint16 {
	switch err {
	case nil:
		return StOK
	case errNoMem:
		return StENOMEM
	case errNoEnt:
		return StENOENT
	case errAccess:
		return StEACCES
	case errFault:
		return StEFAULT
	}
	return StEINVAL
}

// enqueue queues a stream-ordered command on its stream and starts the
// stream's goroutine when idle.
func (s *session) enqueue(w *work) {
	s.mu.Lock()
	c := w.ctx
	st := c.streams[w.cmd.StreamID]
	if st == nil {
		st = &stream{}
		c.streams[w.cmd.StreamID] = st
	}
	st.q = append(st.q, w)
	if !st.running {
		st.running = true
		c.running++
		s.workers.Add(1)
		go s.runStream(c, st)
	}
	s.mu.Unlock()
}

// runStream runs a stream's commands one at a time, in ring order,
// until its queue is empty. A dying context's commands complete with
// ECANCELED.
func (s *session) runStream(c *gctx, st *stream) {
	defer s.workers.Done()
	for {
		s.mu.Lock()
		if len(st.q) == 0 {
			st.running = false
			st.q = nil
			c.running--
			s.cond.Broadcast()
			s.mu.Unlock()
			return
		}
		w := st.q[0]
		st.q[0] = nil
		st.q = st.q[1:]
		canceled := c.dying || w.gen != s.gen
		s.mu.Unlock()
		if canceled {
			s.complete(w, c.id, StECANCELED, 0, 0)
			continue
		}
		t0 := time.Now()
		stat, res, ts := s.run(c, w)
		if w.cmd.Opcode != OpEventWait && w.cmd.Opcode != OpNop {
			d := uint64(time.Since(t0).Nanoseconds())
			s.g.stats.busyNS.Add(d)
			atomic.AddUint64(&s.hdr.BusyNS, d)
		}
		s.complete(w, c.id, stat, res, ts)
	}
}

// run executes one stream-ordered command of context c.
func (s *session) run(c *gctx, w *work) (st uint16, result, ts uint64) {
	cmd := &w.cmd
	switch cmd.Opcode {
	case OpNop:
		return StOK, 0, 0
	case OpCopyH2D, OpCopyD2H, OpCopyD2D:
		return s.copyCmd(c, cmd), 0, 0
	case OpCopyPeer:
		return s.copyPeer(c, w), 0, 0
	case OpMemset:
		return s.memset(c, cmd), 0, 0
	case OpLaunch:
		return s.launch(c, cmd), 0, 0
	case OpEventRecord, OpEventWait:
		return s.event(c, w)
	}
	return StEOPNOTSUPP, 0, 0
}

// devRange returns the device memory of [addr, addr+n) when it lies in
// one allocation of ctx (memMu held shared).
func (s *session) devRange(addr, n uint64, ctx uint16) ([]byte, error) {
	off, err := s.heap.check(addr, n, ctx)
	if err != nil {
		return nil, err
	}
	return s.g.devMem[off : off+n : off+n], nil
}

// hostSegments returns the guest memory of a copy's host side: one GPA
// range, or a scatter list of sg entries at gpa adding up to n bytes.
func (s *session) hostSegments(gpa, n uint64, sg uint32) ([][]byte, uint16) {
	ram := s.g.ram
	if sg == 0 {
		b, err := ram.Slice(gpa, n)
		if err != nil {
			return nil, StEFAULT
		}
		return [][]byte{b}, StOK
	}
	if int64(sg) > int64(s.lim.maxSGE) || gpa%16 != 0 {
		return nil, StEINVAL
	}
	list, err := ram.Slice(gpa, uint64(sg)*sgeSize)
	if err != nil {
		return nil, StEFAULT
	}
	segs := make([][]byte, 0, sg)
	var total uint64
	for i := uint64(0); i < uint64(sg); i++ {
		// The guest may rewrite the list meanwhile: read each entry
		// once.
		e := list[i*sgeSize:]
		g, l := binary.LittleEndian.Uint64(e), binary.LittleEndian.Uint64(e[8:])
		if l == 0 || l > n-total {
			return nil, StEINVAL
		}
		b, err := ram.Slice(g, l)
		if err != nil {
			return nil, StEFAULT
		}
		segs = append(segs, b)
		total += l
	}
	if total != n {
		return nil, StEINVAL
	}
	return segs, StOK
}

func (s *session) copyCmd(c *gctx, cmd *Cmd) uint16 {
	a := ArgsOf[ArgsCopy](cmd)
	if a.Len == 0 {
		return StEINVAL
	}
	s.memMu.RLock()
	defer s.memMu.RUnlock()
	st := &s.g.stats
	switch cmd.Opcode {
	case OpCopyD2D:
		if a.SGCount != 0 {
			return StEINVAL
		}
		dst, err := s.devRange(a.Dst, a.Len, c.id)
		if err != nil {
			return status(err)
		}
		src, err := s.devRange(a.Src, a.Len, c.id)
		if err != nil {
			return status(err)
		}
		copy(dst, src) // memmove
		addBytes(&st.bytesD2D, &s.hdr.BytesD2D, a.Len)
	case OpCopyH2D:
		if r := s.hostCopy(c, a.Dst, a.Src, a.Len, a.SGCount, true); r != StOK {
			return r
		}
		addBytes(&st.bytesH2D, &s.hdr.BytesH2D, a.Len)
	case OpCopyD2H:
		if r := s.hostCopy(c, a.Src, a.Dst, a.Len, a.SGCount, false); r != StOK {
			return r
		}
		addBytes(&st.bytesD2H, &s.hdr.BytesD2H, a.Len)
	}
	return StOK
}

// hostCopy copies n bytes between the device range at dev and the
// guest's memory at host (a scatter list of sgCount entries when not 0):
// to the device when toDev (H2D), else from it (D2H).
func (s *session) hostCopy(c *gctx, dev, host, n uint64, sgCount uint32, toDev bool) uint16 {
	d, err := s.devRange(dev, n, c.id)
	if err != nil {
		return status(err)
	}
	segs, st := s.hostSegments(host, n, sgCount)
	if st != StOK {
		return st
	}
	for _, b := range segs {
		if toDev {
			d = d[copy(d, b):]
		} else {
			d = d[copy(b, d):]
		}
	}
	return StOK
}

// addBytes adds n (bytes moved, or kernels run) to the GPU's counter and
// to the device header's, which the guest reads.
func addBytes(ctr *atomic.Uint64, hdr *uint64, n uint64) {
	ctr.Add(n)
	atomic.AddUint64(hdr, n)
}

func (s *session) memset(c *gctx, cmd *Cmd) uint16 {
	a := ArgsOf[ArgsMemset](cmd)
	if a.Len == 0 {
		return StEINVAL
	}
	s.memMu.RLock()
	defer s.memMu.RUnlock()
	dst, err := s.devRange(a.Dst, a.Len, c.id)
	if err != nil {
		return status(err)
	}
	fillPattern(dst, []byte{a.Value})
	addBytes(&s.g.stats.bytesD2D, &s.hdr.BytesD2D, a.Len)
	return StOK
}

func (s *session) launch(c *gctx, cmd *Cmd) uint16 {
	a := ArgsOf[ArgsLaunch](cmd)
	if a.Kernel != KernelFill && a.Kernel != KernelReduce {
		return StEOPNOTSUPP
	}
	es := dtypeSize(a.DType)
	if es == 0 || a.Count == 0 || a.Count > (1<<62)/es {
		return StEINVAL
	}
	n := a.Count * es
	s.memMu.RLock()
	defer s.memMu.RUnlock()
	switch a.Kernel {
	case KernelFill:
		if a.Op != 0 || a.Src0 != 0 || a.Src1 != 0 {
			return StEINVAL
		}
		dst, err := s.devRange(a.Dst, n, c.id)
		if err != nil {
			return status(err)
		}
		runFill(dst, a.DType, a.Value)
	case KernelReduce:
		if a.Op < RedSum || a.Op > RedMax || a.Value != 0 {
			return StEINVAL
		}
		var bufs [3][]byte
		for i, addr := range []uint64{a.Dst, a.Src0, a.Src1} {
			b, err := s.devRange(addr, n, c.id)
			if err != nil {
				return status(err)
			}
			bufs[i] = b
		}
		runReduce(bufs[0], bufs[1], bufs[2], a.DType, a.Op, a.Count)
	}
	addBytes(&s.g.stats.kernels, &s.hdr.Kernels, 1)
	addBytes(&s.g.stats.bytesD2D, &s.hdr.BytesD2D, n)
	return StOK
}

// event runs EVENT_RECORD and EVENT_WAIT.
func (s *session) event(c *gctx, w *work) (uint16, uint64, uint64) {
	a := ArgsOf[ArgsEvent](&w.cmd)
	if int64(a.EventID) >= int64(len(c.events)) {
		return StENOENT, 0, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.cmd.Opcode == OpEventRecord {
		if a.Count != 0 {
			return StEINVAL, 0, 0
		}
		c.events[a.EventID]++
		ts := clockNS()
		s.cond.Broadcast()
		return StOK, c.events[a.EventID], ts
	}
	for c.events[a.EventID] < a.Count {
		if c.dying || w.gen != s.gen {
			return StECANCELED, 0, 0
		}
		s.cond.Wait()
	}
	return StOK, c.events[a.EventID], 0
}

// query answers HIGPU_OP_QUERY into guest memory (epoll goroutine).
func (s *session) query(w *work) (uint16, uint64) {
	a := ArgsOf[ArgsQuery](&w.cmd)
	var ans []byte
	switch a.What {
	case QueryDevice:
		if a.Flags != 0 {
			return StEINVAL, 0
		}
		info := s.devInfo()
		ans = asBytes(&info)
	case QueryCtx:
		if a.Flags&^QueryFClearErr != 0 {
			return StEINVAL, 0
		}
		if w.ctx == nil {
			return StENOENT, 0
		}
		info := s.ctxInfo(w.ctx, a.Flags&QueryFClearErr != 0)
		ans = asBytes(&info)
	default:
		return StEINVAL, 0
	}
	if uint64(a.RespLen) < uint64(len(ans)) {
		return StEINVAL, 0
	}
	dst, err := s.g.ram.Slice(a.RespGPA, uint64(len(ans)))
	if err != nil {
		return StEFAULT, 0
	}
	copy(dst, ans)
	return StOK, uint64(len(ans))
}

func (s *session) devInfo() DevInfo {
	h := s.hdr
	s.memMu.RLock()
	info := DevInfo{MemSize: s.g.cfg.MemSize, MemUsed: s.heap.used, MemFreeLargest: s.heap.largest(),
		Allocs: uint32(s.nalloc)}
	s.memMu.RUnlock()
	info.BusyNS = atomic.LoadUint64(&h.BusyNS)
	info.ClockNS = clockNS()
	info.Commands = atomic.LoadUint64(&h.Commands)
	info.Kernels = atomic.LoadUint64(&h.Kernels)
	s.mu.Lock()
	info.Contexts = uint32(len(s.ctxs))
	// The query itself is in flight; it does not count.
	info.Inflight = uint32(s.inflight - 1)
	s.mu.Unlock()
	return info
}

func (s *session) ctxInfo(c *gctx, clearErr bool) CtxInfo {
	s.memMu.RLock()
	info := CtxInfo{MemUsed: c.memUsed, Allocs: uint32(c.allocs)}
	s.memMu.RUnlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	info.Inflight = uint32(c.inflight - 1) // less the query
	info.Errors, info.ErrTag, info.ErrOpcode = c.errors, c.errTag, c.errOpcode
	info.ErrStream, info.ErrStatus = c.errStream, c.errStatus
	if clearErr {
		c.errors, c.errTag, c.errOpcode, c.errStream, c.errStatus = 0, 0, 0, 0, 0
	}
	return info
}
