package clock_test

import (
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/clock"
)

func TestSystem(t *testing.T) {
	c := clock.System()
	before := time.Now()
	if now := c.Now(); now.Before(before) {
		t.Fatalf("System().Now() %v is before time.Now() %v", now, before)
	}
	fired := make(chan struct{})
	c.AfterFunc(time.Millisecond, func() { close(fired) })
	<-fired
	stopped := c.AfterFunc(time.Hour, func() { t.Error("stopped timer fired") })
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop should succeed once")
	}
}
