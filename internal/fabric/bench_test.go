package fabric

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestBenchRuns runs a short Bench: it must deliver everything on the
// lossless class. (Throughput figures are not checked here.)
func TestBenchRuns(t *testing.T) {
	checkGoroutines(t)
	res, err := Bench(context.Background(), BenchConfig{Sizes: []int{64, 4200}, Duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		t.Logf("size %d: relay %.0f fps, switch %.0f fps, ratio %.2f", r.Size, r.Relay.FPS, r.Switch.FPS, r.Ratio)
		if r.Switch.Frames == 0 || r.Relay.Frames == 0 || r.Switch.Lost != 0 || r.Switch.Drops != 0 {
			t.Errorf("size %d: %+v", r.Size, r)
		}
	}
}

// BenchmarkForward measures forwarding through real sockets: a NIC peer
// writes frames to port 1, another reads them from port 2.
func BenchmarkForward(b *testing.B) {
	for _, batch := range []int{1, DefaultIOBatch} {
		for _, size := range []int{64, 1500, 4200} {
			b.Run(fmt.Sprintf("batch=%d/size=%d", batch, size), func(b *testing.B) {
				res, err := Bench(context.Background(), BenchConfig{Sizes: []int{size}, Duration: time.Second, IOBatch: batch})
				if err != nil {
					b.Fatal(err)
				}
				r := res[0]
				b.ReportMetric(r.Switch.FPS, "frames/s")
				b.ReportMetric(r.Relay.FPS, "relay-frames/s")
				b.ReportMetric(r.Ratio, "ratio")
			})
		}
	}
}
