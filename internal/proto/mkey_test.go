package proto

import (
	"testing"
	"time"
)

func TestMKeyCheck(t *testing.T) {
	const key, wrong = 0x1111222233334444, 0x99
	get, set, repress := uint8(MADMethodGet), uint8(MADMethodSet), uint8(MADMethodTrapRepress)
	for _, c := range []struct {
		name    string
		portKey uint64
		prot    uint8
		method  uint8
		key     uint64
		want    MKeyVerdict
	}{
		{"no key: Set with any key", 0, 3, set, wrong, MKeyAllow},
		{"no key: Get with any key", 0, 3, get, wrong, MKeyAllow},
		{"level 0: Get wrong key", key, 0, get, wrong, MKeyAllow},
		{"level 0: Set wrong key", key, 0, set, wrong, MKeyViolation},
		{"level 0: TrapRepress wrong key", key, 0, repress, wrong, MKeyViolation},
		{"level 1: Get wrong key masked", key, 1, get, wrong, MKeyMask},
		{"level 1: Set wrong key", key, 1, set, wrong, MKeyViolation},
		{"level 2: Get wrong key", key, 2, get, wrong, MKeyViolation},
		{"level 2: Set wrong key", key, 2, set, wrong, MKeyViolation},
		{"level 3: Get wrong key", key, 3, get, wrong, MKeyViolation},
		{"level 3: Get right key", key, 3, get, key, MKeyAllow},
		{"level 3: Set right key", key, 3, set, key, MKeyAllow},
		{"level 3: other method unchecked", key, 3, MADMethodTrap, wrong, MKeyAllow},
	} {
		t.Run(c.name, func(t *testing.T) {
			pi := PortInfoFields{MKey: c.portKey, MKeyProtectBits: c.prot}
			var l MKeyLease
			got := l.Check(&pi, time.Unix(0, 0), c.method, c.key)
			if got != c.want {
				t.Fatalf("verdict %d, want %d", got, c.want)
			}
			wantViol := uint16(0)
			if c.want == MKeyViolation {
				wantViol = 1
			}
			if pi.MKeyViolations != wantViol {
				t.Errorf("M_KeyViolations %d, want %d", pi.MKeyViolations, wantViol)
			}
		})
	}
}

func TestMKeyLease(t *testing.T) {
	const key = 0xABCD
	t0 := time.Unix(1000, 0)
	pi := PortInfoFields{MKey: key, MKeyProtectBits: 3, MKeyLeasePeriod: 10}
	var l MKeyLease
	if v := l.Check(&pi, t0, MADMethodSet, 1); v != MKeyViolation || !l.Running() {
		t.Fatalf("violation: verdict %d, running %v", v, l.Running())
	}
	// A second violation does not restart the timer.
	l.Check(&pi, t0.Add(5*time.Second), MADMethodGet, 1)
	l.Expire(&pi, t0.Add(10*time.Second-time.Nanosecond))
	if pi.MKeyProtectBits != 3 {
		t.Fatalf("protection reset before the lease ran out")
	}
	l.Expire(&pi, t0.Add(10*time.Second))
	if pi.MKeyProtectBits != 0 || pi.MKey != key || l.Running() {
		t.Fatalf("after the lease: protect %d key %#x running %v", pi.MKeyProtectBits, pi.MKey, l.Running())
	}
	if pi.MKeyViolations != 2 {
		t.Errorf("M_KeyViolations %d, want 2", pi.MKeyViolations)
	}

	// The right key stops the timer.
	pi.MKeyProtectBits = 2
	l.Check(&pi, t0, MADMethodSet, 1)
	if v := l.Check(&pi, t0.Add(time.Second), MADMethodGet, key); v != MKeyAllow || l.Running() {
		t.Fatalf("right key: verdict %d running %v", v, l.Running())
	}
	l.Expire(&pi, t0.Add(time.Hour))
	if pi.MKeyProtectBits != 2 {
		t.Errorf("protection reset although the right key came in time")
	}

	// Lease period 0: never expires.
	pi.MKeyLeasePeriod = 0
	l.Check(&pi, t0, MADMethodSet, 1)
	if l.Running() {
		t.Fatal("timer runs with M_KeyLeasePeriod 0")
	}

	// The counter saturates.
	pi.MKeyViolations = 0xFFFF
	l.Check(&pi, t0, MADMethodSet, 1)
	if pi.MKeyViolations != 0xFFFF {
		t.Errorf("M_KeyViolations wrapped to %d", pi.MKeyViolations)
	}
}
