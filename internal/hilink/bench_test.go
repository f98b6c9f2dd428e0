package hilink

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// BenchmarkForward sends b.N write frames from one port to another
// through the switch, then the same frames through a plain relay
// (MeasureCeiling: one goroutine moving recvmmsg batches to sendmmsg
// between two socket pairs with the same socket buffers, no parsing, no
// credits) in the same run, and reports the switch's throughput over the relay's as
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

// relay moves n copies of frame through MeasureCeiling's relay and
// returns the time it took.
func relay(b *testing.B, frame []byte, n int) time.Duration {
	c, err := MeasureCeiling(len(frame), n)
	if err != nil {
		b.Fatal(err)
	}
	return c.Elapsed
}
