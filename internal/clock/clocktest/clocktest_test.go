package clocktest

import (
	"strings"
	"testing"
	"time"
)

func TestFake(t *testing.T) {
	c := New()
	t0 := c.Now()
	if !t0.Equal(Epoch) {
		t.Fatalf("New starts at %v, want %v", t0, Epoch)
	}
	var order []string
	var at []time.Duration
	c.AfterFunc(3*time.Millisecond, func() { order = append(order, "c") })
	c.AfterFunc(time.Millisecond, func() {
		order = append(order, "a")
		at = append(at, c.Now().Sub(t0))
		// A timer started by a callback inside the interval fires too.
		c.AfterFunc(time.Millisecond, func() {
			order = append(order, "b")
			at = append(at, c.Now().Sub(t0))
		})
	})
	stopped := c.AfterFunc(2*time.Millisecond, func() { order = append(order, "x") })
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop should succeed once")
	}
	c.Advance(500 * time.Microsecond)
	if len(order) != 0 || c.Now().Sub(t0) != 500*time.Microsecond {
		t.Fatalf("fired %v early; now +%v", order, c.Now().Sub(t0))
	}
	c.Advance(5 * time.Millisecond)
	if got := strings.Join(order, ""); got != "abc" {
		t.Fatalf("order %v, want a b c", order)
	}
	// Callbacks see Now() equal to their own deadline.
	if len(at) != 2 || at[0] != time.Millisecond || at[1] != 2*time.Millisecond {
		t.Fatalf("callbacks ran at %v, want [1ms 2ms]", at)
	}
	if c.Pending() != 0 || c.Now().Sub(t0) != 5500*time.Microsecond {
		t.Fatalf("pending %d, now +%v", c.Pending(), c.Now().Sub(t0))
	}
	c.AfterFunc(time.Second, func() { order = append(order, "d") })
	if step, ok := c.AdvanceToNext(); !ok || step != time.Second || len(order) != 4 {
		t.Fatalf("AdvanceToNext %v %v %v", step, ok, order)
	}
	if _, ok := c.AdvanceToNext(); ok {
		t.Fatal("AdvanceToNext with no timer")
	}
}

func TestFakeTies(t *testing.T) {
	start := time.Unix(1000, 0)
	c := NewAt(start)
	if !c.Now().Equal(start) {
		t.Fatalf("NewAt starts at %v, want %v", c.Now(), start)
	}
	var order []int
	for i := range 3 {
		c.AfterFunc(time.Second, func() { order = append(order, i) })
	}
	c.Advance(time.Second)
	if len(order) != 3 || order[0] != 0 || order[1] != 1 || order[2] != 2 {
		t.Fatalf("timers due at the same instant fired in order %v, want creation order", order)
	}
}
