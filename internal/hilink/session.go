package hilink

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/PacketFive/hinic/internal/hilink/wire"
	"github.com/PacketFive/hinic/internal/mmsg"
)

// frame is one received frame on its way through the switch. Its buffer
// has one owner at a time: the receive goroutine, a queue, then the
// transmit goroutine that sends it.
type frame struct {
	buf []byte
	n   int
	src *session // the session it came in on: its credit comes back when the frame leaves
}

func (f *frame) msg() []byte { return f.buf[:f.n] }

// fifo is a queue of frames in arrival order. Its slice holds at most
// twice the frames queued (plus one): a queue that never empties still
// reuses its space.
type fifo struct {
	q    []*frame
	head int
}

func (q *fifo) len() int { return len(q.q) - q.head }

func (q *fifo) push(f *frame) {
	if q.head > 0 && q.head >= q.len() {
		n := copy(q.q, q.q[q.head:])
		clear(q.q[n:])
		q.q, q.head = q.q[:n], 0
	}
	q.q = append(q.q, f)
}

func (q *fifo) pop() *frame {
	f := q.q[q.head]
	q.q[q.head] = nil
	q.head++
	return f
}

// session is one connected peer of a port, from its accepted hello to
// the end of the connection.
//
// Queueing: frames wait at the egress, in one FIFO per ingress port
// (virtual output queues turned around: per source at the egress), and
// the transmit goroutine serves the non-empty FIFOs round-robin while
// its peer has credit. Frames of one source to one destination therefore
// leave in the order they came, and a destination without credit holds
// only the frames sent to it: its senders run out of credit (each
// ingress port holds at most Config.Credits frames), nobody else waits.
type session struct {
	sw   *Switch
	p    *port
	c    *net.UnixConn
	mc   *mmsg.Conn
	gpus []uint16
	name string
	// peerMax is the largest frame the peer accepts (its hello).
	peerMax int
	kick    chan struct{} // capacity 1: the transmit goroutine has work
	done    chan struct{} // closed by end
	once    sync.Once

	mu sync.Mutex // guards the fields below
	// closed is set by end: no more queueing, credits to it are dropped.
	closed bool
	// txCredits are the frames the switch may still send the peer;
	// peerGrant is the peer's hello grant, which returns never exceed.
	txCredits, peerGrant int
	// rxAvail are the credits the peer holds: frames it may still send.
	rxAvail int
	// held are this session's received frames still in the switch; ret
	// the credits of those that left and whose return is not yet sent.
	held, ret int
	// voq holds the frames waiting to go to the peer, per source port.
	voq    []fifo
	queued int
	rr     int
	// stalled is set while frames wait for credit (counts stalls once).
	stalled bool
	// endReason is why the session ended, for the log.
	endReason string
}

// handshake reads the peer's hello, answers it and, if it was accepted,
// runs the session. It owns c.
func (p *port) handshake(c *net.UnixConn) {
	sw := p.sw
	c.SetReadBuffer(socketBuffer)
	c.SetWriteBuffer(socketBuffer)
	c.SetReadDeadline(time.Now().Add(helloTimeout))
	buf := make([]byte, wire.HeaderSize+wire.HelloFixedSize+2*wire.MaxHelloGPUs+wire.MaxNameLen+1)
	n, _, flags, _, err := c.ReadMsgUnix(buf, nil)
	if err != nil || n == 0 {
		p.c.rejected.Add(1)
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	var hello wire.Hello
	var credits uint16
	status := uint8(wire.StatusOK)
	h, err := wire.Parse(buf[:n])
	switch {
	case errors.Is(err, wire.ErrVersion):
		status = wire.StatusVersion
	case err != nil || flags&syscall.MSG_TRUNC != 0 || h.Type() != wire.TypeHello || h.Status() != 0 || h.Credits() == 0:
		status = wire.StatusMalformed
	default:
		hello, err = wire.ParseHello(h.Payload())
		if err != nil || hello.Role() != wire.RoleGPU || hello.NumGPUs() == 0 {
			status = wire.StatusMalformed
		}
		credits = h.Credits()
	}
	var s *session
	if status == wire.StatusOK {
		s, status = p.attach(c, hello, int(credits))
	}
	ans := wire.AppendHelloFrame(nil, status, uint16(sw.cfg.Credits), &wire.HelloFields{
		MaxFrame: uint32(sw.cfg.MaxFrame), Role: wire.RoleSwitch, PortNum: uint8(p.num),
		Name: fmt.Sprintf("hilink/port%d", p.num)})
	if status != wire.StatusOK {
		wire.Header(ans).SetCredits(0)
	}
	c.SetWriteDeadline(time.Now().Add(helloTimeout))
	_, werr := c.Write(ans)
	c.SetWriteDeadline(time.Time{})
	if status != wire.StatusOK {
		p.c.rejected.Add(1)
		sw.cfg.Logger.Info("hilink: hello refused", "port", p.num, "status", status)
		c.Close()
		return
	}
	if werr != nil {
		s.endWith("hello answer: " + werr.Error())
		s.run() // returns at once: the session has ended
		return
	}
	sw.cfg.Logger.Info("hilink: port up", "port", p.num, "peer", s.name, "gpus", s.gpus, "credits", credits)
	s.run()
}

// attach makes the session of an accepted hello: the port must be free
// and no GPU id of the hello behind another port.
func (p *port) attach(c *net.UnixConn, hello wire.Hello, credits int) (*session, uint8) {
	sw := p.sw
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sess != nil {
		return nil, wire.StatusPortBusy
	}
	f := hello.Fields()
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.closed {
		return nil, wire.StatusPortBusy
	}
	for _, g := range f.GPUs {
		if sw.routes[g] != nil {
			return nil, wire.StatusGPUInUse
		}
	}
	mc, err := mmsg.New(c, sw.cfg.IOBatch)
	if err != nil {
		return nil, wire.StatusMalformed
	}
	s := &session{sw: sw, p: p, c: c, mc: mc, gpus: f.GPUs, name: f.Name, peerMax: int(f.MaxFrame),
		kick: make(chan struct{}, 1), done: make(chan struct{}),
		txCredits: credits, peerGrant: credits, rxAvail: sw.cfg.Credits, voq: make([]fifo, len(sw.ports))}
	for _, g := range f.GPUs {
		sw.routes[g] = s
	}
	p.sess = s
	p.c.sessions.Add(1)
	return s, wire.StatusOK
}

// run runs the session's transmit goroutine and its receive loop, and
// returns when both are done.
func (s *session) run() {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.txLoop()
	}()
	s.rxLoop()
	s.end()
	wg.Wait()
	s.sw.cfg.Logger.Info("hilink: port down", "port", s.p.num, "peer", s.name, "reason", s.endReason)
}

// endWith ends the session for reason (the first one sticks).
func (s *session) endWith(reason string) {
	s.mu.Lock()
	if s.endReason == "" {
		s.endReason = reason
	}
	s.mu.Unlock()
	s.end()
}

// end closes the connection, takes the session's GPU ids out of the
// route table and drops the frames queued to it, returning their
// credits to their sources. Frames it sent into other ports' queues are
// still delivered. Idempotent.
func (s *session) end() {
	s.once.Do(func() {
		s.c.Close()
		close(s.done)
		sw := s.sw
		sw.mu.Lock()
		for _, g := range s.gpus {
			if sw.routes[g] == s {
				delete(sw.routes, g)
			}
		}
		sw.mu.Unlock()
		s.mu.Lock()
		s.closed = true
		if s.endReason == "" {
			s.endReason = "closed"
		}
		var drop []*frame
		for i := range s.voq {
			for s.voq[i].len() > 0 {
				drop = append(drop, s.voq[i].pop())
			}
		}
		s.queued = 0
		s.mu.Unlock()
		for _, f := range drop {
			s.p.c.drop(DropLinkDown)
			if f.src != s && bounce(f.msg()) {
				f.n = wire.HeaderSize
				f.src.enqueue(s.p.num, f)
				continue
			}
			f.src.release(1)
			sw.putFrame(f)
		}
		s.p.mu.Lock()
		if s.p.sess == s {
			s.p.sess = nil
		}
		s.p.mu.Unlock()
	})
}

// wake tells the transmit goroutine it may have work.
func (s *session) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// release gives back n buffer slots of this session's ingress: their
// credits go back to the peer with the next frame the switch sends it.
func (s *session) release(n int) {
	s.mu.Lock()
	s.held -= n
	if !s.closed {
		s.ret += n
	}
	s.mu.Unlock()
	s.wake()
}

// enqueue queues f, from source port src, towards this session's peer.
func (s *session) enqueue(src int, f *frame) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.p.c.drop(DropLinkDown)
		if f.src != s && bounce(f.msg()) {
			f.n = wire.HeaderSize
			f.src.enqueue(src, f)
			return
		}
		f.src.release(1)
		s.sw.putFrame(f)
		return
	}
	s.voq[src].push(f)
	s.queued++
	s.mu.Unlock()
	s.wake()
}

// rxLoop reads the peer's frames until the connection ends or the peer
// breaks the credit rules.
func (s *session) rxLoop() {
	sw, p := s.sw, s.p
	batch := sw.cfg.IOBatch
	frames := make([]*frame, batch)
	bufs := make([][]byte, batch)
	for i := range frames {
		frames[i] = sw.getFrame()
		bufs[i] = frames[i].buf
	}
	defer func() {
		for _, f := range frames {
			sw.putFrame(f)
		}
	}()
	sizes := make([]int, batch)
	trunc := make([]bool, batch)
	for {
		n, err := s.mc.ReadBatch(bufs, sizes, trunc)
		if err != nil {
			s.endWith("peer closed")
			return
		}
		for i := range n {
			sizes[i] = min(sizes[i], len(bufs[i])) // a truncated message is its buffer's worth
		}
		if p.cap != nil {
			now := time.Now()
			for i := range n {
				p.cap.Write(now, bufs[i][:sizes[i]])
			}
		}
		for i := range n {
			reason, fatal := s.receive(frames[i], sizes[i], trunc[i])
			switch {
			case fatal:
				p.c.drop(reason)
				s.endWith(dropNames[reason])
				return
			case reason == dropNone:
				// Queued: the frame belongs to the queue now.
				frames[i] = sw.getFrame()
				bufs[i] = frames[i].buf
			case reason != dropConsumed:
				p.c.drop(reason)
			}
		}
	}
}

// receive handles one message of the peer. It returns dropNone when the
// frame was queued, dropConsumed when it needed nothing more (a credit
// return), otherwise the reason it was dropped, and whether that ends
// the session.
func (s *session) receive(f *frame, size int, trunc bool) (reason int, fatal bool) {
	sw, p := s.sw, s.p
	h, err := wire.Parse(f.buf[:size])
	// Credits count on data and credit frames only: a stray hello's
	// field means nothing.
	if err == nil && !trunc && (h.Type().Forwarded() || h.Type() == wire.TypeCredit) {
		if c := h.Credits(); c != 0 {
			if !s.credit(int(c)) {
				return DropCreditOverflow, true
			}
		}
		if h.Type() == wire.TypeCredit {
			return dropConsumed, false
		}
	}
	p.c.rxFrames.Add(1)
	p.c.rxBytes.Add(uint64(size))
	// Every message but a credit return takes one of the peer's credits,
	// even one the switch then drops.
	s.mu.Lock()
	if s.rxAvail == 0 {
		s.mu.Unlock()
		return DropOverrun, true
	}
	s.rxAvail--
	s.held++
	s.mu.Unlock()
	reason = dropNone
	var dst *session
	switch {
	case trunc:
		reason = DropOversize
	case err != nil:
		reason = DropMalformed
	case !h.Type().Forwarded():
		reason = DropUnexpected // a second hello
	case !slices.Contains(s.gpus, h.SrcGPU()):
		reason = DropBadSource
	default:
		if dst = sw.route(h.DstGPU()); dst == nil {
			reason = DropNoRoute
		} else if size > dst.peerMax {
			reason = DropOversize
		}
	}
	if reason == DropNoRoute && bounce(f.buf[:size]) {
		// The frame becomes its own answer: the requester learns that
		// the GPU is gone instead of waiting for a response.
		p.c.drop(reason)
		f.n, f.src = wire.HeaderSize, s
		s.enqueue(p.num, f)
		return dropNone, false
	}
	if reason != dropNone {
		s.release(1)
		return reason, false
	}
	f.n, f.src = size, s
	dst.enqueue(p.num, f)
	return dropNone, false
}

// bounce turns a request that ends an operation (the last frame of a
// write, a read request) into its response with status unreachable, in
// place: the response's header is the first wire.HeaderSize octets of
// msg. It reports false for other frames, which are only dropped.
func bounce(msg []byte) bool {
	h := wire.Header(msg)
	f := h.Fields()
	switch {
	case f.Type == wire.TypeWrite && f.Flags&wire.FlagLast != 0:
		f.Type, f.Flags = wire.TypeWriteResp, 0
	case f.Type == wire.TypeReadReq:
		f.Type, f.Flags, f.Length = wire.TypeReadResp, wire.FlagLast, 0
	default:
		return false
	}
	f.Status, f.Credits = wire.StatusUnreachable, 0
	f.SrcGPU, f.DstGPU = f.DstGPU, f.SrcGPU
	h.Encode(&f)
	return true
}

// credit adds n credits returned by the peer; false if that is more than
// it was ever granted.
func (s *session) credit(n int) bool {
	s.mu.Lock()
	ok := s.txCredits+n <= s.peerGrant
	if ok {
		s.txCredits += n
	}
	s.mu.Unlock()
	if ok {
		s.p.c.creditsIn.Add(uint64(n))
		s.wake()
	}
	return ok
}

// txLoop sends queued frames while the peer has credit, and the credits
// of freed ingress slots: in the first frame of a batch, else in a
// credit frame of their own.
func (s *session) txLoop() {
	sw, p := s.sw, s.p
	batch := sw.cfg.IOBatch
	sent := make([]*frame, 0, batch)
	out := make([][]byte, 0, batch)
	creditMsg := make([]byte, wire.HeaderSize)
	for {
		select {
		case <-s.kick:
		case <-s.done:
			return
		}
		for {
			sent, out = sent[:0], out[:0]
			s.mu.Lock()
			if s.closed {
				s.mu.Unlock()
				return
			}
			for s.txCredits > 0 && s.queued > 0 && len(sent) < batch {
				for s.voq[s.rr].len() == 0 {
					s.rr = (s.rr + 1) % len(s.voq)
				}
				sent = append(sent, s.voq[s.rr].pop())
				s.rr = (s.rr + 1) % len(s.voq)
				s.queued--
				s.txCredits--
			}
			if stall := s.queued > 0 && s.txCredits == 0; stall != s.stalled {
				s.stalled = stall
				if stall {
					p.c.creditStalls.Add(1)
				}
			}
			ret := min(s.ret, wire.MaxCredits)
			s.ret -= ret
			// Counted before the peer can see them, so that a frame it
			// sends against them is never taken for an overrun.
			s.rxAvail += ret
			s.mu.Unlock()
			if len(sent) == 0 && ret == 0 {
				break
			}
			var bytes uint64
			for i, f := range sent {
				c := uint16(0)
				if i == 0 {
					c = uint16(ret)
				}
				wire.Header(f.msg()).SetCredits(c)
				out = append(out, f.msg())
				bytes += uint64(f.n)
			}
			if len(sent) == 0 {
				wire.Header(creditMsg).Encode(&wire.Fields{Type: wire.TypeCredit, Credits: uint16(ret)})
				out = append(out, creditMsg)
			}
			// Captured before the write: once written, the peer's answer
			// (its credit for these frames) can reach the rx goroutine's
			// capture first, and the file would show the answer before
			// the question.
			if p.cap != nil {
				now := time.Now()
				for _, m := range out {
					p.cap.Write(now, m)
				}
			}
			err := s.mc.WriteBatch(out)
			for _, f := range sent {
				f.src.release(1)
				sw.putFrame(f)
			}
			if err != nil {
				s.endWith("write: " + err.Error())
				return
			}
			p.c.txFrames.Add(uint64(len(sent)))
			p.c.txBytes.Add(bytes)
			p.c.creditsOut.Add(uint64(ret))
		}
	}
}

// Reasons a frame is dropped, as status names them.
const (
	dropNone = iota - 2
	dropConsumed
	// DropMalformed: the frame does not parse (package wire's rules).
	DropMalformed
	// DropOversize: longer than the switch's MaxFrame, or than the
	// destination's.
	DropOversize
	// DropNoRoute: no port has the destination GPU.
	DropNoRoute
	// DropBadSource: SrcGPU is not one of the port's GPUs.
	DropBadSource
	// DropUnexpected: a hello after the session opened.
	DropUnexpected
	// DropOverrun: a frame without a credit; the port is dropped.
	DropOverrun
	// DropCreditOverflow: credits returned beyond the grant; the port
	// is dropped.
	DropCreditOverflow
	// DropLinkDown: queued to a port whose peer went away.
	DropLinkDown
	numDrops
)

var dropNames = [numDrops]string{"malformed", "oversize", "no-route", "bad-source", "unexpected", "overrun",
	"credit-overflow", "link-down"}

// counters of a port, across its sessions.
type counters struct {
	rxFrames, rxBytes, txFrames, txBytes atomic.Uint64
	creditsIn, creditsOut, creditStalls  atomic.Uint64
	sessions, rejected                   atomic.Uint64
	drops                                [numDrops]atomic.Uint64
}

func (c *counters) drop(reason int) { c.drops[reason].Add(1) }
