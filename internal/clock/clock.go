// Package clock is the one source of time and timers for behaviour that
// tests must control: the transport engine's retransmission, RNR and
// DCQCN pacing timers (internal/rdma), the switch's FDB aging and PFC
// pause expiry (internal/fabric) and the M_Key lease of the switch's SMA
// (internal/fabric/ibsw). Production code uses System; tests inject the
// manual clock of package clocktest so that timers fire when the test
// says. I/O deadlines and back-off use real time directly, not a Clock.
//
// clock imports only the standard library.
package clock

import "time"

// Clock gives the time and starts timers. Implementations must be safe
// for concurrent use. AfterFunc's f may run on any goroutine (its own
// with System, the goroutine that advances a manual clock in tests), so
// callers' callbacks only post an event or take their own locks.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not run yet and reports whether
	// it did so.
	Stop() bool
}

// System returns the operating system's clock (time.Now,
// time.AfterFunc).
func System() Clock { return system{} }

type system struct{}

func (system) Now() time.Time { return time.Now() }

func (system) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
