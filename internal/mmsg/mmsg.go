// Package mmsg moves batches of SOCK_SEQPACKET messages with recvmmsg and
// sendmmsg: several frames per system call when they are queued, into and
// out of buffers the caller owns (pooled, fixed-size), with no allocation
// per call. It is the one home of batched socket I/O for every end of a
// fabric link: HiSwitch's ports, the embedded rack's NICs and the device
// backend's fabric port.
//
// Sockets are made with the net package, so they are non-blocking and
// registered with Go's poller: a batch that would block parks only its
// goroutine, and closing the connection wakes it. The data path reaches
// the descriptor through SyscallConn (golang.org/x/sys/unix has the types
// and numbers but no wrappers).
//
// The calls are raw system calls (unix.RawSyscall6): MSG_DONTWAIT makes
// them return at once whatever the descriptor's flags, so the runtime
// need not know of them. A plain Syscall tells the scheduler, and the
// first one after the process went idle wakes the runtime's monitor
// thread (sysmon), which then polls every 20 µs for a while: measured on
// a two-guest rack, a third of the fabric's and the device backend's
// thread switches per round trip (docs/device.md).
//
// mmsg imports only the standard library and golang.org/x/sys/unix.
package mmsg

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Conn moves batches over one connection. Each direction has its own
// headers and is owned by one goroutine: one goroutine calls ReadBatch,
// one (possibly another) calls WriteBatch. It never closes the
// connection.
type Conn struct {
	rc syscall.RawConn

	rhdr []unix.Mmsghdr
	riov []unix.Iovec
	rn   int // messages asked for
	rgot int
	rerr syscall.Errno
	rfn  func(fd uintptr) bool // bound once, so each call does not allocate

	whdr   []unix.Mmsghdr
	wiov   []unix.Iovec
	wn     int
	wgot   int
	werr   syscall.Errno
	wfn    func(fd uintptr) bool
	tfn    func(fd uintptr) bool // TryWrite's: never waits
	tbfn   func(fd uintptr) bool // TryWriteBatch's: never waits
	wagain bool
	// dgram: a zero-length message is a message, not the end (UDP).
	dgram bool
}

// New returns a Conn over c moving at most batch messages per call.
func New(c *net.UnixConn, batch int) (*Conn, error) { return newConn(c, batch) }

// NewDatagram returns a Conn over a datagram socket (a connected UDP
// socket) moving at most batch messages per call. Unlike New's, its
// ReadBatch returns zero-length datagrams as messages of size 0: on UDP
// they are input, not the end of a connection.
func NewDatagram(c syscall.Conn, batch int) (*Conn, error) {
	b, err := newConn(c, batch)
	if b != nil {
		b.dgram = true
	}
	return b, err
}

func newConn(c syscall.Conn, batch int) (*Conn, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	batch = max(batch, 1)
	b := &Conn{
		rc:   rc,
		rhdr: make([]unix.Mmsghdr, batch), riov: make([]unix.Iovec, batch),
		whdr: make([]unix.Mmsghdr, batch), wiov: make([]unix.Iovec, batch),
	}
	for i := range b.rhdr {
		b.rhdr[i].Hdr.Iov = &b.riov[i]
		b.rhdr[i].Hdr.Iovlen = 1
		b.whdr[i].Hdr.Iov = &b.wiov[i]
		b.whdr[i].Hdr.Iovlen = 1
	}
	b.rfn = b.recv
	b.wfn = b.send
	b.tfn = b.trySend
	b.tbfn = b.trySendBatch
	return b, nil
}

// Batch is the most messages one call moves.
func (b *Conn) Batch() int { return len(b.rhdr) }

func (b *Conn) recv(fd uintptr) bool {
	r, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.rhdr[0])), uintptr(b.rn), unix.MSG_DONTWAIT, 0, 0)
	if e == unix.EAGAIN || e == unix.EINTR {
		return false
	}
	b.rgot, b.rerr = int(r), e
	return true
}

// ReadBatch reads up to len(bufs) messages (at most Batch), waiting for
// the first. sizes[i] is the length of message i; trunc[i] says it was
// longer than bufs[i] (its first len(bufs[i]) bytes are there). A
// zero-length message means the peer closed (as Go's net package reads
// it); ReadBatch returns io.EOF when the first one is, else the messages
// before it (on a NewDatagram Conn it is a message of size 0). Every
// bufs[i] must be non-empty.
func (b *Conn) ReadBatch(bufs [][]byte, sizes []int, trunc []bool) (int, error) {
	n := min(len(bufs), len(b.rhdr))
	for i := range n {
		b.riov[i].Base = &bufs[i][0]
		b.riov[i].SetLen(len(bufs[i]))
		b.rhdr[i].Hdr.Flags = 0
		b.rhdr[i].Len = 0
	}
	b.rn, b.rgot, b.rerr = n, 0, 0
	if err := b.rc.Read(b.rfn); err != nil {
		return 0, err
	}
	raceAcquire()
	if b.rerr != 0 {
		return 0, os.NewSyscallError("recvmmsg", b.rerr)
	}
	for i := range b.rgot {
		sizes[i] = int(b.rhdr[i].Len)
		trunc[i] = b.rhdr[i].Hdr.Flags&unix.MSG_TRUNC != 0
		if sizes[i] == 0 && !trunc[i] && !b.dgram {
			if i == 0 {
				return 0, io.EOF
			}
			return i, nil
		}
	}
	return b.rgot, nil
}

func (b *Conn) send(fd uintptr) bool {
	r, _, e := unix.RawSyscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&b.whdr[b.wgot])), uintptr(b.wn-b.wgot), unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL, 0, 0)
	if e == unix.EAGAIN || e == unix.EINTR {
		return false
	}
	if e != 0 {
		b.werr = e
		return true
	}
	b.wgot += int(r)
	return b.wgot >= b.wn
}

func (b *Conn) trySend(fd uintptr) bool {
	r, _, e := unix.RawSyscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&b.whdr[0])), 1, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL, 0, 0)
	switch {
	case e == unix.EAGAIN || e == unix.EINTR || (e == 0 && r == 0):
		b.wagain = true
	case e != 0:
		b.werr = e
	}
	return true
}

// TryWrite sends one message (non-empty) if the socket has room now and
// reports whether it did; it never waits. It shares WriteBatch's headers:
// the two are never called at once.
func (b *Conn) TryWrite(buf []byte) (bool, error) {
	b.wiov[0].Base = &buf[0]
	b.wiov[0].SetLen(len(buf))
	b.werr, b.wagain = 0, false
	raceRelease()
	if err := b.rc.Write(b.tfn); err != nil {
		return false, err
	}
	if b.werr != 0 {
		return false, os.NewSyscallError("sendmmsg", b.werr)
	}
	return !b.wagain, nil
}

func (b *Conn) trySendBatch(fd uintptr) bool {
	r, _, e := unix.RawSyscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&b.whdr[0])), uintptr(b.wn), unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL, 0, 0)
	switch {
	case e == unix.EAGAIN || e == unix.EINTR:
	case e != 0:
		b.werr = e
	default:
		b.wgot = int(r)
	}
	return true
}

// TryWriteBatch sends, in order, as many messages of bufs (at most Batch;
// every one non-empty) as the socket takes now and reports how many; it
// never waits. It shares WriteBatch's headers.
func (b *Conn) TryWriteBatch(bufs [][]byte) (int, error) {
	if err := b.writeBatch(bufs, b.tbfn); err != nil {
		return 0, err
	}
	return b.wgot, nil
}

// WriteBatch sends every message of bufs (at most Batch; every one
// non-empty), in order, waiting while the peer's buffer is full.
func (b *Conn) WriteBatch(bufs [][]byte) error { return b.writeBatch(bufs, b.wfn) }

// writeBatch points the write headers at bufs and runs fn in the poller.
func (b *Conn) writeBatch(bufs [][]byte, fn func(fd uintptr) bool) error {
	n := min(len(bufs), len(b.whdr))
	for i := range n {
		b.wiov[i].Base = &bufs[i][0]
		b.wiov[i].SetLen(len(bufs[i]))
	}
	b.wn, b.wgot, b.werr = n, 0, 0
	raceRelease()
	if err := b.rc.Write(fn); err != nil {
		return err
	}
	if b.werr != 0 {
		return os.NewSyscallError("sendmmsg", b.werr)
	}
	return nil
}

// Writer gathers frames for WriteBatch: Send copies a frame into one of
// its buffers and sends the batch when they are all used; Flush sends
// what is gathered. It is an rdma.FlushPort's send side: the engine's
// Send reuses its buffer, hence the copy, and the engine calls Flush after
// every round of work. Owned by one goroutine.
//
// In no-wait mode (SetNoWait) Send and Flush never wait for the peer:
// what the socket cannot take now stays gathered, in order, in buffers
// allocated beyond the batch when the batch's are all held, until a
// Flush in waiting mode. A goroutine that also reads the connection's
// peer uses it, so that it never waits for a peer that waits for it.
type Writer struct {
	c      *Conn
	size   int
	free   [][]byte // buffers of size bytes not in out (at most Batch kept)
	out    [][]byte // the gathered frames, in order, each in its own buffer
	noWait bool
}

// NewWriter returns a Writer over c with c.Batch() buffers of size bytes.
func NewWriter(c *Conn, size int) *Writer {
	w := &Writer{c: c, size: size, free: make([][]byte, c.Batch()), out: make([][]byte, 0, c.Batch())}
	for i := range w.free {
		w.free[i] = make([]byte, size)
	}
	return w
}

// SetNoWait switches Send and Flush between waiting while the socket is
// full (false, the default) and holding frames back (true).
func (w *Writer) SetNoWait(on bool) { w.noWait = on }

// Send gathers a copy of frame (non-empty), sending the batch first when
// every buffer is used. A frame larger than a buffer goes at once, after
// the frames gathered before it (held back, copied, in no-wait mode). An
// error is the batch's: the frames gathered with it are lost.
func (w *Writer) Send(frame []byte) error {
	if len(frame) > w.size {
		if w.noWait {
			w.keep(frame)
			return w.tryFlush()
		}
		if err := w.Flush(); err != nil {
			return err
		}
		w.out = append(w.out, frame) // sent below; never kept
		return w.Flush()
	}
	if len(w.free) == 0 {
		var err error
		if w.noWait {
			err = w.tryFlush()
		} else {
			err = w.Flush()
		}
		if err != nil {
			return err
		}
	}
	w.keep(frame)
	return nil
}

// keep appends a copy of frame to the gathered frames, in a free buffer
// or, when none is free or the frame is oversize, a new one (held back
// beyond the batch: no-wait mode and Gather only).
func (w *Writer) keep(frame []byte) {
	var b []byte
	switch n := len(w.free); {
	case len(frame) > w.size:
		b = make([]byte, len(frame))
	case n > 0:
		b, w.free = w.free[n-1], w.free[:n-1]
	default:
		b = make([]byte, w.size)
	}
	w.out = append(w.out, b[:copy(b, frame)])
}

// Flush sends the gathered frames, in order, with one sendmmsg per batch
// when the socket has room: waiting while it has none, or, in no-wait
// mode, keeping what it cannot take now.
func (w *Writer) Flush() error {
	if w.noWait {
		return w.tryFlush()
	}
	for len(w.out) > 0 {
		n := min(len(w.out), w.c.Batch())
		if err := w.c.WriteBatch(w.out[:n]); err != nil {
			w.sent(len(w.out))
			return err
		}
		w.sent(n)
	}
	return nil
}

// tryFlush sends what the socket takes now; an error loses every frame
// gathered.
func (w *Writer) tryFlush() error {
	for len(w.out) > 0 {
		n, err := w.c.TryWriteBatch(w.out[:min(len(w.out), w.c.Batch())])
		if err != nil {
			w.sent(len(w.out))
			return err
		}
		if n == 0 {
			return nil
		}
		w.sent(n)
	}
	return nil
}

// sent drops the first n gathered frames, keeping their buffers.
func (w *Writer) sent(n int) {
	for _, b := range w.out[:n] {
		if cap(b) == w.size && len(w.free) < w.c.Batch() {
			w.free = append(w.free, b[:w.size])
		}
	}
	k := copy(w.out, w.out[n:])
	clear(w.out[k:]) // no view of a caller's frame stays
	w.out = w.out[:k]
}

// Pending is how many frames are gathered and not yet sent.
func (w *Writer) Pending() int { return len(w.out) }

// Gather keeps a copy of frame (non-empty) after the frames gathered,
// never sending: while another goroutine sends the oldest ones (Head).
func (w *Writer) Gather(frame []byte) { w.keep(frame) }

// Head fills dst with the oldest gathered frames (views, valid until
// Sent drops them) and returns how many: with Sent, it lets a goroutine
// send them with the Conn's WriteBatch while the Writer's owner only
// Gathers. The caller serialises the Writer's methods.
func (w *Writer) Head(dst [][]byte) int { return copy(dst, w.out) }

// Sent drops the n oldest gathered frames (sent, or lost with an error).
func (w *Writer) Sent(n int) { w.sent(min(n, len(w.out))) }

// Conn is the connection the Writer sends on.
func (w *Writer) Conn() *Conn { return w.c }
