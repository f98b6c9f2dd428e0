// Package ivshmem speaks QEMU's ivshmem server protocol (docs/device.md,
// device-facts §1.5) from both ends: the server side a device backend
// uses to hand a guest its shared memory and eventfds (Device: BAR2, the
// eventfds each way and the epoll set the backend waits on), and the
// client side (Dial, DialDevice) with which a guest simulator plays
// QEMU's ivshmem-doorbell.
// The NIC (internal/device) and the GPU (internal/gpu) backends share it.
//
// ivshmem imports only the standard library and golang.org/x/sys/unix.
package ivshmem

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BackendPeerID is the ivshmem peer ID of the backend (the pseudo-peer
// whose doorbell vectors the guest rings, device-facts §1.6).
const BackendPeerID = 0

// Send sends one ivshmem server message: a signed 64-bit little-endian
// integer, optionally with one fd (SCM_RIGHTS; fd < 0 for none), in its
// own sendmsg as the reference server does.
func Send(c *net.UnixConn, v int64, fd int) error {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(v))
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	n, oobn, err := c.WriteMsgUnix(b[:], oob, nil)
	if err != nil {
		return err
	}
	if n != 8 || oobn != len(oob) {
		return fmt.Errorf("short ivshmem message")
	}
	return nil
}

// Setup sends the whole connect sequence to a new client: version 0, its
// peer ID, the shared-memory fd, the backend's doorbell eventfds (as
// connect notifications of peer BackendPeerID) and the client's own
// interrupt eventfds.
func Setup(c *net.UnixConn, peerID int, shmFD int, doorbells, irqs []int) error {
	if err := Send(c, 0, -1); err != nil {
		return fmt.Errorf("version: %w", err)
	}
	if err := Send(c, int64(peerID), -1); err != nil {
		return fmt.Errorf("peer ID: %w", err)
	}
	if err := Send(c, -1, shmFD); err != nil {
		return fmt.Errorf("shm fd: %w", err)
	}
	for _, fd := range doorbells {
		if err := Send(c, BackendPeerID, fd); err != nil {
			return fmt.Errorf("doorbell fd: %w", err)
		}
	}
	for _, fd := range irqs {
		if err := Send(c, int64(peerID), fd); err != nil {
			return fmt.Errorf("interrupt fd: %w", err)
		}
	}
	return nil
}

// NewEventfds creates n non-blocking eventfds (QEMU makes them
// non-blocking anyway, for both ends).
func NewEventfds(n int) ([]int, error) {
	fds := make([]int, 0, n)
	for range n {
		fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err != nil {
			CloseFDs(fds)
			return nil, fmt.Errorf("eventfd: %w", err)
		}
		fds = append(fds, fd)
	}
	return fds, nil
}

// CloseFDs closes every fd that is not negative.
func CloseFDs(fds []int) {
	for _, fd := range fds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// Signal adds 1 to an eventfd. EAGAIN (counter saturated) is fine: the
// reader is woken anyway.
//
// Signal and Drain are raw system calls, which the scheduler does not
// see: a plain one wakes the runtime's monitor thread when the process
// was idle, a thread switch per doorbell or interrupt (see mmsg). They
// never block: the eventfds are non-blocking (NewEventfds), a write
// blocks only at a count of 2^64-2, and Drain reads a doorbell the
// epoll set reported readable, whose count only the backend takes.
func Signal(fd int) {
	var one [8]byte
	binary.LittleEndian.PutUint64(one[:], 1)
	_, _, _ = unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&one[0])), 8)
}

// Drain reads and clears an eventfd, reporting whether it was set.
func Drain(fd int) bool {
	var b [8]byte
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), 8)
	return e == 0 && n == 8
}

// NewSharedMemory creates the BAR2 memfd of size bytes (a power of two)
// and maps it.
func NewSharedMemory(name string, size int) (int, []byte, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return -1, nil, fmt.Errorf("memfd: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("memfd size: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("map memfd: %w", err)
	}
	return fd, mem, nil
}

// Peer is the client end: what QEMU's ivshmem-doorbell holds after the
// setup. Tests and simulators use it; it is not safe for concurrent
// Close.
type Peer struct {
	Conn  *net.UnixConn
	ID    int    // IVPosition
	SHM   []byte // BAR2, mapped shared
	shmFD int
	DB    []int // backend's doorbell eventfds (the peer writes)
	IRQ   []int // the peer's interrupt eventfds (the peer reads)
}

// Dial connects to an ivshmem server and reads the setup messages until
// it has the shared memory and vectors eventfds each way, as QEMU does.
func Dial(ctx context.Context, socket string, vectors int) (*Peer, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("ivshmem: connect %s: %w", socket, err)
	}
	p := &Peer{Conn: c.(*net.UnixConn), shmFD: -1}
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(10 * time.Second)
	}
	p.Conn.SetReadDeadline(dl)
	if err := p.setup(vectors); err != nil {
		p.Close()
		return nil, fmt.Errorf("ivshmem: setup: %w", err)
	}
	p.Conn.SetReadDeadline(time.Time{})
	return p, nil
}

// DialDevice is Dial for a simulated guest of a device whose BAR2 starts
// with a device header of hdrSize bytes: a smaller BAR2 is an error.
func DialDevice(ctx context.Context, socket string, vectors, hdrSize int) (*Peer, error) {
	p, err := Dial(ctx, socket, vectors)
	if err != nil {
		return nil, err
	}
	if len(p.SHM) < hdrSize {
		p.Close()
		return nil, fmt.Errorf("ivshmem: BAR2 of %d bytes, less than the %d-byte device header", len(p.SHM), hdrSize)
	}
	return p, nil
}

func (p *Peer) recv() (int64, int, error) {
	var b [8]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	fd := -1
	got := 0
	for got < 8 {
		n, oobn, _, _, err := p.Conn.ReadMsgUnix(b[got:], oob)
		if err != nil {
			return 0, -1, err
		}
		if n == 0 {
			return 0, -1, errors.New("connection closed")
		}
		if oobn > 0 {
			msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
			if err != nil {
				return 0, -1, err
			}
			for _, m := range msgs {
				fds, err := unix.ParseUnixRights(&m)
				if err != nil {
					continue
				}
				for _, f := range fds {
					if fd < 0 {
						fd = f
					} else {
						unix.Close(f)
					}
				}
			}
		}
		got += n
	}
	return int64(binary.LittleEndian.Uint64(b[:])), fd, nil
}

// keepEventfd appends fd, made non-blocking, to the first n eventfds of
// a peer, and closes it past them.
func keepEventfd(fds []int, fd, n int) []int {
	if len(fds) >= n {
		unix.Close(fd)
		return fds
	}
	unix.SetNonblock(fd, true)
	return append(fds, fd)
}

func (p *Peer) setup(n int) error {
	v, fd, err := p.recv()
	if err != nil {
		return err
	}
	if v != 0 || fd >= 0 {
		return fmt.Errorf("bad version message %d (fd %d)", v, fd)
	}
	id, fd, err := p.recv()
	if err != nil {
		return err
	}
	if id < 0 || id > 0xffff || fd >= 0 {
		return fmt.Errorf("bad ID message %d", id)
	}
	p.ID = int(id)
	for p.shmFD < 0 || len(p.DB) < n || len(p.IRQ) < n {
		m, fd, err := p.recv()
		if err != nil {
			return err
		}
		switch {
		case m == -1:
			if fd < 0 {
				return errors.New("shm message without fd")
			}
			p.shmFD = fd
		case fd < 0:
			return fmt.Errorf("disconnect of peer %d during setup", m)
		case m == id:
			p.IRQ = keepEventfd(p.IRQ, fd, n)
		case m == BackendPeerID:
			p.DB = keepEventfd(p.DB, fd, n)
		default:
			unix.Close(fd)
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(p.shmFD, &st); err != nil {
		return err
	}
	size := uint64(st.Size)
	if size == 0 || size&(size-1) != 0 {
		return fmt.Errorf("BAR2 size %d is not a power of two", size)
	}
	shm, err := unix.Mmap(p.shmFD, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	p.SHM = shm
	return nil
}

// Ring writes doorbell v (BAR0 Doorbell = backend<<16 | v).
func (p *Peer) Ring(v int) { Signal(p.DB[v]) }

// WaitIRQ waits up to d for interrupt vector v and returns the count it
// read (0: none came).
func (p *Peer) WaitIRQ(v int, d time.Duration) uint64 {
	fds := []unix.PollFd{{Fd: int32(p.IRQ[v]), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, int(d/time.Millisecond))
	if err != nil || n == 0 {
		return 0
	}
	var b [8]byte
	if k, err := unix.Read(p.IRQ[v], b[:]); err != nil || k != 8 {
		return 0
	}
	return binary.LittleEndian.Uint64(b[:])
}

// Close disconnects, as QEMU exiting does.
func (p *Peer) Close() error {
	if p.Conn != nil {
		p.Conn.Close()
	}
	if p.SHM != nil {
		unix.Munmap(p.SHM)
		p.SHM = nil
	}
	if p.shmFD >= 0 {
		unix.Close(p.shmFD)
		p.shmFD = -1
	}
	CloseFDs(p.DB)
	CloseFDs(p.IRQ)
	p.DB, p.IRQ = nil, nil
	return nil
}
