package fabric

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Sockets. Port sockets are made with the net package
// (net.ListenUnix("unixpacket"), socket pairs through net.FileConn): it
// gives non-blocking descriptors registered with Go's poller, so a
// blocked read or write parks only its goroutine and Close wakes it, and
// deadlines work for the hello. The data path reaches the descriptor
// through SyscallConn and moves frames with recvmmsg/sendmmsg
// (golang.org/x/sys/unix has the types and numbers but no wrappers),
// several frames per system call when they are queued.

// batchIO moves batches of SEQPACKET messages over one connection. It is
// owned by one goroutine per direction: rx calls readBatch, tx calls
// writeBatch; each direction has its own headers.
type batchIO struct {
	rc syscall.RawConn

	rhdr []unix.Mmsghdr
	riov []unix.Iovec
	rn   int // messages asked for
	rgot int
	rerr syscall.Errno
	rfn  func(fd uintptr) bool // bound once, so each call does not allocate

	whdr []unix.Mmsghdr
	wiov []unix.Iovec
	wn   int
	wgot int
	werr syscall.Errno
	wfn  func(fd uintptr) bool
}

func newBatchIO(c *net.UnixConn, batch int) (*batchIO, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	b := &batchIO{
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
	return b, nil
}

func (b *batchIO) recv(fd uintptr) bool {
	r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.rhdr[0])), uintptr(b.rn), unix.MSG_DONTWAIT, 0, 0)
	if e == unix.EAGAIN || e == unix.EINTR {
		return false
	}
	b.rgot, b.rerr = int(r), e
	return true
}

// readBatch reads up to len(bufs) messages, waiting for the first.
// sizes[i] is the length of message i; trunc[i] says it was longer than
// bufs[i]. A zero-length message means the peer closed (as Go's net
// package reads it); readBatch returns io.EOF when the first one is.
func (b *batchIO) readBatch(bufs [][]byte, sizes []int, trunc []bool) (int, error) {
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
	if b.rerr != 0 {
		return 0, os.NewSyscallError("recvmmsg", b.rerr)
	}
	for i := range b.rgot {
		sizes[i] = int(b.rhdr[i].Len)
		trunc[i] = b.rhdr[i].Hdr.Flags&unix.MSG_TRUNC != 0
		if sizes[i] == 0 && !trunc[i] {
			if i == 0 {
				return 0, io.EOF
			}
			return i, nil
		}
	}
	return b.rgot, nil
}

func (b *batchIO) send(fd uintptr) bool {
	r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&b.whdr[b.wgot])), uintptr(b.wn-b.wgot), unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL, 0, 0)
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

// writeBatch sends every message of bufs, waiting while the peer's
// buffer is full.
func (b *batchIO) writeBatch(bufs [][]byte) error {
	n := min(len(bufs), len(b.whdr))
	for i := range n {
		b.wiov[i].Base = &bufs[i][0]
		b.wiov[i].SetLen(len(bufs[i]))
	}
	b.wn, b.wgot, b.werr = n, 0, 0
	if err := b.rc.Write(b.wfn); err != nil {
		return err
	}
	if b.werr != 0 {
		return os.NewSyscallError("sendmmsg", b.werr)
	}
	return nil
}

// socketPair returns the two ends of a connected SOCK_SEQPACKET pair.
func socketPair() (*net.UnixConn, *net.UnixConn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("fabric: socketpair: %w", err)
	}
	a, err := fileConn(fds[0], "pair-a")
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, err
	}
	b, err := fileConn(fds[1], "pair-b")
	if err != nil {
		a.Close()
		return nil, nil, err
	}
	return a, b, nil
}

// SocketPair returns the two ends of a connected AF_UNIX SOCK_SEQPACKET
// socket pair, for tests and benchmarks that stand in for a NIC.
func SocketPair() (*net.UnixConn, *net.UnixConn, error) { return socketPair() }

func fileConn(fd int, name string) (*net.UnixConn, error) {
	f := os.NewFile(uintptr(fd), name)
	c, err := net.FileConn(f)
	f.Close() // FileConn duplicated it
	if err != nil {
		return nil, fmt.Errorf("fabric: socketpair: %w", err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, errors.New("fabric: socketpair: not a unix socket")
	}
	return uc, nil
}

// setSocketBuffers sets both buffer sizes of a connection, best effort.
// Bigger buffers let a burst wait in the kernel instead of stalling the
// sender.
func setSocketBuffers(c *net.UnixConn, size int) {
	_ = c.SetReadBuffer(size)
	_ = c.SetWriteBuffer(size)
}
