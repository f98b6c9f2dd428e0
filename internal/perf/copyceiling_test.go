package perf

import (
	"context"
	"strings"
	"testing"
)

func TestCopyCeiling(t *testing.T) {
	res, err := CopyCeiling(context.Background(), 8<<20, 32, 4352)
	if err != nil {
		t.Fatal(err)
	}
	if res.Frames != 8<<20/RawFrameSize || res.FrameSize != RawFrameSize || res.MiBps <= 0 || res.Elapsed <= 0 {
		t.Errorf("result %+v", res)
	}
}

// TestCopyCeilingChecks: a frame changed between the rings fails the run,
// whether the CRC or the final comparison of memory catches it.
func TestCopyCeilingChecks(t *testing.T) {
	_, err := copyCeiling(context.Background(), 1<<20, 16, 4096, func(i uint32, b []byte) {
		if i == 7 {
			b[100] ^= 1
		}
	})
	if err == nil || !strings.Contains(err.Error(), "frame 7 arrived with a bad CRC") {
		t.Errorf("corrupted frame: %v", err)
	}
	if _, err := CopyCeiling(context.Background(), 1<<20, 0, 4096); err == nil {
		t.Error("no slots accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := CopyCeiling(ctx, 1<<20, 16, 4096); err != context.Canceled {
		t.Errorf("cancelled: %v", err)
	}
}

func BenchmarkCopyCeiling(b *testing.B) {
	b.SetBytes(64 << 20)
	for b.Loop() {
		if _, err := CopyCeiling(context.Background(), 64<<20, 32, 4352); err != nil {
			b.Fatal(err)
		}
	}
}
