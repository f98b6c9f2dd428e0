package gpu

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/PacketFive/hinic/internal/hilink"
	"github.com/PacketFive/hinic/internal/hilink/wire"
)

// Peer access over HiLink (docs/gpu.md, "Peer access"). A GPU configured
// with a switch port opens one hilink.Endpoint for its gpu_id. Its
// streams run HIGPU_OP_COPY_PEER as requesters: a remote write (push)
// or a remote read (pull) of one operation at a time per stream. Its
// link goroutines answer the requests of the other GPUs: writes are
// applied and reads queued by the receive goroutine, which never blocks
// on the fabric, and a response goroutine sends the answers. Neither
// holds memMu while it waits for the fabric: a peer copy would otherwise
// hold its heap against a MEM_FREE while the other end waits for its
// own, and two GPUs copying to each other could wait for each other.

// Defaults and bounds of peer access.
const (
	// DefaultMaxPeerOps bounds the peer operations of a guest's GPU in
	// flight (streams over it wait).
	DefaultMaxPeerOps = 64
	// MaxPeerOps is the most a configuration may ask for: the answers a
	// target queues per requesting GPU are bounded by it.
	MaxPeerOps = 256
	// DefaultPeerTimeout is how long a peer operation waits without a
	// frame of its answer before it fails with EHOSTUNREACH (the peer's
	// backend died in the middle: the switch answers for a peer that is
	// gone, not for one that left half-way).
	DefaultPeerTimeout = 10 * time.Second
	// maxOpenWrites bounds the incoming writes of several frames whose
	// last frame has not come yet, over all requesters.
	maxOpenWrites = MaxGPUs * MaxPeerOps
	// maxPeerLen is the longest peer operation: the wire's Length.
	maxPeerLen = 1<<32 - 1
	// maxQueuedAnswers bounds the answers queued to one requesting GPU:
	// a well-behaved one has at most MaxPeerOps operations in flight.
	maxQueuedAnswers = MaxPeerOps
)

// peerOp is one COPY_PEER of this GPU waiting for its answer. Its fields
// after start are under s.mu, except got (the receive goroutine's).
type peerOp struct {
	s      *session
	ctx    *gctx
	write  bool
	local  uint64 // this GPU's device address
	remote uint64
	n      uint64
	got    uint64 // read: bytes received so far (receive goroutine)
	last   atomic.Int64
	done   bool
	status uint16
}

// finish records the operation's outcome (the first one sticks) and
// wakes its stream.
func (op *peerOp) finish(st uint16) {
	s := op.s
	s.mu.Lock()
	if !op.done {
		op.done, op.status = true, st
		s.cond.Broadcast()
	}
	s.mu.Unlock()
}

// openWrite is an incoming write of several frames before its last.
type openWrite struct {
	bytes  uint64
	status uint8
}

// answer is a response the link owes a requester: a write response, or
// the data of a read request.
type answer struct {
	read   bool
	src    uint16
	tag    uint32
	status uint8
	addr   uint64
	n      uint64
}

// link is a GPU's HiLink port. Safe for concurrent use. When its
// session with the switch ends (the switch restarted or crashed), the
// operations waiting for an answer fail with EHOSTUNREACH, the half-done
// incoming writes and the owed answers are dropped (their requesters'
// operations fail alike), and the link dials the port again, every
// relinkMax at the latest, until it is closed.
type link struct {
	g       *GPU
	ep      atomic.Pointer[hilink.Endpoint] // the current session's
	chunk   uint64                          // payload octets per frame
	timeout time.Duration
	ctx     context.Context
	stop    context.CancelFunc
	kick    chan struct{}
	wg      sync.WaitGroup

	mu      sync.Mutex // the fields below
	nextTag uint32
	pending map[uint32]*peerOp
	writes  map[uint64]*openWrite // by src<<32 | tag
	answers []answer
	queued  map[uint16]int // answers queued per requester

	stats linkStats
}

// linkStats are a link's counters.
type linkStats struct {
	opsOut, errorsOut, bytesOut, bytesIn    atomic.Uint64
	maxInflight                             atomic.Uint64
	writesIn, readsIn, refusedIn, droppedIn atomic.Uint64
	relinks                                 atomic.Uint64 // sessions after the first
}

// Redial back-off of a link whose switch went away.
const (
	relinkMin = 50 * time.Millisecond
	relinkMax = 2 * time.Second
)

// openLink dials the switch port of g's configuration.
func openLink(g *GPU) (*link, error) {
	c := g.cfg
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ep, err := dialLink(ctx, c)
	if err != nil {
		return nil, err
	}
	l := &link{g: g, timeout: c.PeerTimeout, kick: make(chan struct{}, 1),
		chunk:   uint64(min(ep.MaxFrame(), hilink.DefaultMaxFrame) - wire.HeaderSize),
		pending: map[uint32]*peerOp{}, writes: map[uint64]*openWrite{}, queued: map[uint16]int{}}
	l.ep.Store(ep)
	l.ctx, l.stop = context.WithCancel(context.Background())
	l.wg.Add(1)
	go l.serve()
	return l, nil
}

func dialLink(ctx context.Context, c GPUConfig) (*hilink.Endpoint, error) {
	return hilink.Dial(ctx, hilink.EndpointConfig{Path: c.HiLink, GPUs: []uint16{uint16(c.ID)}, Name: c.LinkName})
}

// serve serves one session with the switch after the other: the
// receive goroutine is this one, the response goroutine runs beside it,
// and when the session ends (and the link is not closing) the port is
// dialled again.
func (l *link) serve() {
	defer l.wg.Done()
	for {
		ep := l.ep.Load()
		sess, end := context.WithCancel(l.ctx)
		var answers sync.WaitGroup
		answers.Add(1)
		go func() {
			defer answers.Done()
			l.answerLoop(sess, ep)
		}()
		l.recvLoop(ep)
		end()
		answers.Wait()
		ep.Close()
		l.failPending()
		l.mu.Lock()
		clear(l.writes)
		clear(l.queued)
		l.answers = nil
		l.mu.Unlock()
		if !l.redial() {
			return
		}
	}
}

// redial dials the switch port again with a growing back-off until it
// answers (true) or the link closes (false). A switch that now takes
// shorter frames than the link's operations are cut into is not used.
func (l *link) redial() bool {
	wait := relinkMin
	for {
		select {
		case <-l.ctx.Done():
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, relinkMax)
		ctx, cancel := context.WithTimeout(l.ctx, 10*time.Second)
		ep, err := dialLink(ctx, l.g.cfg)
		cancel()
		if err != nil {
			continue
		}
		if uint64(ep.MaxFrame()-wire.HeaderSize) < l.chunk {
			ep.Close()
			continue
		}
		l.ep.Store(ep)
		l.stats.relinks.Add(1)
		return true
	}
}

// close ends the port and joins its goroutines; operations waiting for
// an answer fail with EHOSTUNREACH.
func (l *link) close() {
	l.stop()
	l.ep.Load().Close()
	l.wg.Wait()
	l.failPending()
}

func (l *link) failPending() {
	l.mu.Lock()
	ops := make([]*peerOp, 0, len(l.pending))
	for _, op := range l.pending {
		ops = append(ops, op)
	}
	l.mu.Unlock()
	for _, op := range ops {
		op.finish(StEHOSTUNREACH)
	}
}

// session returns the GPU's guest session, or nil.
func (l *link) session() *session {
	l.g.mu.Lock()
	defer l.g.mu.Unlock()
	return l.g.sess
}

// recvLoop takes every frame the switch delivers on ep: answers to
// this GPU's operations, and requests of the others, until the session
// ends. It never waits for the fabric, so that the credits of this port
// keep coming back.
func (l *link) recvLoop(ep *hilink.Endpoint) {
	for {
		f, err := ep.Recv(l.ctx)
		if err != nil {
			return
		}
		h, err := wire.Parse(f)
		if err != nil || !h.Type().Forwarded() {
			l.stats.droppedIn.Add(1) // the endpoint hands out data frames only
			continue
		}
		l.receive(h)
	}
}

// receive handles one data frame (receive goroutine; FuzzPeerFrames).
func (l *link) receive(h wire.Header) {
	switch h.Type() {
	case wire.TypeWrite:
		l.onWrite(h)
	case wire.TypeReadReq:
		l.stats.readsIn.Add(1)
		l.queue(answer{read: true, src: h.SrcGPU(), tag: h.Tag(), addr: h.Address(), n: uint64(h.Length())})
	case wire.TypeWriteResp:
		l.onWriteResp(h)
	case wire.TypeReadResp:
		l.onReadResp(h)
	}
}

// access checks that sess lets GPU src reach [addr, addr+n) and returns
// the offset in device memory (memMu held shared).
func (l *link) access(sess *session, src uint16, addr, n uint64) (uint64, uint8) {
	if sess == nil {
		return 0, wire.StatusUnreachable
	}
	sess.mu.Lock()
	ok := src < MaxGPUs && sess.peerRefs[src] > 0
	sess.mu.Unlock()
	if !ok {
		return 0, wire.StatusNoAccess
	}
	off, err := sess.heap.checkAny(addr, n)
	if err != nil {
		return 0, wire.StatusBadAddress
	}
	return off, wire.StatusOK
}

// onWrite applies a write frame of another GPU and answers the
// operation's last frame.
func (l *link) onWrite(h wire.Header) {
	l.stats.writesIn.Add(1)
	p := h.Payload()
	st := uint8(wire.StatusUnreachable)
	if sess := l.session(); sess != nil {
		sess.memMu.RLock()
		var off uint64
		if off, st = l.access(sess, h.SrcGPU(), h.Address(), uint64(len(p))); st == wire.StatusOK {
			copy(l.g.devMem[off:], p)
			l.stats.bytesIn.Add(uint64(len(p)))
		}
		sess.memMu.RUnlock()
	}
	if st != wire.StatusOK {
		l.stats.refusedIn.Add(1)
	}
	key := uint64(h.SrcGPU())<<32 | uint64(h.Tag())
	l.mu.Lock()
	ow := l.writes[key]
	if !h.Last() {
		if ow == nil {
			if len(l.writes) >= maxOpenWrites {
				// Only a requester that breaks its budget gets here;
				// its write's response will not add up to its length.
				l.mu.Unlock()
				l.stats.droppedIn.Add(1)
				return
			}
			ow = &openWrite{}
			l.writes[key] = ow
		}
		ow.bytes += uint64(len(p))
		if ow.status == wire.StatusOK {
			ow.status = st
		}
		l.mu.Unlock()
		return
	}
	total := uint64(len(p))
	if ow != nil {
		total += ow.bytes
		if ow.status != wire.StatusOK {
			st = ow.status
		}
		delete(l.writes, key)
	}
	l.mu.Unlock()
	l.queue(answer{src: h.SrcGPU(), tag: h.Tag(), status: st, n: total})
}

// queue adds an answer for the response goroutine, unless the requester
// has more queued than its budget allows (then it is dropped, counted).
func (l *link) queue(a answer) {
	l.mu.Lock()
	if l.queued[a.src] >= maxQueuedAnswers {
		l.mu.Unlock()
		l.stats.droppedIn.Add(1)
		return
	}
	l.queued[a.src]++
	l.answers = append(l.answers, a)
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// answerLoop sends the queued answers in order on ep until the session
// (sess) ends.
func (l *link) answerLoop(sess context.Context, ep *hilink.Endpoint) {
	buf := make([]byte, wire.HeaderSize+l.chunk)
	for {
		l.mu.Lock()
		if len(l.answers) == 0 {
			l.answers = nil
			l.mu.Unlock()
			select {
			case <-l.kick:
				continue
			case <-sess.Done():
				return
			}
		}
		a := l.answers[0]
		l.answers = l.answers[1:]
		l.mu.Unlock()
		var err error
		if a.read {
			err = l.sendRead(sess, ep, buf, a)
		} else {
			err = ep.Send(sess, wire.Append(buf[:0], &wire.Fields{Type: wire.TypeWriteResp, Status: a.status,
				SrcGPU: uint16(l.g.cfg.ID), DstGPU: a.src, Tag: a.tag, Length: uint32(min(a.n, maxPeerLen))}, nil))
		}
		l.mu.Lock()
		if l.queued[a.src]--; l.queued[a.src] == 0 {
			delete(l.queued, a.src)
		}
		l.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// sendRead answers a read request: the data in frames of at most chunk
// octets, each checked when it is read, the last with L; or one
// response with the error status.
func (l *link) sendRead(sess context.Context, ep *hilink.Endpoint, buf []byte, a answer) error {
	f := wire.Fields{Type: wire.TypeReadResp, SrcGPU: uint16(l.g.cfg.ID), DstGPU: a.src, Tag: a.tag}
	gs := l.session()
	for off := uint64(0); off < a.n; {
		k := min(a.n-off, l.chunk)
		f.Address = a.addr + off
		var st uint8 = wire.StatusUnreachable
		var frame []byte
		if gs != nil {
			gs.memMu.RLock()
			var doff uint64
			if doff, st = l.access(gs, a.src, f.Address, k); st == wire.StatusOK {
				if off+k == a.n {
					f.Flags = wire.FlagLast
				}
				frame = wire.Append(buf[:0], &f, l.g.devMem[doff:doff+k])
			}
			gs.memMu.RUnlock()
		}
		if st != wire.StatusOK {
			l.stats.refusedIn.Add(1)
			f.Flags, f.Status = wire.FlagLast, st
			return ep.Send(sess, wire.Append(buf[:0], &f, nil))
		}
		if err := ep.Send(sess, frame); err != nil {
			return err
		}
		l.stats.bytesIn.Add(k)
		off += k
	}
	return nil
}

// op returns the waiting operation of tag.
func (l *link) op(tag uint32) *peerOp {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pending[tag]
}

// wireStatus maps a response's status to a completion status.
func wireStatus(st uint8) uint16 {
	switch st {
	case wire.StatusOK:
		return StOK
	case wire.StatusNoAccess:
		return StEPERM
	case wire.StatusBadAddress:
		return StEACCES
	}
	return StEHOSTUNREACH
}

func (l *link) onWriteResp(h wire.Header) {
	op := l.op(h.Tag())
	if op == nil || !op.write || h.SrcGPU() != peerOf(op.remote) {
		l.stats.droppedIn.Add(1)
		return
	}
	op.last.Store(time.Now().UnixNano())
	st := wireStatus(h.Status())
	if st == StOK && uint64(h.Length()) != op.n {
		st = StEHOSTUNREACH // the peer lost part of the write
	}
	op.finish(st)
}

// onReadResp copies read data into this GPU's memory, at the place the
// operation asked for, checking the local range again.
func (l *link) onReadResp(h wire.Header) {
	op := l.op(h.Tag())
	if op == nil || op.write || h.SrcGPU() != peerOf(op.remote) {
		l.stats.droppedIn.Add(1)
		return
	}
	op.last.Store(time.Now().UnixNano())
	if st := h.Status(); st != wire.StatusOK {
		op.finish(wireStatus(st))
		return
	}
	p := h.Payload()
	n := uint64(len(p))
	// Answers come in order: each one continues where the last ended.
	if h.Address() != op.remote+op.got || n > op.n-op.got || (h.Last() != (op.got+n == op.n)) {
		op.finish(StEHOSTUNREACH)
		return
	}
	s := op.s
	s.memMu.RLock()
	d, err := s.devRange(op.local+op.got, n, op.ctx.id)
	if err == nil {
		copy(d, p)
	}
	s.memMu.RUnlock()
	op.got += n
	l.stats.bytesOut.Add(n)
	switch {
	case err != nil:
		op.finish(StEACCES)
	case h.Last():
		op.finish(StOK)
	}
}

// peerOf returns the GPU id a device address names (MaxGPUs if none).
func peerOf(addr uint64) uint16 {
	if addr < VAStride || addr/VAStride-1 >= MaxGPUs {
		return MaxGPUs
	}
	return uint16(addr/VAStride - 1)
}

// peerAccess runs HIGPU_OP_PEER_ACCESS (immediate).
func (s *session) peerAccess(w *work) uint16 {
	a := ArgsOf[ArgsPeer](&w.cmd)
	if s.g.link == nil {
		return StEOPNOTSUPP
	}
	if a.PeerID >= MaxGPUs || int(a.PeerID) == s.g.cfg.ID || a.Enable > 1 {
		return StEINVAL
	}
	c := w.ctx
	bit := uint8(1) << a.PeerID
	s.mu.Lock()
	defer s.mu.Unlock()
	on := c.peers&bit != 0
	switch {
	case a.Enable == 1 && on:
		return StEEXIST
	case a.Enable == 0 && !on:
		return StENOENT
	case a.Enable == 1:
		c.peers |= bit
		s.peerRefs[a.PeerID]++
	default:
		c.peers &^= bit
		s.peerRefs[a.PeerID]--
	}
	return StOK
}

// dropPeers forgets the peers context c enabled (mu held).
func (s *session) dropPeers(c *gctx) {
	for id := range MaxGPUs {
		if c.peers&(1<<id) != 0 {
			s.peerRefs[id]--
		}
	}
	c.peers = 0
}

// copyPeer runs HIGPU_OP_COPY_PEER on context c's stream.
func (s *session) copyPeer(c *gctx, w *work) uint16 {
	l := s.g.link
	a := ArgsOf[ArgsCopy](&w.cmd)
	if l == nil {
		return StEOPNOTSUPP
	}
	// An operation's length is a 32-bit field of the wire (the read
	// request's, the write response's).
	if a.Len == 0 || a.Len > maxPeerLen || a.SGCount != 0 {
		return StEINVAL
	}
	self := uint16(s.g.cfg.ID)
	op := &peerOp{s: s, ctx: c, n: a.Len}
	switch {
	case peerOf(a.Src) == self && peerOf(a.Dst) == self:
		return StEINVAL
	case peerOf(a.Src) == self:
		op.write, op.local, op.remote = true, a.Src, a.Dst
	case peerOf(a.Dst) == self:
		op.local, op.remote = a.Dst, a.Src
	default:
		return StEACCES
	}
	peer := peerOf(op.remote)
	if peer == MaxGPUs || op.remote+a.Len < op.remote || peerOf(op.remote+a.Len-1) != peer {
		return StEACCES
	}
	s.memMu.RLock()
	_, err := s.heap.check(op.local, a.Len, c.id)
	s.memMu.RUnlock()
	if err != nil {
		return StEACCES
	}
	s.mu.Lock()
	if c.peers&(1<<peer) == 0 {
		s.mu.Unlock()
		return StEPERM
	}
	// The guest's budget of peer operations in flight.
	for s.peerOps >= s.lim.maxPeerOps {
		if c.dying || w.gen != s.gen {
			s.mu.Unlock()
			return StECANCELED
		}
		s.cond.Wait()
	}
	s.peerOps++
	if n := uint64(s.peerOps); n > l.stats.maxInflight.Load() {
		l.stats.maxInflight.Store(n) // under mu: no lost update
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.peerOps--
		s.cond.Broadcast()
		s.mu.Unlock()
	}()
	l.stats.opsOut.Add(1)
	st := l.run(op, w, peer)
	if st != StOK {
		l.stats.errorsOut.Add(1)
	}
	return st
}

// run sends op's request and waits for its answer.
func (l *link) run(op *peerOp, w *work, peer uint16) uint16 {
	s := op.s
	l.mu.Lock()
	l.nextTag++
	for l.pending[l.nextTag] != nil {
		l.nextTag++
	}
	tag := l.nextTag
	l.pending[tag] = op
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.pending, tag)
		l.mu.Unlock()
	}()
	op.last.Store(time.Now().UnixNano())
	f := wire.Fields{SrcGPU: uint16(l.g.cfg.ID), DstGPU: peer, Tag: tag}
	var err error
	if op.write {
		err = l.push(op, &f)
	} else {
		f.Type, f.Length, f.Address = wire.TypeReadReq, uint32(op.n), op.remote
		err = l.ep.Load().Send(l.ctx, wire.Append(nil, &f, nil))
	}
	if err != nil {
		return StEHOSTUNREACH
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for !op.done {
		if op.ctx.dying || w.gen != s.gen {
			return StECANCELED
		}
		idle := time.Duration(time.Now().UnixNano() - op.last.Load())
		if idle >= l.timeout {
			return StEHOSTUNREACH
		}
		t := time.AfterFunc(l.timeout-idle, func() {
			s.mu.Lock()
			s.cond.Broadcast()
			s.mu.Unlock()
		})
		s.cond.Wait()
		t.Stop()
	}
	return op.status
}

// push sends the frames of a remote write. Each chunk of local memory is
// checked when it is read; if the guest freed it under the copy, the
// rest of the write carries zeros (the operation still ends with its
// last frame, so the peer closes it) and the copy fails with EACCES.
func (l *link) push(op *peerOp, f *wire.Fields) error {
	s := op.s
	f.Type = wire.TypeWrite
	ep := l.ep.Load() // one session carries the whole write
	buf := make([]byte, wire.HeaderSize+min(op.n, l.chunk))
	bad := false
	for off := uint64(0); off < op.n; {
		k := min(op.n-off, l.chunk)
		f.Address, f.Length, f.Flags = op.remote+off, uint32(k), 0
		if off+k == op.n {
			f.Flags = wire.FlagLast
		}
		frame := buf[:wire.HeaderSize+k]
		wire.Header(frame).Encode(f)
		p := frame[wire.HeaderSize:]
		s.memMu.RLock()
		d, err := s.devRange(op.local+off, k, op.ctx.id)
		if err == nil && !bad {
			copy(p, d)
		} else {
			bad = true
			clear(p)
		}
		s.memMu.RUnlock()
		if err := ep.Send(l.ctx, frame); err != nil {
			return err
		}
		l.stats.bytesOut.Add(k)
		off += k
	}
	if bad {
		op.finish(StEACCES)
	}
	return nil
}
