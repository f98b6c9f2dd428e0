package proto

import "time"

// M_Key protection (IBA 14.2.4). Every SMA keeps an M_Key, M_KeyProtectBits
// and M_KeyLeasePeriod in the PortInfo of the port that carries its node's
// management state (a CA's port, a switch's port 0), and checks the M_Key
// of each SMP request against it before it acts on it. The rules, as
// IBA 14.2.4.1 table "Protection Levels" gives them and Linux's software
// SMAs (qib, hfi1 check_mkey) and OpenSM's m_key_protection_level apply
// them:
//
//   - A port M_Key of 0 matches every SMP: nothing is checked.
//   - SubnSet and SubnTrapRepress with another M_Key fail at every
//     protection level.
//   - SubnGet with another M_Key succeeds at level 0; at level 1 it
//     succeeds but PortInfo is returned with M_Key 0; at levels 2 and 3 it
//     fails.
//
// A request that fails is an M_Key violation: it gets no answer,
// PortInfo.M_KeyViolations counts it (saturating at 0xFFFF), and unless the
// lease timer already runs it starts counting M_KeyLeasePeriod seconds (0:
// it never starts). A request with the right M_Key stops the timer. When it
// runs out, M_KeyProtectBits return to 0 while M_Key stays (IBA 14.2.4.2):
// an SM that lost the key can then read it again and take the port back.

// MKeyVerdict is what an SMA does with a request after the M_Key check.
type MKeyVerdict uint8

const (
	// MKeyAllow: answer the request as usual.
	MKeyAllow MKeyVerdict = iota
	// MKeyMask: answer, but a PortInfo answer carries M_Key 0 (a level
	// 1 SubnGet with the wrong M_Key).
	MKeyMask
	// MKeyViolation: drop the request without an answer; the violation
	// has been counted.
	MKeyViolation
)

// MKeyLease is the M_Key lease timer of one port: the deadline while it
// runs. The zero value is a stopped timer. It is owned by the SMA's
// goroutine, like the PortInfo it guards.
type MKeyLease struct {
	end time.Time // zero: not running
}

// Running reports whether the lease timer runs.
func (l *MKeyLease) Running() bool { return !l.end.IsZero() }

// Expire applies the lease timer's expiry at time now: if it ran out,
// M_KeyProtectBits in pi become 0 and the timer stops. An SMA calls it (or
// Check, which calls it) before it reads pi.
func (l *MKeyLease) Expire(pi *PortInfoFields, now time.Time) {
	if l.Running() && !now.Before(l.end) {
		l.end = time.Time{}
		pi.MKeyProtectBits = 0
	}
}

// Check applies the M_Key rules above to an SMP request with method and
// key arriving at time now, and updates pi (M_KeyViolations,
// M_KeyProtectBits at lease expiry) and the timer. Methods other than
// SubnGet, SubnSet and SubnTrapRepress are not checked.
func (l *MKeyLease) Check(pi *PortInfoFields, now time.Time, method uint8, key uint64) MKeyVerdict {
	l.Expire(pi, now)
	switch method {
	case MADMethodGet, MADMethodSet, MADMethodTrapRepress:
	default:
		return MKeyAllow
	}
	if pi.MKey == 0 || key == pi.MKey {
		l.end = time.Time{}
		return MKeyAllow
	}
	if method == MADMethodGet {
		switch pi.MKeyProtectBits {
		case 0:
			return MKeyAllow
		case 1:
			return MKeyMask
		}
	}
	if pi.MKeyViolations != 0xFFFF {
		pi.MKeyViolations++
	}
	if !l.Running() && pi.MKeyLeasePeriod != 0 {
		l.end = now.Add(time.Duration(pi.MKeyLeasePeriod) * time.Second)
	}
	return MKeyViolation
}
