package ibsw

import (
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/clock/clocktest"
	"github.com/PacketFive/hinic/internal/proto"
)

const (
	testMKey  = 0x0123456789ABCDEF
	wrongMKey = 0x0123456789ABCDEE
)

// newMKeySwitch returns a 4-port switch with port 1 up whose M_Key is
// testMKey at protection level prot with the given lease, set by an SM
// through port 1 while the M_Key was still 0.
func newMKeySwitch(t *testing.T, prot uint8, lease uint16) (*Switch, *clocktest.Fake) {
	t.Helper()
	clk := clocktest.NewAt(time.Unix(1_000_000, 0))
	s, err := New(Config{NodeGUID: testGUID, NumPorts: 4, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	s.SetPortLink(1, true)
	r := sma(t, s, 1, proto.MADMethodSet, proto.SMPAttrPortInfo, 0, portInfoData(proto.PortInfoFields{
		LID: 7, MKey: testMKey, MKeyProtectBits: prot, MKeyLeasePeriod: lease,
	}))
	pi := proto.PortInfo(r.Data()).Fields()
	if r.Status() != 0 || pi.MKey != testMKey || pi.MKeyProtectBits != prot || pi.MKeyLeasePeriod != lease {
		t.Fatalf("setting the M_Key: status %#x, %+v", r.Status(), pi)
	}
	return s, clk
}

// smaKey sends a one-hop directed-route SMP with M_Key key in on port 1
// and returns the answer, or nil when there is none.
func smaKey(t *testing.T, s *Switch, key uint64, method uint8, attr uint16, am uint32, data []byte) proto.SMP {
	t.Helper()
	out := ingress(s, 1, drPacket(drFields{method: method, attr: attr, am: am, data: data, hc: 1, hp: 1, initial: []byte{1}, mkey: key}))
	switch {
	case len(out) == 0:
		return nil
	case len(out) > 1 || out[0].port != 1:
		t.Fatalf("%d packets, first on port %d", len(out), out[0].port)
	}
	return answerSMP(t, out[0].pkt)
}

// p0 reads port 0's PortInfo with the right key.
func p0(t *testing.T, s *Switch) proto.PortInfoFields {
	t.Helper()
	r := smaKey(t, s, testMKey, proto.MADMethodGet, proto.SMPAttrPortInfo, 0, nil)
	if r == nil || r.Status() != 0 {
		t.Fatal("Get PortInfo with the right M_Key not answered")
	}
	return proto.PortInfo(r.Data()).Fields()
}

// TestMKeyProtection: at every protection level a SubnSet with a wrong
// M_Key, LID-routed or directed, is dropped without effect and counted; a
// SubnGet with a wrong M_Key is answered in full at level 0, answered with
// M_Key 0 at level 1 and dropped at levels 2 and 3; the right M_Key always
// works.
func TestMKeyProtection(t *testing.T) {
	for prot := range uint8(4) {
		t.Run(string(rune('0'+prot)), func(t *testing.T) {
			s, _ := newMKeySwitch(t, prot, 0)
			viol := uint16(0)

			// Directed-route Set with the wrong key.
			r := smaKey(t, s, wrongMKey, proto.MADMethodSet, proto.SMPAttrPortInfo, 0, portInfoData(proto.PortInfoFields{LID: 9}))
			if r != nil {
				t.Fatalf("wrong-key Set answered")
			}
			viol++
			// LID-routed Set with the wrong key, to the switch's LID.
			si := make([]byte, proto.SMPDataSize)
			proto.SwitchInfo(si[:proto.SwitchInfoSize]).Encode(&proto.SwitchInfoFields{LifeTimeValue: 0x11})
			mad := lidMAD(proto.MADMethodSet, proto.SMPAttrSwitchInfo, 0, si)
			proto.SMP(mad).SetMKey(wrongMKey)
			if out := ingress(s, 1, smpPacket(7, 1, mad)); len(out) != 0 {
				t.Fatalf("wrong-key LID-routed Set answered")
			}
			viol++
			if s.si.LifeTimeValue == 0x11 {
				t.Errorf("wrong-key Set of SwitchInfo applied")
			}
			// A TrapRepress with the wrong key is a violation too.
			if smaKey(t, s, wrongMKey, proto.MADMethodTrapRepress, 0x0002, 0, nil) != nil {
				t.Fatalf("TrapRepress answered")
			}
			viol++

			r = smaKey(t, s, wrongMKey, proto.MADMethodGet, proto.SMPAttrPortInfo, 0, nil)
			switch prot {
			case 0:
				if r == nil || proto.PortInfo(r.Data()).MKey() != testMKey {
					t.Errorf("level 0 Get: want the answer with the M_Key, got %v", r != nil)
				}
			case 1:
				if r == nil || proto.PortInfo(r.Data()).MKey() != 0 || proto.PortInfo(r.Data()).LID() != 7 {
					t.Errorf("level 1 Get: want the answer with M_Key 0, got %v", r != nil)
				}
			default:
				if r != nil {
					t.Errorf("level %d Get with a wrong key answered", prot)
				}
				viol++
			}
			// Other attributes follow the same rule at level 2 and 3.
			r = smaKey(t, s, wrongMKey, proto.MADMethodGet, proto.SMPAttrNodeInfo, 0, nil)
			if (r == nil) != (prot >= 2) {
				t.Errorf("level %d Get NodeInfo with a wrong key: answered %v", prot, r != nil)
			}
			if prot >= 2 {
				viol++
			}

			pi := p0(t, s)
			if pi.LID != 7 || pi.MKey != testMKey || pi.MKeyProtectBits != prot {
				t.Errorf("state changed by wrong-key SMPs: %+v", pi)
			}
			if pi.MKeyViolations != viol || s.Snapshot().MKeyViolations != viol || s.Snapshot().Drops.MKey != uint64(viol) {
				t.Errorf("M_KeyViolations %d, snapshot %+v, want %d", pi.MKeyViolations, s.Snapshot().Drops, viol)
			}

			// The right key changes the port.
			r = smaKey(t, s, testMKey, proto.MADMethodSet, proto.SMPAttrPortInfo, 0, portInfoData(proto.PortInfoFields{
				LID: 9, MKey: testMKey, MKeyProtectBits: prot,
			}))
			if r == nil || r.Status() != 0 || proto.PortInfo(r.Data()).LID() != 9 || s.LID() != 9 {
				t.Errorf("right-key Set not applied")
			}
		})
	}
}

// TestMKeyLeaseExpiry: after a violation the lease runs; if no SMP with
// the right M_Key comes within M_KeyLeasePeriod, the protection drops to
// level 0 and a wrong-key SubnGet then reads the M_Key, as an SM that lost
// it needs; one that comes in time stops the timer.
func TestMKeyLeaseExpiry(t *testing.T) {
	t.Run("expires", func(t *testing.T) {
		s, clk := newMKeySwitch(t, 3, 60)
		if smaKey(t, s, wrongMKey, proto.MADMethodGet, proto.SMPAttrPortInfo, 0, nil) != nil {
			t.Fatal("level 3 wrong-key Get answered")
		}
		clk.Advance(59 * time.Second)
		if smaKey(t, s, wrongMKey, proto.MADMethodGet, proto.SMPAttrPortInfo, 0, nil) != nil {
			t.Fatal("answered before the lease ran out")
		}
		clk.Advance(time.Second)
		if got := s.Snapshot().MKeyProtectBits; got != 0 {
			t.Errorf("snapshot protect bits %d after the lease", got)
		}
		r := smaKey(t, s, wrongMKey, proto.MADMethodGet, proto.SMPAttrPortInfo, 0, nil)
		if r == nil {
			t.Fatal("wrong-key Get dropped after the lease ran out")
		}
		if pi := proto.PortInfo(r.Data()).Fields(); pi.MKey != testMKey || pi.MKeyProtectBits != 0 || pi.MKeyViolations != 2 {
			t.Errorf("after the lease: %+v", pi)
		}
		// Sets still need the key.
		if smaKey(t, s, wrongMKey, proto.MADMethodSet, proto.SMPAttrPortInfo, 0, portInfoData(proto.PortInfoFields{LID: 9})) != nil {
			t.Error("wrong-key Set answered at level 0")
		}
	})
	t.Run("right key in time", func(t *testing.T) {
		s, clk := newMKeySwitch(t, 3, 60)
		smaKey(t, s, wrongMKey, proto.MADMethodGet, proto.SMPAttrPortInfo, 0, nil)
		clk.Advance(30 * time.Second)
		p0(t, s)
		clk.Advance(time.Hour)
		if smaKey(t, s, wrongMKey, proto.MADMethodGet, proto.SMPAttrPortInfo, 0, nil) != nil {
			t.Error("protection dropped although the right key came in time")
		}
	})
	t.Run("lease 0 never expires", func(t *testing.T) {
		s, clk := newMKeySwitch(t, 2, 0)
		smaKey(t, s, wrongMKey, proto.MADMethodGet, proto.SMPAttrPortInfo, 0, nil)
		clk.Advance(1000 * time.Hour)
		if smaKey(t, s, wrongMKey, proto.MADMethodGet, proto.SMPAttrPortInfo, 0, nil) != nil {
			t.Error("protection dropped with M_KeyLeasePeriod 0")
		}
	})
}

// TestMKeyZeroUnchecked: with the power-on M_Key 0 every key is accepted,
// whatever the protection bits say (an SM that uses no M_Key).
func TestMKeyZeroUnchecked(t *testing.T) {
	s := newTestSwitch(t, 2)
	s.SetPortLink(1, true)
	r := smaKey(t, s, 0, proto.MADMethodSet, proto.SMPAttrPortInfo, 0, portInfoData(proto.PortInfoFields{LID: 3, MKeyProtectBits: 3}))
	if r == nil || r.Status() != 0 {
		t.Fatal("Set not answered")
	}
	for _, key := range []uint64{0, wrongMKey} {
		if r := smaKey(t, s, key, proto.MADMethodSet, proto.SMPAttrPortInfo, 0, portInfoData(proto.PortInfoFields{LID: 4, MKeyProtectBits: 3})); r == nil || r.Status() != 0 {
			t.Errorf("M_Key %#x: Set not answered", key)
		}
	}
	if snap := s.Snapshot(); snap.MKeyViolations != 0 || snap.Drops.MKey != 0 || snap.LID != 4 {
		t.Errorf("snapshot %+v", snap)
	}
}
