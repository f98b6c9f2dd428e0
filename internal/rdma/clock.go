package rdma

import "time"

// Clock is where the engine gets time and timers: the retransmission
// (local ACK timeout) and RNR timers. Production code uses SystemClock;
// tests inject rdmatest.FakeClock so that timeouts fire when the test says.
//
// Implementations must be safe for concurrent use. AfterFunc's f may run on
// any goroutine; the engine's callbacks only post an event and return.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not run yet and reports whether it
	// did so.
	Stop() bool
}

// SystemClock returns the wall clock (time.Now, time.AfterFunc).
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
