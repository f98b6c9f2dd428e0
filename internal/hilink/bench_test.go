package hilink

import (
	"context"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/mmsg"
)

// BenchmarkForward sends b.N write frames from one port to another
// through the switch, then the same frames through a plain relay (one
// goroutine moving recvmmsg batches to sendmmsg between two socket
// pairs with the same socket buffers, no parsing, no credits) in the
// same run, and reports the switch's throughput over the relay's as
// ratio_vs_relay.
func BenchmarkForward(b *testing.B) {
	for _, size := range []int{64, 4096, 65536} {
		b.Run("size="+strconv.Itoa(size), func(b *testing.B) {
			frame := write(0, 1, 0, size)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			ctx := context.Background()
			sw := startSwitch(b, Config{Ports: 2})
			a := dial(b, sw, 0, 0, 0)
			r := dial(b, sw, 1, 0, 1)
			errc := make(chan error, 1)
			b.ResetTimer()
			start := time.Now()
			go func() {
				for range b.N {
					if err := a.Send(ctx, frame); err != nil {
						errc <- err
						return
					}
				}
				errc <- nil
			}()
			for range b.N {
				if _, err := r.Recv(ctx); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
			switched := time.Since(start)
			b.StopTimer()
			relayed := relay(b, frame, b.N)
			b.ReportMetric(relayed.Seconds()/switched.Seconds(), "ratio_vs_relay")
		})
	}
}

// relay moves n copies of frame from a sender through a relay goroutine
// to a receiver that copies each out, as Endpoint.Recv does, and
// returns the time it took.
func relay(b *testing.B, frame []byte, n int) time.Duration {
	in, relayIn := seqpacketPair(b)
	relayOut, out := seqpacketPair(b)
	done := make(chan struct{})
	go func() {
		defer close(done)
		mc, err := mmsg.New(relayIn, DefaultIOBatch)
		if err != nil {
			return
		}
		wc, err := mmsg.New(relayOut, DefaultIOBatch)
		if err != nil {
			return
		}
		bufs := make([][]byte, DefaultIOBatch)
		for i := range bufs {
			bufs[i] = make([]byte, DefaultMaxFrame)
		}
		out := make([][]byte, DefaultIOBatch)
		sizes := make([]int, DefaultIOBatch)
		trunc := make([]bool, DefaultIOBatch)
		for moved := 0; moved < n; {
			k, err := mc.ReadBatch(bufs, sizes, trunc)
			if err != nil {
				return
			}
			for i := range k {
				out[i] = bufs[i][:sizes[i]]
			}
			if wc.WriteBatch(out[:k]) != nil {
				return
			}
			moved += k
		}
	}()
	start := time.Now()
	go func() {
		for range n {
			if _, err := in.Write(frame); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, DefaultMaxFrame)
	for range n {
		k, err := out.Read(buf)
		if err != nil {
			b.Fatal(err)
		}
		_ = append([]byte(nil), buf[:k]...)
	}
	d := time.Since(start)
	<-done
	return d
}

func seqpacketPair(b *testing.B) (*net.UnixConn, *net.UnixConn) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "seqpacket")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		uc := c.(*net.UnixConn)
		// The buffers of the switch's and the endpoints' sockets.
		uc.SetReadBuffer(socketBuffer)
		uc.SetWriteBuffer(socketBuffer)
		return uc
	}
	return conn(fds[0]), conn(fds[1])
}
