package fabric

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/PacketFive/hinic/internal/clock"
	"github.com/PacketFive/hinic/internal/shmport"
)

// streamMaxFrame is QEMU's NET_BUFSIZE (4096 + 65536): a stream length
// above it cannot come from QEMU, so the stream is out of step and the
// connection is closed.
const streamMaxFrame = 4096 + 65536

// Transports of a session, as `hinic fabric status` shows them.
const (
	TransportSocket = "socket" // SOCK_SEQPACKET, one message per frame
	TransportShm    = "shm"    // a shared-memory ring pair (package shmport)
	TransportStream = "stream" // QEMU -netdev stream framing
)

// session is one peer's connection to a port. rx and tx goroutines run
// while it lasts; either ends it with shutdown, rx then tears it down. A
// shared-memory session has a third goroutine, watch, that ends it when
// the socket closes (the peer went away).
type session struct {
	p      *port
	conn   *net.UnixConn
	stream bool
	shm    *shmport.Conn // nil unless the frames go through rings

	once   sync.Once
	done   chan struct{} // closed by shutdown
	txDone chan struct{} // closed when tx has returned
}

// attach starts a session on conn. It fails with ErrPortBusy when a peer
// holds the port and ErrClosed when the switch is closing.
func (p *port) attach(conn *net.UnixConn, peer PeerInfo, stream bool) error {
	return p.attachShm(conn, peer, stream, nil)
}

// attachShm is attach for a session whose frames go through shm (when
// not nil); the session owns shm from here on, even on failure.
func (p *port) attachShm(conn *net.UnixConn, peer PeerInfo, stream bool, shm *shmport.Conn) error {
	err := p.attachSession(conn, peer, stream, shm)
	if err != nil && shm != nil {
		shm.Close()
	}
	return err
}

func (p *port) attachSession(conn *net.UnixConn, peer PeerInfo, stream bool, shm *shmport.Conn) error {
	sw := p.sw
	p.mu.Lock()
	// Checked under p.mu: close sets closing before it ends the ports'
	// sessions (under p.mu), so a session is either refused here or
	// seen and ended there.
	if sw.closing.Load() {
		p.mu.Unlock()
		return ErrClosed
	}
	if p.sess != nil {
		p.mu.Unlock()
		return ErrPortBusy
	}
	s := &session{p: p, conn: conn, stream: stream, shm: shm, done: make(chan struct{}), txDone: make(chan struct{})}
	p.sess, p.peer, p.since = s, peer, sw.clock.Now()
	p.sessions++
	p.abort.Store(false)
	if shm != nil {
		sw.wg.Add(3) // under p.mu, so close's Wait cannot miss it
	} else {
		sw.wg.Add(2)
	}
	p.mu.Unlock()

	if shm == nil {
		setSocketBuffers(conn, sw.sockBuf)
	}
	p.eg.setUp(true, nil)
	p.up.Store(true)
	if p.cfg.link == LinkIB && sw.ib != nil {
		sw.ibMu.Lock()
		sw.ib.SetPortLink(p.cfg.num, true)
		sw.ibMu.Unlock()
	}
	sw.log.Info("port up", "port", p.cfg.num, "peer", peer.Name, "role", peer.Role, "transport", s.transport())
	if shm != nil {
		go p.watch(s)
	}
	go p.rxLoop(s)
	go p.txLoop(s)
	return nil
}

func (s *session) transport() string {
	switch {
	case s.stream:
		return TransportStream
	case s.shm != nil:
		return TransportShm
	}
	return TransportSocket
}

// watch reads the socket of a shared-memory session, where nothing more
// is expected, and ends the session when it closes. A message there is a
// peer that does not keep the protocol: counted and dropped.
func (p *port) watch(s *session) {
	defer p.sw.wg.Done()
	var b [64]byte
	for {
		n, err := s.conn.Read(b[:])
		if err != nil || n == 0 {
			s.shutdown()
			return
		}
		p.ctr.drops[DropMalformed].Add(1)
	}
}

// shutdown ends the session: the connection closes, which wakes rx and
// tx, and rx goroutines blocked on a full lossless queue give up.
func (s *session) shutdown() {
	s.once.Do(func() {
		s.p.abort.Store(true)
		s.conn.Close()
		if s.shm != nil {
			s.shm.Shutdown() // wakes rx and tx; teardown unmaps
		}
		close(s.done)
		s.p.sw.wakeWaiters()
	})
}

// endSession ends the current session, if any, without waiting.
func (p *port) endSession() {
	p.mu.Lock()
	s := p.sess
	p.mu.Unlock()
	if s != nil {
		s.shutdown()
	}
}

// teardown runs on rx after both goroutines of s have stopped: the port
// goes down, queued frames are dropped, FDB entries on it flushed.
func (p *port) teardown(s *session) {
	sw := p.sw
	p.up.Store(false)
	p.eg.setUp(false, func(f *frame, data bool) {
		if data {
			p.ctr.drops[DropLinkDown].Add(1)
		}
		sw.release(f)
	})
	sw.fdb.flushPort(p.idx)
	if p.cfg.link == LinkIB && sw.ib != nil {
		sw.ibMu.Lock()
		sw.ib.SetPortLink(p.cfg.num, false)
		sw.ibMu.Unlock()
	}
	// The peer is gone: the next one starts with no pause in force.
	p.eg.mu.Lock()
	for tc := range p.xoff {
		p.xoff[tc].Store(false)
	}
	p.eg.mu.Unlock()
	if p.faults != nil {
		p.faults.flush(sw)
	}
	p.cap.flush()
	p.mu.Lock()
	peer := p.peer
	p.sess = nil
	p.peer = PeerInfo{}
	p.mu.Unlock()
	sw.log.Info("port down", "port", p.cfg.num, "peer", peer.Name)
}

func (p *port) rxLoop(s *session) {
	defer p.sw.wg.Done()
	switch {
	case s.stream:
		p.rxStream(s)
	case s.shm != nil:
		p.rxShm(s)
	default:
		p.rxPacket(s)
	}
	s.shutdown()
	<-s.txDone
	if s.shm != nil {
		s.shm.Close() // neither rx nor tx can touch the rings now
	}
	p.teardown(s)
}

// rxPacket reads SEQPACKET messages in batches into pooled frames and
// runs each through the pipeline.
func (p *port) rxPacket(s *session) {
	sw := p.sw
	bio, err := newBatchIO(s.conn, sw.ioBatch)
	if err != nil {
		return
	}
	n := sw.ioBatch
	frames := make([]*frame, n)
	bufs := make([][]byte, n)
	sizes := make([]int, n)
	trunc := make([]bool, n)
	defer func() {
		for _, f := range frames {
			sw.pool.put(f)
		}
	}()
	for i := range frames {
		frames[i] = sw.pool.get()
	}
	// Read one byte more than max-frame so that an oversize frame shows
	// as such even when the pool's buffers are exactly max-frame long.
	limit := min(p.cfg.maxFrame+1, sw.pool.size)
	for {
		for i := range frames {
			bufs[i] = frames[i].buf[:limit]
		}
		got, err := bio.ReadBatch(bufs, sizes, trunc)
		if err != nil {
			return
		}
		now := sw.clock.Now()
		p.lone = got == 1
		for i := range got {
			f := frames[i]
			if trunc[i] || sizes[i] > p.cfg.maxFrame {
				p.ctr.rxFrames.Add(1)
				p.ctr.rxBytes.Add(uint64(sizes[i]))
				p.ctr.drops[DropOversize].Add(1)
				continue // the buffer is reused
			}
			f.buf = f.buf[:sizes[i]]
			sw.receive(p, f, now)
			frames[i] = sw.pool.get()
		}
	}
}

// rxShm takes frames from the peer's ring in batches. Each is copied
// into a pooled frame before the pipeline sees it: the peer can still
// write the slot, and the frame outlives the slot in the egress queues.
func (p *port) rxShm(s *session) {
	sw := p.sw
	handle := func(frames [][]byte) {
		now := sw.clock.Now()
		p.lone = len(frames) == 1
		for _, b := range frames {
			if len(b) > p.cfg.maxFrame {
				p.ctr.rxFrames.Add(1)
				p.ctr.rxBytes.Add(uint64(len(b)))
				p.ctr.drops[DropOversize].Add(1)
				continue
			}
			f := sw.pool.get()
			f.buf = f.buf[:len(b)]
			copy(f.buf, b)
			sw.receive(p, f, now)
		}
	}
	for {
		_, bad, err := s.shm.Recv(sw.ioBatch, handle)
		if bad > 0 {
			p.ctr.drops[DropMalformed].Add(uint64(bad))
		}
		if err != nil {
			if errors.Is(err, shmport.ErrCorrupt) {
				sw.log.Warn("port ring corrupt, session ended", "port", p.cfg.num)
			}
			return
		}
	}
}

// rxStream reads QEMU -netdev stream framing: a 4-byte big-endian length,
// then the frame.
func (p *port) rxStream(s *session) {
	sw := p.sw
	br := bufio.NewReaderSize(s.conn, 256<<10)
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(hdr[:]))
		switch {
		case n > streamMaxFrame:
			p.ctr.drops[DropMalformed].Add(1)
			return
		case n > p.cfg.maxFrame:
			p.ctr.rxFrames.Add(1)
			p.ctr.rxBytes.Add(uint64(n))
			p.ctr.drops[DropOversize].Add(1)
			if _, err := br.Discard(n); err != nil {
				return
			}
			continue
		}
		f := sw.pool.get()
		f.buf = f.buf[:n]
		if _, err := io.ReadFull(br, f.buf); err != nil {
			sw.pool.put(f)
			return
		}
		sw.receive(p, f, sw.clock.Now())
	}
}

// txLoop sends what the scheduler picks, in batches, until the session
// ends.
func (p *port) txLoop(s *session) {
	defer p.sw.wg.Done()
	defer close(s.txDone)
	defer s.shutdown()
	sw := p.sw
	n := sw.ioBatch
	out := make([]*frame, n)
	bufs := make([][]byte, n)
	var write func([][]byte) error
	var try func([]byte) (bool, error) // a write that never waits, for cut-through
	switch {
	case s.stream:
		w := newStreamWriter(s.conn, n)
		write = w.write
	case s.shm != nil:
		write = func(bufs [][]byte) error {
			// Frames over the peer's slot size exceed what it said it
			// accepts: dropped, as its socket would truncate them.
			d, err := s.shm.SendBatch(bufs)
			if d > 0 {
				p.ctr.drops[DropOversize].Add(uint64(d))
			}
			return err
		}
		try = s.shm.TrySend
	default:
		bio, err := newBatchIO(s.conn, n)
		if err != nil {
			return
		}
		write = bio.WriteBatch
		try = bio.TryWrite
	}
	if try != nil {
		// A frame that finds the port idle is written by the rx
		// goroutine that forwards it (egress.enqueue). One the peer
		// cannot take now, or that fails, goes to the queue, where
		// the tx goroutine's write meets the error.
		p.eg.setCut(func(f *frame) bool {
			p.capture(f)
			if ok, err := try(f.buf); !ok || err != nil {
				return false
			}
			p.sent(f)
			return true
		})
		defer p.eg.setCut(nil)
	}
	var timer clock.Timer
	var timerAt time.Time
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		got, wake := p.eg.take(out, sw.clock.Now())
		if got == 0 {
			if !wake.IsZero() && (timer == nil || !timerAt.Equal(wake)) {
				if timer != nil {
					timer.Stop()
				}
				timerAt = wake
				timer = sw.clock.AfterFunc(wake.Sub(sw.clock.Now()), p.eg.kick)
			}
			select {
			case <-p.eg.notify:
			case <-s.done:
				return
			}
			continue
		}
		for i := range got {
			bufs[i] = out[i].buf
			p.capture(out[i])
		}
		err := write(bufs[:got])
		for i := range got {
			f := out[i]
			if err == nil {
				p.sent(f)
			} else {
				if f.in >= 0 {
					p.ctr.drops[DropLinkDown].Add(1)
				}
				sw.release(f)
			}
			out[i] = nil
		}
		p.eg.txDone() // after the capture: it sees frames in wire order
		if err != nil {
			return
		}
	}
}

// capture records a frame about to be written to the peer in the port's
// capture, once. It runs before the write: after it, the peer's answer
// could reach the rx goroutine's capture first, and the file would show
// the answer before the question. Without a capture it reads no clock.
func (p *port) capture(f *frame) {
	if p.cap != nil && !f.captured {
		f.captured = true
		p.cap.write(p.sw.clock.Now(), f.buf)
	}
}

// sent counts a frame written to the peer and releases it (the tx
// goroutine, or an rx goroutine cutting it through).
func (p *port) sent(f *frame) {
	if f.in < 0 {
		p.ctr.pfcTxClass[f.tc&(NumTC-1)].Add(1)
		p.ctr.pfcTxBytes.Add(uint64(len(f.buf)))
	} else {
		p.ctr.txClassFrames[f.tc&(NumTC-1)].Add(1)
		p.ctr.txClassBytes[f.tc&(NumTC-1)].Add(uint64(len(f.buf)))
	}
	p.sw.release(f)
}

// streamWriter writes frames with QEMU stream framing, a batch per
// writev.
type streamWriter struct {
	c    *net.UnixConn
	hdrs [][4]byte
	vec  [][]byte
}

func newStreamWriter(c *net.UnixConn, batch int) *streamWriter {
	return &streamWriter{c: c, hdrs: make([][4]byte, batch), vec: make([][]byte, 0, 2*batch)}
}

func (w *streamWriter) write(bufs [][]byte) error {
	w.vec = w.vec[:0]
	for i, b := range bufs {
		binary.BigEndian.PutUint32(w.hdrs[i][:], uint32(len(b)))
		w.vec = append(w.vec, w.hdrs[i][:], b)
	}
	nb := net.Buffers(w.vec)
	_, err := nb.WriteTo(w.c)
	return err
}
