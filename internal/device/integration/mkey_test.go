package integration

import (
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/ibsm"
	"github.com/PacketFive/hinic/internal/proto"
)

// The M_Keys of the tests: the one an SM set, and a guess.
const (
	goodMKey  = 0x0123_4567_89ab_cdef
	wrongMKey = 0x0123_4567_89ab_cdee
)

// keyedLocalSMP is localSMP with M_Key key.
func keyedLocalSMP(method uint8, attr uint16, key uint64, data []byte) []byte {
	m := localSMP(method, attr, data)
	proto.SMP(m).SetMKey(key)
	return m
}

// lidSMP is a LID-routed SMP (class 0x01) with M_Key key.
func lidSMP(method uint8, attr uint16, am uint32, key, tid uint64, data []byte) []byte {
	m := make([]byte, proto.MADSize)
	proto.SMP(m).Encode(&proto.SMPFields{BaseVersion: proto.MADBaseVersion, MgmtClass: proto.MgmtClassSubnLID,
		ClassVersion: proto.SMClassVersion, Method: method, TransactionID: tid, AttributeID: attr,
		AttributeModifier: am, MKey: key})
	copy(proto.SMP(m).Data(), data)
	return m
}

func portInfoData(pi proto.PortInfoFields) []byte {
	b := make([]byte, 64)
	proto.PortInfo(b).Encode(&pi)
	return b
}

// mkeyDrops is what vNIC i's engine counted as SMPs dropped for their
// M_Key.
func mkeyDrops(tb *testbed, i int) uint64 { return tb.srv.Status().VNICs[i].Engine.SMPMKeyDrops }

// TestIBMKeyMADIfc: the SMA of an InfiniBand vNIC, reached through
// MAD_IFC as the SM on the guest's own port reaches it, enforces the
// M_Key an SM gave the port (IBA 14.2.4). At protection level 2 a Set
// and a Get with another M_Key get no answer, change nothing, and are
// counted (PortInfo M_KeyViolations, the engine's SMPMKeyDrops; no Bad
// M_Key trap, the port sends none); the right M_Key works. At level 1 a
// Get with another M_Key is answered with M_Key 0, a Set still dropped.
// The lease: a request with the right M_Key stops the timer a violation
// started; a violation with no right M_Key after it lets the timer run
// out, and the protection bits fall to 0, so that an SM that lost the
// key reads it again, while a Set with another M_Key stays refused.
func TestIBMKeyMADIfc(t *testing.T) {
	tb := newIBTestbed(t, 1)
	g := tb.guests[0]
	ctx := testCtx(t)
	// smp sends one through MAD_IFC: the answer's PortInfo, or ok false
	// for no answer.
	smp := func(method uint8, key uint64, pi *proto.PortInfoFields) (proto.PortInfoFields, bool) {
		t.Helper()
		var data []byte
		if pi != nil {
			data = portInfoData(*pi)
		}
		r, err := g.MADIfc(ctx, keyedLocalSMP(method, proto.SMPAttrPortInfo, key, data))
		if err != nil {
			t.Fatalf("MAD_IFC: %v", err)
		}
		if r == nil {
			return proto.PortInfoFields{}, false
		}
		if st := proto.SMP(r).Status(); st != 0 {
			t.Fatalf("PortInfo answer: status %#x", st)
		}
		return proto.PortInfo(proto.SMP(r).Data()).Fields(), true
	}
	lid := func() uint16 {
		t.Helper()
		pa, err := g.QueryPort(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return uint16(pa.LID)
	}

	pi, ok := smp(proto.MADMethodGet, 0, nil)
	if !ok || pi.MKey != 0 {
		t.Fatalf("PortInfo at power-on: answered %v, M_Key %#x", ok, pi.MKey)
	}
	// With M_Key 0 any key passes: the SM sets the port's.
	pi.PortState, pi.LID, pi.MasterSMLID = proto.PortStateNoChange, 5, 5
	pi.MKey, pi.MKeyProtectBits, pi.MKeyLeasePeriod = goodMKey, 2, 0
	if got, ok := smp(proto.MADMethodSet, wrongMKey, &pi); !ok || got.MKey != goodMKey || got.MKeyProtectBits != 2 {
		t.Fatalf("Set M_Key: answered %v, %+v", ok, got)
	}

	// Level 2: a Set and a Get with another M_Key.
	evil := pi
	evil.LID, evil.MKey, evil.MKeyProtectBits = 9, wrongMKey, 0
	if _, ok := smp(proto.MADMethodSet, wrongMKey, &evil); ok {
		t.Fatal("a Set with the wrong M_Key was answered")
	}
	if _, ok := smp(proto.MADMethodGet, wrongMKey, nil); ok {
		t.Fatal("a level 2 Get with the wrong M_Key was answered")
	}
	if l := lid(); l != 5 {
		t.Fatalf("LID %d after a Set with the wrong M_Key; want 5", l)
	}
	if n := mkeyDrops(tb, 0); n != 2 {
		t.Errorf("SMPMKeyDrops %d; want 2", n)
	}
	got, ok := smp(proto.MADMethodGet, goodMKey, nil)
	if !ok || got.MKey != goodMKey || got.MKeyProtectBits != 2 || got.MKeyViolations != 2 {
		t.Fatalf("Get with the right M_Key: answered %v, M_Key %#x, protect %d, violations %d; want %#x, 2, 2",
			ok, got.MKey, got.MKeyProtectBits, got.MKeyViolations, uint64(goodMKey))
	}

	// Level 1: a Get with another M_Key sees M_Key 0; a Set is dropped.
	pi.MKeyProtectBits, pi.MKeyViolations = 1, 0
	if _, ok := smp(proto.MADMethodSet, goodMKey, &pi); !ok {
		t.Fatal("a Set with the right M_Key was not answered")
	}
	if got, ok := smp(proto.MADMethodGet, wrongMKey, nil); !ok || got.MKey != 0 || got.LID != 5 {
		t.Fatalf("level 1 Get with the wrong M_Key: answered %v, M_Key %#x, LID %d; want M_Key 0", ok, got.MKey, got.LID)
	}
	if _, ok := smp(proto.MADMethodSet, wrongMKey, &evil); ok || lid() != 5 {
		t.Fatalf("level 1 Set with the wrong M_Key: answered %v, LID %d", ok, lid())
	}
	// The right M_Key changes the LID.
	pi.LID = 9
	if got, ok := smp(proto.MADMethodSet, goodMKey, &pi); !ok || got.LID != 9 || lid() != 9 {
		t.Fatalf("Set LID 9 with the right M_Key: answered %v, LID %d, port LID %d", ok, got.LID, lid())
	}

	// The lease. A violation starts a 1 s timer; the right M_Key stops
	// it, so well after it would have run out the port is protected.
	pi.MKeyProtectBits, pi.MKeyLeasePeriod = 2, 1
	if _, ok := smp(proto.MADMethodSet, goodMKey, &pi); !ok {
		t.Fatal("Set lease: no answer")
	}
	if _, ok := smp(proto.MADMethodGet, wrongMKey, nil); ok {
		t.Fatal("a level 2 Get with the wrong M_Key was answered")
	}
	if _, ok := smp(proto.MADMethodGet, goodMKey, nil); !ok {
		t.Fatal("a Get with the right M_Key was not answered")
	}
	time.Sleep(1500 * time.Millisecond)
	if _, ok := smp(proto.MADMethodGet, wrongMKey, nil); ok {
		t.Fatal("the lease ran out although a request with the right M_Key stopped it")
	}
	// That violation started the timer again; nothing stops it now.
	// Once it runs out the bits are 0: a Get with any M_Key reads the
	// key, a Set with another is still refused.
	start := time.Now()
	for {
		if got, ok = smp(proto.MADMethodGet, wrongMKey, nil); ok {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the M_Key lease did not run out in 10 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got.MKey != goodMKey || got.MKeyProtectBits != 0 {
		t.Fatalf("after the lease: M_Key %#x, protect %d; want %#x, 0", got.MKey, got.MKeyProtectBits, uint64(goodMKey))
	}
	if _, ok := smp(proto.MADMethodSet, wrongMKey, &evil); ok || lid() != 9 {
		t.Fatalf("Set with the wrong M_Key after the lease: answered %v, LID %d", ok, lid())
	}
	pi.MKeyProtectBits = 2
	if got, ok := smp(proto.MADMethodSet, got.MKey, &pi); !ok || got.MKeyProtectBits != 2 {
		t.Fatalf("the SM takes the port back with the key it read: answered %v, protect %d", ok, got.MKeyProtectBits)
	}
}

// TestIBMKeyFromAnotherGuest: guest 1 runs the subnet manager and puts
// M_Keys on its own port and on the switch. Guest 2, through its own
// QP0, sends LID-routed SubnSets with a guessed M_Key to take guest 1's
// LID and the switch's. Both SMAs drop them without an answer and count
// them (guest 1's engine and PortInfo, the switch's port 0 PortInfo);
// no LID changes. With the right M_Key, guest 2's Sets are answered:
// the key, not the sender, decides.
func TestIBMKeyFromAnotherGuest(t *testing.T) {
	tb := newIBTestbed(t, 2)
	ctx := testCtx(t)
	sm := ibsm.New(newGuestMADPort(t, tb.guests[0]))
	if err := sm.Bringup(); err != nil {
		t.Fatal(err)
	}
	sp := sm.Port.(*guestMADPort)
	lids := make([]uint16, 2)
	for i, g := range tb.guests {
		pa, err := g.QueryPort(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lids[i] = uint16(pa.LID)
	}
	swLID := sm.Switches()[0].LID
	tid := uint64(0x4d00)
	// get and set go through port p and wait for the answer.
	get := func(p *guestMADPort, dlid uint16, key uint64) proto.PortInfoFields {
		t.Helper()
		tid++
		r, err := p.SMP(dlid, lidSMP(proto.MADMethodGet, proto.SMPAttrPortInfo, 0, key, tid, nil))
		if err != nil || proto.SMP(r).Status() != 0 {
			t.Fatalf("Get PortInfo of LID %d: %v", dlid, err)
		}
		return proto.PortInfo(proto.SMP(r).Data()).Fields()
	}
	set := func(p *guestMADPort, dlid uint16, key uint64, pi proto.PortInfoFields) proto.PortInfoFields {
		t.Helper()
		tid++
		r, err := p.SMP(dlid, lidSMP(proto.MADMethodSet, proto.SMPAttrPortInfo, 0, key, tid, portInfoData(pi)))
		if err != nil || proto.SMP(r).Status() != 0 {
			t.Fatalf("Set PortInfo of LID %d: %v", dlid, err)
		}
		return proto.PortInfo(proto.SMP(r).Data()).Fields()
	}
	// The SM protects guest 1's port and the switch (level 2, no lease).
	for _, dlid := range []uint16{lids[0], swLID} {
		pi := get(sp, dlid, 0)
		pi.PortState, pi.MKey, pi.MKeyProtectBits, pi.MKeyLeasePeriod = proto.PortStateNoChange, goodMKey, 2, 0
		if got := set(sp, dlid, 0, pi); got.MKey != goodMKey || got.MKeyProtectBits != 2 {
			t.Fatalf("LID %d: M_Key %#x, protect %d after the SM's Set", dlid, got.MKey, got.MKeyProtectBits)
		}
	}

	attacker := newGuestMADPort(t, tb.guests[1])
	for _, c := range []struct {
		name    string
		dlid    uint16
		dropped func() bool
	}{
		{"guest 1's port", lids[0], func() bool { return mkeyDrops(tb, 0) == 1 }},
		{"the switch", swLID, func() bool { return get(sp, swLID, goodMKey).MKeyViolations == 1 }},
	} {
		evil := get(sp, c.dlid, goodMKey)
		evil.PortState, evil.LID, evil.MKey, evil.MKeyProtectBits = proto.PortStateNoChange, 0x99, wrongMKey, 0
		tid++
		if err := attacker.post(attacker.qp0, c.dlid, lidSMP(proto.MADMethodSet, proto.SMPAttrPortInfo, 0, wrongMKey,
			tid, portInfoData(evil))); err != nil {
			t.Fatal(err)
		}
		for !c.dropped() {
			if ctx.Err() != nil {
				t.Fatalf("%s: guest 2's Set with a guessed M_Key was not counted as a violation", c.name)
			}
			time.Sleep(5 * time.Millisecond)
		}
		after := get(sp, c.dlid, goodMKey)
		if after.LID != c.dlid || after.MKey != goodMKey || after.MKeyProtectBits != 2 || after.MKeyViolations != 1 {
			t.Errorf("%s after guest 2's Set: LID %d, M_Key %#x, protect %d, violations %d", c.name, after.LID,
				after.MKey, after.MKeyProtectBits, after.MKeyViolations)
		}
		// The right M_Key from guest 2: clearing the violation count
		// is answered and applied.
		after.PortState, after.MKeyViolations = proto.PortStateNoChange, 0
		if got := set(attacker, c.dlid, goodMKey, after); got.MKeyViolations != 0 || got.LID != c.dlid {
			t.Errorf("%s: guest 2's Set with the right M_Key: violations %d, LID %d", c.name, got.MKeyViolations, got.LID)
		}
	}
	if pa, err := tb.guests[0].QueryPort(ctx); err != nil || uint16(pa.LID) != lids[0] {
		t.Errorf("guest 1's port: %+v, %v; want LID %d", pa, err, lids[0])
	}
}
