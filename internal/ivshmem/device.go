package ivshmem

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Device is the backend's side of one guest's ivshmem-doorbell function:
// the shared memory that becomes BAR2, the doorbell eventfds the backend
// reads and the interrupt eventfds it writes, a stop eventfd, extra
// eventfds with which the backend wakes itself, and one epoll set over
// the doorbells, the stop and the extra eventfds.
//
// A Device belongs to one guest session: Wait is called from one
// goroutine, Signal on Stop, Extra and IRQ from any, Close once when
// every user is done.
type Device struct {
	ShmFD int
	SHM   []byte // BAR2, mapped shared
	DB    []int  // doorbell eventfds: the guest rings, the backend reads
	IRQ   []int  // interrupt eventfds: the backend signals MSI-X vectors
	Stop  int    // Signal it to end Wait
	Extra []int  // the backend's own wake-ups, in the epoll set
	epfd  int
	// ep is epfd in Go's network poller, so that Wait parks its
	// goroutine there instead of blocking a thread in epoll_wait (see
	// Wait); it owns epfd once set.
	ep   *os.File
	eprc syscall.RawConn
	// Wait's state, for its poll function, made once so that a wait
	// allocates nothing (Wait has one caller at a time).
	waitEvents []unix.EpollEvent
	waitN      int
	waitErr    error
	poll       func(fd uintptr) bool
}

// NewDevice creates a Device: BAR2 of shmSize bytes (a power of two)
// named name, vectors eventfds each way and extra more. On an error
// nothing stays open.
func NewDevice(name string, shmSize, vectors, extra int) (*Device, error) {
	d := &Device{ShmFD: -1, Stop: -1, epfd: -1}
	ok := false
	defer func() {
		if !ok {
			d.Close()
		}
	}()
	var err error
	if d.ShmFD, d.SHM, err = NewSharedMemory(name, shmSize); err != nil {
		return nil, err
	}
	if d.DB, err = NewEventfds(vectors); err != nil {
		return nil, err
	}
	if d.IRQ, err = NewEventfds(vectors); err != nil {
		return nil, err
	}
	own, err := NewEventfds(1 + extra)
	if err != nil {
		return nil, err
	}
	d.Stop, d.Extra = own[0], own[1:]
	if d.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return nil, fmt.Errorf("epoll: %w", err)
	}
	for i, fd := range append(append([]int(nil), d.DB...), own...) {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(i)}
		if err := unix.EpollCtl(d.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			return nil, fmt.Errorf("epoll: %w", err)
		}
	}
	// An epoll set is itself pollable (readable while it has events), so
	// Go's poller can wait on it. O_NONBLOCK makes os.NewFile register it
	// there; epoll_wait ignores the flag, and Wait polls with timeout 0.
	if err := unix.SetNonblock(d.epfd, true); err != nil {
		return nil, fmt.Errorf("epoll: %w", err)
	}
	d.ep = os.NewFile(uintptr(d.epfd), name+"-epoll")
	if d.eprc, err = d.ep.SyscallConn(); err != nil {
		return nil, fmt.Errorf("epoll: %w", err)
	}
	d.poll = d.pollOnce
	ok = true
	return d, nil
}

// Setup hands BAR2 and the eventfds to the guest on c, as peer id. Fill
// the device header in BAR2 first: the guest may read it as soon as it
// maps BAR2.
func (d *Device) Setup(c *net.UnixConn, id int) error {
	return Setup(c, id, d.ShmFD, d.DB, d.IRQ)
}

// Wait blocks until eventfds of the epoll set are readable, and reports
// them in events[:n]: an event's Fd is i for doorbell i, and
// len(DB)+1+j for Extra[j]. It does not drain them. ok is false once
// Stop is signalled (or the epoll set fails): the caller returns.
// events needs room for len(DB)+1+len(Extra).
//
// The goroutine waits in Go's network poller, not in a blocking
// epoll_wait: a thread blocked in a system call holds its P until the
// runtime's monitor takes it back, 20 µs or more later, and every
// doorbell then cost the monitor's wake-ups and a P hand-off as well as
// the waiter's own (on the 2-core build machine each thread switch costs
// about 10 µs). In the poller, the thread that sees the epoll set ready
// runs the waiter itself.
func (d *Device) Wait(events []unix.EpollEvent) (n int, ok bool) {
	d.waitEvents = events
	err := d.eprc.Read(d.poll)
	d.waitEvents = nil
	n = d.waitN
	if err != nil || d.waitErr != nil {
		return 0, false
	}
	for _, ev := range events[:n] {
		if int(ev.Fd) == len(d.DB) {
			return 0, false
		}
	}
	return n, true
}

// pollOnce is Wait's poll function: it takes what is ready without
// waiting and reports whether it is done. epoll_pwait with timeout 0 is
// a raw system call, for the reason Signal's is. Nothing ready: the poller
// waits for the set to become readable and calls it again.
func (d *Device) pollOnce(fd uintptr) bool {
	for {
		r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, fd, uintptr(unsafe.Pointer(&d.waitEvents[0])), uintptr(len(d.waitEvents)), 0, 0, 0)
		d.waitN, d.waitErr = int(r), nil
		if e != 0 {
			d.waitN, d.waitErr = 0, e
		}
		if !errors.Is(d.waitErr, unix.EINTR) {
			break
		}
	}
	return d.waitErr != nil || d.waitN > 0
}

// Events returns a buffer for Wait with room for every eventfd.
func (d *Device) Events() []unix.EpollEvent {
	return make([]unix.EpollEvent, len(d.DB)+1+len(d.Extra))
}

// Close unmaps BAR2 and closes every fd; call it once, when no goroutine
// uses the Device any more.
func (d *Device) Close() {
	if d.ep != nil {
		d.ep.Close() // closes epfd
		d.epfd = -1
	}
	for _, fd := range []int{d.epfd, d.Stop, d.ShmFD} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	CloseFDs(d.Extra)
	CloseFDs(d.DB)
	CloseFDs(d.IRQ)
	if d.SHM != nil {
		unix.Munmap(d.SHM)
		d.SHM = nil
	}
}

// NextPeerID is the peer ID after id: IVPosition is 16 bits, and 0 is
// the backend's (BackendPeerID), so guests get 1..0xffff in turn.
func NextPeerID(id int) int { return id%0xffff + 1 }

// WaitHangup returns when the guest's connection closes (QEMU exited):
// the server channel is one-way, so a read returns only at EOF.
func WaitHangup(c *net.UnixConn) {
	var b [64]byte
	for {
		if _, err := c.Read(b[:]); err != nil {
			return
		}
	}
}
