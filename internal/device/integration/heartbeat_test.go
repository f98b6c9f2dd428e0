package integration

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/device"
)

// TestHeartbeat: the header's heartbeat advances while the backend
// runs, live, across a reset and before the next handshake, and stops
// when the backend goes: what a driver's watchdog relies on (ABI 1.14).
func TestHeartbeat(t *testing.T) {
	tb := newTestbed(t, 1)
	g := tb.guests[0]
	h := g.Header()
	advances := func(what string) {
		t.Helper()
		from := atomic.LoadUint32(&h.Heartbeat)
		deadline := time.Now().Add(device.HeartbeatDeadMS * time.Millisecond)
		for atomic.LoadUint32(&h.Heartbeat)-from < 3 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: heartbeat stayed at %d for %d ms", what, from, device.HeartbeatDeadMS)
			}
			time.Sleep(device.HeartbeatMS * time.Millisecond)
		}
	}
	if atomic.LoadUint32(&h.DevStatus)&device.DevLive == 0 {
		t.Fatalf("device not live: status %#x", h.DevStatus)
	}
	advances("live")
	if err := g.Reset(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	advances("after a reset")
	if err := g.Handshake(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	advances("live again")

	tb.srv.Close()
	time.Sleep(5 * device.HeartbeatMS * time.Millisecond)
	last := atomic.LoadUint32(&h.Heartbeat)
	time.Sleep(20 * device.HeartbeatMS * time.Millisecond)
	if now := atomic.LoadUint32(&h.Heartbeat); now != last {
		t.Errorf("heartbeat moved from %d to %d after the backend closed", last, now)
	}
}
