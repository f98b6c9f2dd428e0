package hilink

import (
	"testing"

	"github.com/PacketFive/hinic/internal/hilink/wire"
)

// TestMeasureCeiling: every frame crosses the relay, the rate counts
// payload only, and bad arguments are refused.
func TestMeasureCeiling(t *testing.T) {
	c, err := MeasureCeiling(DefaultMaxFrame, 64)
	if err != nil {
		t.Fatal(err)
	}
	if c.Frames != 64 || c.FrameSize != DefaultMaxFrame || c.Elapsed <= 0 || c.GBps() <= 0 {
		t.Errorf("%+v: %v GB/s", c, c.GBps())
	}
	if got, want := (Ceiling{FrameSize: wire.HeaderSize + 1000, Frames: 1000, Elapsed: 1e6}).GBps(), 1.0; got != want {
		t.Errorf("1 MB of payload in 1 ms: %v GB/s, want %v", got, want)
	}
	for _, bad := range [][2]int{{wire.HeaderSize - 1, 1}, {DefaultMaxFrame + 1, 1}, {4096, 0}, {4096, MaxCeilingFrames + 1}} {
		if _, err := MeasureCeiling(bad[0], bad[1]); err == nil {
			t.Errorf("%d frames of %d: no error", bad[1], bad[0])
		}
	}
}
