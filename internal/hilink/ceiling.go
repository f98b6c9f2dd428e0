package hilink

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/PacketFive/hinic/internal/hilink/wire"
	"github.com/PacketFive/hinic/internal/mmsg"
)

// The raw link ceiling: what this host's sockets move when nothing but
// a relay stands between two HiLink ends. BenchmarkForward compares the
// switch with it, and the gate's HiLink cases (docs/verify.md) report
// peer copies and the all-reduce against it, measured in the same run.

// Ceiling is one measurement of the raw relay.
type Ceiling struct {
	FrameSize int           // octets per frame, the header included
	Frames    int           // frames moved
	Elapsed   time.Duration // first write to last read
}

// GBps is the ceiling's rate in GB/s (10^9 octets per second) of
// payload: what a peer copy can move in frames of this size.
func (c Ceiling) GBps() float64 {
	if c.Elapsed <= 0 {
		return 0
	}
	return float64(c.Frames) * float64(c.FrameSize-wire.HeaderSize) / c.Elapsed.Seconds() / 1e9
}

// MaxCeilingFrames bounds MeasureCeiling's frames.
const MaxCeilingFrames = 1 << 20

// MeasureCeiling moves frames copies of a frameSize-octet write frame
// from a sender through a relay goroutine to a receiver that copies
// each out, as Endpoint.Recv does: two SOCK_SEQPACKET socket pairs with
// the switch's socket buffers, recvmmsg batches handed to sendmmsg, no
// parsing, no credits. It is the HiLink path without the switch's work.
func MeasureCeiling(frameSize, frames int) (Ceiling, error) {
	c := Ceiling{FrameSize: frameSize, Frames: frames}
	if frameSize < wire.HeaderSize || frameSize > DefaultMaxFrame || frames < 1 || frames > MaxCeilingFrames {
		return c, fmt.Errorf("hilink: ceiling of %d frames of %d octets: want 1..%d frames of %d..%d", frames, frameSize,
			MaxCeilingFrames, wire.HeaderSize, DefaultMaxFrame)
	}
	frame := wire.Append(nil, &wire.Fields{Type: wire.TypeWrite, Flags: wire.FlagLast, SrcGPU: 0, DstGPU: 1, Address: 1 << 40},
		make([]byte, frameSize-wire.HeaderSize))
	in, relayIn, err := seqpacketPair()
	if err != nil {
		return c, err
	}
	defer in.Close()
	defer relayIn.Close()
	relayOut, out, err := seqpacketPair()
	if err != nil {
		return c, err
	}
	defer relayOut.Close()
	defer out.Close()
	mc, err := mmsg.New(relayIn, DefaultIOBatch)
	if err != nil {
		return c, err
	}
	wc, err := mmsg.New(relayOut, DefaultIOBatch)
	if err != nil {
		return c, err
	}
	relayed := make(chan error, 1)
	go func() {
		bufs := make([][]byte, DefaultIOBatch)
		for i := range bufs {
			bufs[i] = make([]byte, DefaultMaxFrame)
		}
		outb := make([][]byte, DefaultIOBatch)
		sizes := make([]int, DefaultIOBatch)
		trunc := make([]bool, DefaultIOBatch)
		for moved := 0; moved < frames; {
			k, err := mc.ReadBatch(bufs, sizes, trunc)
			if err != nil {
				relayed <- err
				return
			}
			for i := range k {
				outb[i] = bufs[i][:sizes[i]]
			}
			if err := wc.WriteBatch(outb[:k]); err != nil {
				relayed <- err
				return
			}
			moved += k
		}
		relayed <- nil
	}()
	sent := make(chan error, 1)
	start := time.Now()
	go func() {
		for range frames {
			if _, err := in.Write(frame); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	buf := make([]byte, DefaultMaxFrame)
	var sink []byte
	for range frames {
		k, err := out.Read(buf)
		if err != nil {
			return c, fmt.Errorf("hilink: ceiling: %w", err)
		}
		sink = append(sink[:0], buf[:k]...)
	}
	c.Elapsed = time.Since(start)
	if err := errors.Join(<-sent, <-relayed); err != nil {
		return c, fmt.Errorf("hilink: ceiling: %w", err)
	}
	return c, nil
}

// seqpacketPair is a connected SOCK_SEQPACKET pair with the buffers of
// the switch's and the endpoints' sockets.
func seqpacketPair() (*net.UnixConn, *net.UnixConn, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("hilink: socketpair: %w", err)
	}
	conn := func(fd int) (*net.UnixConn, error) {
		f := os.NewFile(uintptr(fd), "seqpacket")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			return nil, err
		}
		uc := c.(*net.UnixConn)
		uc.SetReadBuffer(socketBuffer)
		uc.SetWriteBuffer(socketBuffer)
		return uc, nil
	}
	a, err := conn(fds[0])
	if err != nil {
		syscall.Close(fds[1])
		return nil, nil, err
	}
	b, err := conn(fds[1])
	if err != nil {
		a.Close()
		return nil, nil, err
	}
	return a, b, nil
}
