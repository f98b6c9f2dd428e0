package fabric

import (
	"errors"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/PacketFive/hinic/internal/mmsg"
)

// Sockets. Port sockets are made with the net package
// (net.ListenUnix("unixpacket"), socket pairs through net.FileConn): it
// gives non-blocking descriptors registered with Go's poller, so a
// blocked read or write parks only its goroutine and Close wakes it, and
// deadlines work for the hello. The data path moves frames with
// recvmmsg/sendmmsg (package mmsg), several frames per system call when
// they are queued.

// batchIO moves batches of SEQPACKET messages over one connection: rx
// calls ReadBatch, tx calls WriteBatch.
type batchIO = mmsg.Conn

func newBatchIO(c *net.UnixConn, batch int) (*batchIO, error) { return mmsg.New(c, batch) }

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
