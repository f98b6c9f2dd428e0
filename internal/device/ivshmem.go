package device

import (
	"encoding/binary"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// BackendPeerID is the ivshmem peer ID of the backend (the pseudo-peer
// whose doorbell vectors the guest rings, device-facts §1.6).
const BackendPeerID = 0

// ivshmemSend sends one ivshmem server message: a signed 64-bit
// little-endian integer, optionally with one fd (SCM_RIGHTS), in its own
// sendmsg as the reference server does (device-facts §1.5).
func ivshmemSend(c *net.UnixConn, v int64, fd int) error {
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

// ivshmemSetup sends the whole connect sequence to a new client: version
// 0, its peer ID, the shared-memory fd, the backend's doorbell eventfds
// (as connect notifications of peer BackendPeerID) and the client's own
// interrupt eventfds.
func ivshmemSetup(c *net.UnixConn, peerID int, shmFD int, doorbells, irqs []int) error {
	if err := ivshmemSend(c, 0, -1); err != nil {
		return fmt.Errorf("version: %w", err)
	}
	if err := ivshmemSend(c, int64(peerID), -1); err != nil {
		return fmt.Errorf("peer ID: %w", err)
	}
	if err := ivshmemSend(c, -1, shmFD); err != nil {
		return fmt.Errorf("shm fd: %w", err)
	}
	for _, fd := range doorbells {
		if err := ivshmemSend(c, BackendPeerID, fd); err != nil {
			return fmt.Errorf("doorbell fd: %w", err)
		}
	}
	for _, fd := range irqs {
		if err := ivshmemSend(c, int64(peerID), fd); err != nil {
			return fmt.Errorf("interrupt fd: %w", err)
		}
	}
	return nil
}

// newEventfds creates n non-blocking eventfds (QEMU makes them
// non-blocking anyway, for both ends, §1.5).
func newEventfds(n int) ([]int, error) {
	fds := make([]int, 0, n)
	for range n {
		fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err != nil {
			closeFDs(fds)
			return nil, fmt.Errorf("eventfd: %w", err)
		}
		fds = append(fds, fd)
	}
	return fds, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// signalEventfd adds 1 to an eventfd. EAGAIN (counter saturated) is fine:
// the reader is woken anyway.
func signalEventfd(fd int) {
	var one [8]byte
	binary.LittleEndian.PutUint64(one[:], 1)
	_, _ = unix.Write(fd, one[:])
}

// drainEventfd reads and clears an eventfd, reporting whether it was set.
func drainEventfd(fd int) bool {
	var b [8]byte
	n, err := unix.Read(fd, b[:])
	return err == nil && n == 8
}

// newSharedMemory creates the BAR2 memfd of size bytes (a power of two,
// §1.3) and maps it.
func newSharedMemory(name string, size int) (int, []byte, error) {
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
