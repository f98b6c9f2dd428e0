// Package clocktest holds the manual clock that tests inject wherever
// production code takes a clock.Clock. It imports only the standard
// library and internal/clock.
package clocktest

import (
	"sort"
	"sync"
	"time"

	"github.com/PacketFive/hinic/internal/clock"
)

// Epoch is where New starts: 2000-01-01 00:00:00 UTC.
var Epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Fake is a clock.Clock that stands still until Advance. Timers fire in
// deadline order (ties in creation order) on the goroutine that calls
// Advance, with Now() equal to their deadline; timers that callbacks
// start inside the interval fire in the same Advance. Safe for concurrent
// use; callbacks run without the clock's lock held, so they may call
// Now, AfterFunc and Stop.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers []*fakeTimer
}

type fakeTimer struct {
	c    *Fake
	when time.Time
	seq  uint64
	f    func()
}

// New returns a Fake set to Epoch.
func New() *Fake { return NewAt(Epoch) }

// NewAt returns a Fake set to start.
func NewAt(start time.Time) *Fake { return &Fake{now: start} }

// Now implements clock.Clock.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc implements clock.Clock.
func (c *Fake) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, when: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return t
}

// Stop implements clock.Timer.
func (t *fakeTimer) Stop() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.timers {
		if x == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			return true
		}
	}
	return false
}

// popDue removes and returns the earliest timer due at or before limit.
func (c *Fake) popDue(limit time.Time) *fakeTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return nil
	}
	sort.Slice(c.timers, func(i, j int) bool {
		a, b := c.timers[i], c.timers[j]
		if !a.when.Equal(b.when) {
			return a.when.Before(b.when)
		}
		return a.seq < b.seq
	})
	t := c.timers[0]
	if t.when.After(limit) {
		return nil
	}
	c.timers = c.timers[1:]
	if t.when.After(c.now) {
		c.now = t.when
	}
	return t
}

// Advance moves the clock forward by d, firing every timer that falls due,
// including timers those callbacks start within the interval.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	limit := c.now.Add(d)
	c.mu.Unlock()
	for t := c.popDue(limit); t != nil; t = c.popDue(limit) {
		t.f()
	}
	c.mu.Lock()
	if limit.After(c.now) {
		c.now = limit
	}
	c.mu.Unlock()
}

// AdvanceToNext moves the clock to the earliest pending timer and fires it
// (and any others due at that instant). It returns how far the clock moved
// and false when no timer was pending.
func (c *Fake) AdvanceToNext() (time.Duration, bool) {
	c.mu.Lock()
	if len(c.timers) == 0 {
		c.mu.Unlock()
		return 0, false
	}
	next := c.timers[0].when
	for _, t := range c.timers[1:] {
		if t.when.Before(next) {
			next = t.when
		}
	}
	start := c.now
	c.mu.Unlock()
	step := max(next.Sub(start), 0)
	c.Advance(step)
	return step, true
}

// Pending returns the number of timers not yet fired or stopped.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}
