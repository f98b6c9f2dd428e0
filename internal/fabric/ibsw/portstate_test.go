package ibsw

import (
	"testing"

	"github.com/PacketFive/hinic/internal/proto"
)

// TestPortStateTransitions walks external port 2 through PortInfo Sets
// (sent in on port 1) and link changes, checking each answer's status and
// the state that results (ibsim's do_portinfo step rules, fabric-facts 1.2).
func TestPortStateTransitions(t *testing.T) {
	type step struct {
		link   *bool                // SetPortLink(2, *link) instead of a Set
		set    proto.PortInfoFields // the Set's PortInfo
		status uint16               // the answer's status
		state  uint8                // PortState afterwards
		phys   uint8                // PortPhysicalState afterwards (0: not checked)
	}
	up, down := true, false
	st := func(s uint8) proto.PortInfoFields { return proto.PortInfoFields{PortState: s} }
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"link up: Init, then Armed, then Active", []step{
			{link: &up, state: proto.PortStateInit, phys: proto.PortPhysStateLinkUp},
			{set: st(proto.PortStateArmed), state: proto.PortStateArmed},
			{set: st(proto.PortStateActive), state: proto.PortStateActive},
		}},
		{"no skipping Armed", []step{
			{link: &up, state: proto.PortStateInit},
			{set: st(proto.PortStateActive), status: 0x1C, state: proto.PortStateInit},
		}},
		{"Armed->Armed and Active->Active are 0x1C (OpenSM tolerates it)", []step{
			{link: &up, state: proto.PortStateInit},
			{set: st(proto.PortStateArmed), state: proto.PortStateArmed},
			{set: st(proto.PortStateArmed), status: 0x1C, state: proto.PortStateArmed},
			{set: st(proto.PortStateActive), state: proto.PortStateActive},
			{set: st(proto.PortStateActive), status: 0x1C, state: proto.PortStateActive},
			{set: st(proto.PortStateArmed), status: 0x1C, state: proto.PortStateActive},
		}},
		{"Init and reserved states cannot be written", []step{
			{link: &up, state: proto.PortStateInit},
			{set: st(proto.PortStateInit), status: 0x1C, state: proto.PortStateInit},
			{set: st(5), status: 0x1C, state: proto.PortStateInit},
			{set: st(15), status: 0x1C, state: proto.PortStateInit},
		}},
		{"no link: nothing but Down", []step{
			{set: st(proto.PortStateArmed), status: 0x1C, state: proto.PortStateDown},
			{set: st(proto.PortStateDown), state: proto.PortStateDown, phys: proto.PortPhysStatePolling},
		}},
		{"Down retrains to Init", []step{
			{link: &up, state: proto.PortStateInit},
			{set: st(proto.PortStateArmed), state: proto.PortStateArmed},
			{set: st(proto.PortStateActive), state: proto.PortStateActive},
			{set: st(proto.PortStateDown), state: proto.PortStateInit, phys: proto.PortPhysStateLinkUp},
		}},
		{"link loss from Active", []step{
			{link: &up, state: proto.PortStateInit},
			{set: st(proto.PortStateArmed), state: proto.PortStateArmed},
			{link: &down, state: proto.PortStateDown, phys: proto.PortPhysStatePolling},
			{link: &up, state: proto.PortStateInit},
		}},
		{"Disabled until Polling", []step{
			{link: &up, state: proto.PortStateInit},
			{set: proto.PortInfoFields{PortPhysicalState: proto.PortPhysStateDisabled}, state: proto.PortStateDown, phys: proto.PortPhysStateDisabled},
			{link: &down, state: proto.PortStateDown, phys: proto.PortPhysStateDisabled},
			{link: &up, state: proto.PortStateDown, phys: proto.PortPhysStateDisabled},
			{set: st(proto.PortStateArmed), status: 0x1C, state: proto.PortStateDown},
			{set: proto.PortInfoFields{PortPhysicalState: proto.PortPhysStatePolling}, state: proto.PortStateInit, phys: proto.PortPhysStateLinkUp},
		}},
		{"bad PhysState values", []step{
			{link: &up, state: proto.PortStateInit},
			{set: proto.PortInfoFields{PortPhysicalState: proto.PortPhysStateLinkUp}, status: 0x1C, state: proto.PortStateInit},
			{set: proto.PortInfoFields{PortPhysicalState: proto.PortPhysStateSleep}, status: 0x1C, state: proto.PortStateInit},
		}},
		{"a rejected Set changes nothing", []step{
			{link: &up, state: proto.PortStateInit},
			{set: proto.PortInfoFields{PortState: proto.PortStateActive, OperationalVLs: proto.VLCapVL0To3, NeighborMTU: proto.IBMTU1024}, status: 0x1C, state: proto.PortStateInit},
			{set: proto.PortInfoFields{OperationalVLs: proto.VLCapVL0To14}, status: 0x1C, state: proto.PortStateInit}, // above VLCap
			{set: proto.PortInfoFields{LinkWidthEnabled: proto.LinkWidth12X}, status: 0x1C, state: proto.PortStateInit},
			{set: proto.PortInfoFields{LinkSpeedEnabled: 0x8}, status: 0x1C, state: proto.PortStateInit},
			{set: proto.PortInfoFields{LinkSpeedExtEnabled: proto.LinkSpeedExtFDR}, status: 0x1C, state: proto.PortStateInit},
			{set: proto.PortInfoFields{LinkDownDefaultState: proto.PortPhysStateDisabled}, status: 0x1C, state: proto.PortStateInit},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newTestSwitch(t, 4)
			s.SetPortLink(1, true)
			initial := s.portInfo(2, 1)
			for i, stp := range c.steps {
				if stp.link != nil {
					s.SetPortLink(2, *stp.link)
				} else {
					r := sma(t, s, 1, proto.MADMethodSet, proto.SMPAttrPortInfo, proto.PortInfoAttrMod(2, true), portInfoData(stp.set))
					if r.Status() != stp.status {
						t.Fatalf("step %d: status %#x, want %#x", i, r.Status(), stp.status)
					}
					// The answer is the full current PortInfo.
					if got := proto.PortInfo(r.Data()).Fields(); got != s.portInfo(2, 1) {
						t.Fatalf("step %d: answer is not the current PortInfo", i)
					}
				}
				pi := s.portInfo(2, 1)
				if pi.PortState != stp.state || (stp.phys != 0 && pi.PortPhysicalState != stp.phys) {
					t.Fatalf("step %d: %s/%s, want %s/%s", i, PortStateName(pi.PortState), PhysStateName(pi.PortPhysicalState),
						PortStateName(stp.state), PhysStateName(stp.phys))
				}
			}
			if c.name == "a rejected Set changes nothing" {
				now := s.portInfo(2, 1)
				now.PortState, now.PortPhysicalState = initial.PortState, initial.PortPhysicalState
				if now != initial {
					t.Errorf("rejected Sets changed PortInfo:\n%+v\n%+v", now, initial)
				}
			}
		})
	}
}

// TestPortStateChange: SwitchInfo.PortStateChange is set by links going up
// or down, not by the SM's own Sets, and is write-1-to-clear.
func TestPortStateChange(t *testing.T) {
	s := newTestSwitch(t, 4)
	psc := func() bool {
		t.Helper()
		s.SetPortLink(1, true) // no-op once up; keeps the SMA reachable
		r := sma(t, s, 1, proto.MADMethodGet, proto.SMPAttrSwitchInfo, 0, nil)
		return proto.SwitchInfo(r.Data()[:proto.SwitchInfoSize]).PortStateChange()
	}
	write := func(bit bool) bool {
		t.Helper()
		d := make([]byte, proto.SMPDataSize)
		proto.SwitchInfo(d[:proto.SwitchInfoSize]).Encode(&proto.SwitchInfoFields{PortStateChange: bit})
		r := sma(t, s, 1, proto.MADMethodSet, proto.SMPAttrSwitchInfo, 0, d)
		return proto.SwitchInfo(r.Data()[:proto.SwitchInfoSize]).PortStateChange()
	}
	if s.Snapshot().PortStateChange {
		t.Fatal("set on a new switch")
	}
	if !psc() {
		t.Fatal("not set by a link coming up")
	}
	if !write(false) {
		t.Error("writing 0 cleared it")
	}
	if write(true) {
		t.Error("writing 1 did not clear it")
	}
	s.SetPortLink(2, true)
	if !psc() {
		t.Error("not set by port 2 coming up")
	}
	write(true)
	setState(t, s, 1, 2, proto.PortStateArmed)
	setState(t, s, 1, 2, proto.PortStateActive)
	setState(t, s, 1, 2, proto.PortStateDown)
	for _, phys := range []uint8{proto.PortPhysStateDisabled, proto.PortPhysStatePolling} {
		r := sma(t, s, 1, proto.MADMethodSet, proto.SMPAttrPortInfo, 2, portInfoData(proto.PortInfoFields{PortPhysicalState: phys}))
		if r.Status() != 0 {
			t.Fatalf("PhysState %d: %#x", phys, r.Status())
		}
	}
	if psc() {
		t.Error("set by the SM's own state changes")
	}
	s.SetPortLink(2, false)
	if !psc() {
		t.Error("not set by a link going down")
	}
	if got := s.Snapshot().Ports[2].Counters.LinkDowned; got != 1 {
		t.Errorf("LinkDowned %d, want 1", got)
	}
	// Port 0 is always Active, and SetPortLink ignores it.
	s.SetPortLink(0, false)
	if st := s.Snapshot().Ports[0]; st.State != proto.PortStateActive || !st.LinkUp {
		t.Errorf("port 0: %+v", st)
	}
}
