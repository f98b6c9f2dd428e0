package shmport

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultPoll is how long a side polls an empty (or full) ring before it
// sleeps on the eventfd: long enough to catch the next frame of a burst
// or the answer of a ping-pong without a wake-up, short enough that an
// idle port costs nothing.
const DefaultPoll = 5 * time.Microsecond

// Options tune a Conn.
type Options struct {
	// Poll is how long a side polls before sleeping; 0 turns polling off
	// (every wait sleeps on the eventfd at once).
	Poll time.Duration
}

// Conn is one side of a ring pair. See the package comment for its
// ownership rules.
type Conn struct {
	geo  Geometry
	mem  []byte
	poll time.Duration

	tx producer
	rx consumer
	// Eventfds: txData wakes the peer's consumer, txSpace wakes this
	// side's producer, rxData wakes this side's consumer, rxSpace wakes
	// the peer's producer.
	txData, txSpace, rxData, rxSpace *os.File
	// With a peer in this process (local.go), the same four wake-ups as
	// channels; nil otherwise.
	txDataCh, txSpaceCh, rxDataCh, rxSpaceCh chan struct{}
	shut                                     chan struct{} // closed by Shutdown

	txBuf [8]byte // owned by the sender: the value a kick adds (1), never overwritten
	rxBuf [8]byte // owned by the receiver: the same
	// txRead and rxRead take what sleep reads from an eventfd (the
	// count of kicks it consumes). Read into txBuf or rxBuf, the count
	// became the next kick's value: kicks grew with every wake-up until
	// the counter neared 2^64 and a write could only wait.
	txRead, rxRead [8]byte
	rxBatch        [][]byte

	closed    atomic.Bool
	shutOnce  sync.Once
	closeOnce sync.Once
	_         [64]byte
	txIn      atomic.Int32 // senders inside a call
	_         [60]byte
	rxIn      atomic.Int32 // receivers inside a call

	refs *atomic.Int32 // Conns sharing mem (Pair); nil when only this one

	sleeps atomic.Uint64
	kicks  atomic.Uint64
}

// Stats counts the wake-up work of a Conn.
type Stats struct {
	Sleeps uint64 `json:"sleeps"` // waits that went to the eventfd
	Kicks  uint64 `json:"kicks"`  // eventfd writes to wake the peer
}

// Stats returns the counters.
func (c *Conn) Stats() Stats { return Stats{Sleeps: c.sleeps.Load(), Kicks: c.kicks.Load()} }

// Geometry returns the ring geometry.
func (c *Conn) Geometry() Geometry { return c.geo }

// MaxFrame is the largest frame a slot holds.
func (c *Conn) MaxFrame() int { return int(c.geo.BufSize) }

// newConn builds a Conn over a mapping; dialler says which side it is.
func newConn(mem []byte, g Geometry, efd [NumFds]*os.File, dialler bool, opt Options) *Conn {
	rs := g.ringSize()
	up, down := newRing(mem[:rs], g), newRing(mem[rs:2*rs], g)
	c := &Conn{geo: g, mem: mem, poll: opt.Poll, rxBatch: make([][]byte, 0, g.Entries), shut: make(chan struct{})}
	if dialler {
		c.tx, c.rx = producer{r: up}, consumer{r: down}
		c.txData, c.txSpace, c.rxData, c.rxSpace = efd[FdUpData], efd[FdUpSpace], efd[FdDownData], efd[FdDownSpace]
	} else {
		c.tx, c.rx = producer{r: down}, consumer{r: up}
		c.txData, c.txSpace, c.rxData, c.rxSpace = efd[FdDownData], efd[FdDownSpace], efd[FdUpData], efd[FdUpSpace]
	}
	c.txBuf[0], c.rxBuf[0] = 1, 1 // little-endian 1, the value a kick adds
	return c
}

// region is a freshly made region and its descriptors, before they
// are passed on or wrapped.
type region struct {
	mem []byte
	fds [NumFds]int // FdRegion is the memfd
}

func (r *region) close() {
	for _, fd := range r.fds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	if r.mem != nil {
		unix.Munmap(r.mem)
	}
}

// files wraps the eventfds (non-blocking, so Go's poller serves them);
// the region's descriptor stays raw.
func (r *region) files() [NumFds]*os.File {
	var f [NumFds]*os.File
	for i := FdRegion + 1; i < NumFds; i++ {
		f[i] = os.NewFile(uintptr(r.fds[i]), "hinic-port-event")
	}
	return f
}

// create makes a sealed memfd region of geometry g and four eventfds.
func create(g Geometry) (*region, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	r := &region{}
	for i := range r.fds {
		r.fds[i] = -1
	}
	size := g.RegionSize()
	fd, err := unix.MemfdCreate("hinic-port", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("shmport: memfd_create: %w", err)
	}
	r.fds[FdRegion] = fd
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		r.close()
		return nil, fmt.Errorf("shmport: size region: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		r.close()
		return nil, fmt.Errorf("shmport: seal region: %w", err)
	}
	for i := FdRegion + 1; i < NumFds; i++ {
		efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err != nil {
			r.close()
			return nil, fmt.Errorf("shmport: eventfd: %w", err)
		}
		r.fds[i] = efd
	}
	r.mem, err = unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		r.mem = nil
		r.close()
		return nil, fmt.Errorf("shmport: map region: %w", err)
	}
	return r, nil
}

// Pair returns two connected Conns in this process, the dialling side
// first, for tests and benchmarks.
func Pair(g Geometry, opt Options) (*Conn, *Conn, error) {
	r, err := create(g)
	if err != nil {
		return nil, nil, err
	}
	dup := region{fds: [NumFds]int{-1, -1, -1, -1, -1}}
	for i := FdRegion + 1; i < NumFds; i++ {
		fd, err := unix.FcntlInt(uintptr(r.fds[i]), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			dup.mem = nil
			dup.close()
			r.close()
			return nil, nil, fmt.Errorf("shmport: dup: %w", err)
		}
		dup.fds[i] = fd
	}
	unix.Close(r.fds[FdRegion])
	a := newConn(r.mem, g, r.files(), true, opt)
	b := newConn(r.mem, g, dup.files(), false, opt)
	// The two Conns share the mapping: the second Close unmaps it.
	refs := new(atomic.Int32)
	refs.Store(2)
	a.refs, b.refs = refs, refs
	return a, b, nil
}

// Offer runs the dialling side of the setup on uc, after a hello
// exchange in which both sides offered shared memory: it creates the
// region, passes it and reads the answer. With StatusOK it returns the
// Conn; with any other status it returns nil and the status, and uc
// carries the frames. uc's deadline bounds the exchange.
func Offer(uc *net.UnixConn, g Geometry, opt Options) (*Conn, uint16, error) {
	r, err := create(g)
	if err != nil {
		// Tell the acceptor, so both stay on the socket.
		st, derr := Decline(uc)
		return nil, st, derr
	}
	msg := AppendSetup(nil, &Setup{Version: SetupVersion, Geometry: g, RegionSize: g.RegionSize()})
	id, lw := registerLocal(r.fds[FdRegion])
	_, _, werr := uc.WriteMsgUnix(msg, unix.UnixRights(r.fds[:]...), nil)
	unix.Close(r.fds[FdRegion])
	r.fds[FdRegion] = -1
	if werr != nil {
		settleLocal(id, lw)
		r.close()
		return nil, 0, fmt.Errorf("shmport: send setup: %w", werr)
	}
	st, err := readAnswer(uc)
	lw = settleLocal(id, lw)
	if err != nil || st != StatusOK {
		r.close()
		return nil, st, err
	}
	c := newConn(r.mem, g, r.files(), true, opt)
	if lw != nil {
		c.useLocal(lw, true)
	}
	return c, StatusOK, nil
}

// Decline sends a setup that declines shared memory and reads the
// answer.
func Decline(uc *net.UnixConn) (uint16, error) {
	msg := AppendSetup(nil, &Setup{Version: SetupVersion})
	if _, err := uc.Write(msg); err != nil {
		return 0, fmt.Errorf("shmport: send setup: %w", err)
	}
	return readAnswer(uc)
}

func readAnswer(uc *net.UnixConn) (uint16, error) {
	var b [AnswerSize + 1]byte
	n, err := uc.Read(b[:])
	if err != nil {
		return 0, fmt.Errorf("shmport: read answer: %w", err)
	}
	st, err := ParseAnswer(b[:n])
	if err != nil {
		return 0, fmt.Errorf("shmport: answer: %w", err)
	}
	return st, nil
}

// Accept runs the accepting side of the setup on uc: it reads the
// dialler's setup and its descriptors, checks them against budget (the
// largest region accepted) and peerMax (the largest frame the peer said
// it sends or accepts), maps the region and answers. With StatusOK it
// returns the Conn; otherwise nil and the status it answered, and uc
// carries the frames. A read or write error of uc is returned as such.
// uc's deadline bounds the exchange.
func Accept(uc *net.UnixConn, budget uint64, peerMax int, opt Options) (*Conn, uint16, error) {
	buf := make([]byte, SetupSize+1)
	oob := make([]byte, unix.CmsgSpace(4*(NumFds+1)))
	n, oobn, flags, _, err := uc.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, 0, fmt.Errorf("shmport: read setup: %w", err)
	}
	fds, ferr := receivedFds(oob[:oobn])
	closeFds := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	st := uint16(StatusOK)
	s, perr := ParseSetup(buf[:n])
	switch {
	case flags&(syscall.MSG_TRUNC|syscall.MSG_CTRUNC) != 0 || perr != nil:
		st = StatusBadSetup
	default:
		st = s.Check(budget, peerMax)
	}
	if st == StatusOK && (ferr != nil || len(fds) != NumFds) {
		st = StatusBadFds
	}
	var c *Conn
	if st == StatusOK {
		c, st = mapPeer(fds, s.Geometry, opt)
		fds = nil // mapPeer owns them now
	}
	closeFds()
	if _, err := uc.Write(AppendAnswer(nil, st)); err != nil {
		if c != nil {
			c.Close()
		}
		return nil, st, fmt.Errorf("shmport: answer: %w", err)
	}
	return c, st, nil
}

// receivedFds returns every descriptor in the control messages, so that
// the caller can close them whatever else is wrong.
func receivedFds(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for i := range msgs {
		r, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			continue
		}
		fds = append(fds, r...)
	}
	return fds, nil
}

// mapPeer checks the dialler's descriptors (a memfd sealed against
// shrinking, at least as large as the region; four eventfds) and maps
// the region. It takes ownership of fds.
func mapPeer(fds []int, g Geometry, opt Options) (*Conn, uint16) {
	var files [NumFds]*os.File
	defer func() {
		unix.Close(fds[FdRegion])
	}()
	bad := func() (*Conn, uint16) {
		for i, fd := range fds[1:] {
			if files[i+1] != nil {
				files[i+1].Close()
			} else {
				unix.Close(fd)
			}
		}
		return nil, StatusBadFds
	}
	size := g.RegionSize()
	var st unix.Stat_t
	if err := unix.Fstat(fds[FdRegion], &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || uint64(st.Size) < size {
		return bad()
	}
	seals, err := unix.FcntlInt(uintptr(fds[FdRegion]), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		return bad()
	}
	for i := FdRegion + 1; i < NumFds; i++ {
		if !isEventfd(fds[i]) {
			return bad()
		}
		if err := unix.SetNonblock(fds[i], true); err != nil {
			return bad()
		}
		files[i] = os.NewFile(uintptr(fds[i]), "hinic-port-event")
	}
	mem, err := unix.Mmap(fds[FdRegion], 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		for _, f := range files[1:] {
			f.Close()
		}
		return nil, StatusMapFailed
	}
	c := newConn(mem, g, files, false, opt)
	if lw := claimLocal(fds[FdRegion]); lw != nil {
		c.useLocal(lw, false)
	}
	return c, StatusOK
}

// isEventfd reports whether fd is an eventfd (an anonymous inode named
// so in /proc).
func isEventfd(fd int) bool {
	var b [64]byte
	n, err := unix.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd), b[:])
	return err == nil && string(b[:n]) == "anon_inode:[eventfd]"
}

// enter and leave bracket a call of one direction, so Close can wait for
// it before unmapping.
func (c *Conn) enter(in *atomic.Int32) bool {
	in.Add(1)
	if c.closed.Load() {
		in.Add(-1)
		return false
	}
	return true
}

// Send copies frame into the next slot and publishes it, waiting while
// the ring is full. It wakes the peer when the peer sleeps.
func (c *Conn) Send(frame []byte) error {
	if !c.enter(&c.txIn) {
		return ErrClosed
	}
	defer c.txIn.Add(-1)
	if err := c.queue(frame); err != nil {
		return err
	}
	c.tx.publish()
	c.kickConsumer()
	return nil
}

// TrySend sends frame if a slot is free now and reports whether it did;
// it never waits. Send's goroutine rules apply (one sender at a time).
func (c *Conn) TrySend(frame []byte) (bool, error) {
	if !c.enter(&c.txIn) {
		return false, ErrClosed
	}
	defer c.txIn.Add(-1)
	ok, err := c.tryQueue(frame)
	if ok {
		c.tx.publish()
		c.kickConsumer()
	}
	return ok, err
}

// SendBatch sends every frame of frames that fits a slot, publishing as
// it goes and waking the peer once per batch; it returns how many frames
// it dropped for being empty or too big.
func (c *Conn) SendBatch(frames [][]byte) (dropped int, err error) {
	if !c.enter(&c.txIn) {
		return 0, ErrClosed
	}
	defer c.txIn.Add(-1)
	pending := false
	for _, f := range frames {
		if len(f) == 0 || len(f) > int(c.geo.BufSize) {
			dropped++
			continue
		}
		if c.tx.free == 0 {
			if pending {
				c.tx.publish()
				c.kickConsumer()
				pending = false
			}
			if err := c.reserve(); err != nil {
				return dropped, err
			}
		}
		c.tx.put(f)
		pending = true
	}
	if pending {
		c.tx.publish()
		c.kickConsumer()
	}
	return dropped, nil
}

// Queue copies frame into the next slot without publishing it: the
// consumer sees it at the next Flush (or Send, TrySend, SendBatch),
// together with every frame queued before it, for one wake-up. When the
// ring is full, Queue publishes what is queued and waits for room as
// Send does. Queue and Flush follow Send's goroutine rules.
func (c *Conn) Queue(frame []byte) error {
	if !c.enter(&c.txIn) {
		return ErrClosed
	}
	defer c.txIn.Add(-1)
	return c.queue(frame)
}

// TryQueue is Queue that never waits: it copies frame into the next slot
// when one is free now and reports whether it did. When none is, it
// publishes what is queued (and wakes the peer if it sleeps), so that
// the peer can free slots, and returns false. Queue's rules apply.
func (c *Conn) TryQueue(frame []byte) (bool, error) {
	if !c.enter(&c.txIn) {
		return false, ErrClosed
	}
	defer c.txIn.Add(-1)
	return c.tryQueue(frame)
}

// tryQueue is TryQueue inside a call that entered the sending direction.
func (c *Conn) tryQueue(frame []byte) (bool, error) {
	if len(frame) == 0 || len(frame) > int(c.geo.BufSize) {
		return false, ErrTooBig
	}
	if c.tx.free == 0 {
		if n, err := c.tx.space(); err != nil || n == 0 {
			if err == nil && c.tx.pending() {
				c.tx.publish()
				c.kickConsumer()
			}
			return false, err
		}
	}
	c.tx.put(frame)
	return true, nil
}

// queue is Queue inside a call that entered the sending direction.
func (c *Conn) queue(frame []byte) error {
	if len(frame) == 0 || len(frame) > int(c.geo.BufSize) {
		return ErrTooBig
	}
	if err := c.reserve(); err != nil {
		return err
	}
	c.tx.put(frame)
	return nil
}

// Flush publishes the frames Queue put and wakes the peer once when it
// sleeps. With nothing queued it does nothing.
func (c *Conn) Flush() error {
	if !c.enter(&c.txIn) {
		return ErrClosed
	}
	defer c.txIn.Add(-1)
	if c.tx.pending() {
		c.tx.publish()
		c.kickConsumer()
	}
	return nil
}

// queued is how many frames Queue put that no Flush has published yet
// (the tests read it).
func (c *Conn) queued() int { return int(c.tx.head - c.tx.pub) }

// reserve makes sure a slot is free, polling and then sleeping. Frames
// queued and not yet published are published before it waits: the
// consumer frees no slot it cannot see.
func (c *Conn) reserve() error {
	if c.tx.free > 0 {
		return nil
	}
	n, err := c.tx.space()
	if err != nil || n > 0 {
		return err
	}
	if c.tx.pending() {
		c.tx.publish()
		c.kickConsumer()
	}
	if c.poll > 0 {
		deadline := time.Now().Add(c.poll)
		for i := 0; ; i++ {
			runtime.Gosched()
			if n, err := c.tx.space(); err != nil || n > 0 {
				return err
			}
			if c.closed.Load() {
				return ErrClosed
			}
			if i&15 == 15 && time.Now().After(deadline) {
				break
			}
		}
	}
	w := c.tx.r.prodWait
	for {
		w.Store(1)
		if n, err := c.tx.space(); err != nil || n > 0 {
			w.Store(0)
			return err
		}
		c.sleeps.Add(1)
		if err := c.sleep(c.txSpace, c.txSpaceCh, c.sleepBuf(true)); err != nil {
			return err
		}
		w.Store(0)
	}
}

// kickConsumer wakes the peer's consumer when it sleeps. The store of
// head before the load of the waiting word (both sequentially consistent)
// pairs with the consumer's store of the word before its load of head,
// so a frame is never left unseen by a sleeping consumer.
func (c *Conn) kickConsumer() {
	if c.tx.r.consWait.Load() != 0 {
		c.kicks.Add(1)
		c.kick(c.txData, c.txDataCh, c.txBuf[:])
	}
}

func (c *Conn) kickProducer() {
	if c.rx.r.prodWait.Load() != 0 {
		c.kicks.Add(1)
		c.kick(c.rxSpace, c.rxSpaceCh, c.rxBuf[:])
	}
}

// sleep waits for a kick on ch when the peer is local, else on f. A
// peer that shares f could clear its O_NONBLOCK flag to make the read
// block an OS thread; the flag is checked first, and such a peer is
// treated as broken.
// sleepBuf is where the sender's (tx) or the receiver's sleep reads its
// eventfd.
func (c *Conn) sleepBuf(tx bool) []byte {
	if tx {
		return c.txRead[:]
	}
	return c.rxRead[:]
}

func (c *Conn) sleep(f *os.File, ch chan struct{}, buf []byte) error {
	if c.closed.Load() {
		return ErrClosed
	}
	if ch != nil {
		select {
		case <-ch:
			return nil
		case <-c.shut:
			return ErrClosed
		}
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return ErrClosed
	}
	nonblock := true
	rc.Control(func(fd uintptr) {
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		nonblock = err == nil && fl&unix.O_NONBLOCK != 0
	})
	if !nonblock {
		return ErrCorrupt
	}
	if _, err := f.Read(buf[:8]); err != nil {
		if errors.Is(err, os.ErrClosed) {
			return ErrClosed
		}
		return fmt.Errorf("shmport: wait: %w", err)
	}
	return nil
}

// Recv waits for at least one frame, then hands fn up to max waiting
// frames in place (valid until fn returns; fn must not keep them) and
// gives their slots back. It returns the number of frames handed to fn
// and the number of descriptors dropped as malformed.
func (c *Conn) Recv(max int, fn func(frames [][]byte)) (n, bad int, err error) {
	if !c.enter(&c.rxIn) {
		return 0, 0, ErrClosed
	}
	defer c.rxIn.Add(-1)
	avail, err := c.waitData()
	if err != nil {
		return 0, 0, err
	}
	take := min(avail, uint32(max))
	batch, bad := c.rx.collect(take, c.rxBatch[:0])
	if len(batch) > 0 {
		fn(batch)
	}
	clear(batch)
	c.rx.release(take)
	c.kickProducer()
	return len(batch), bad, nil
}

// waitData returns how many frames wait, polling and then sleeping while
// there are none.
func (c *Conn) waitData() (uint32, error) {
	if n, err := c.rx.avail(); err != nil || n > 0 {
		return n, err
	}
	if c.poll > 0 {
		deadline := time.Now().Add(c.poll)
		for i := 0; ; i++ {
			runtime.Gosched()
			if n, err := c.rx.avail(); err != nil || n > 0 {
				return n, err
			}
			if c.closed.Load() {
				return 0, ErrClosed
			}
			if i&15 == 15 && time.Now().After(deadline) {
				break
			}
		}
	}
	w := c.rx.r.consWait
	for {
		w.Store(1)
		if n, err := c.rx.avail(); err != nil || n > 0 {
			w.Store(0)
			return n, err
		}
		c.sleeps.Add(1)
		if err := c.sleep(c.rxData, c.rxDataCh, c.sleepBuf(false)); err != nil {
			return 0, err
		}
		w.Store(0)
	}
}

// Shutdown wakes both directions and makes every later call fail with
// ErrClosed; the region stays mapped until Close. It is idempotent and
// safe from any goroutine, including from inside a Recv callback.
func (c *Conn) Shutdown() {
	c.shutOnce.Do(func() {
		c.closed.Store(true)
		close(c.shut)
		for _, f := range []*os.File{c.txData, c.txSpace, c.rxData, c.rxSpace} {
			f.Close()
		}
	})
}

// Close shuts the Conn down, waits until neither direction is inside a
// call and unmaps the region. It is idempotent; it must not be called
// from inside a Recv callback.
func (c *Conn) Close() error {
	c.Shutdown()
	c.closeOnce.Do(func() {
		for c.txIn.Load() > 0 || c.rxIn.Load() > 0 {
			time.Sleep(20 * time.Microsecond)
		}
		if c.refs == nil || c.refs.Add(-1) == 0 {
			unix.Munmap(c.mem)
		}
	})
	return nil
}
