package ibsw

import (
	"math/bits"

	"github.com/PacketFive/hinic/internal/proto"
)

// Snapshot is a copy of a switch's state for status displays (`hinic
// fabric status`). It shares nothing with the switch.
type Snapshot struct {
	NodeGUID    uint64
	Description string
	// LID and LMC are port 0's; SMLID is the master SM's LID the SM
	// programmed there (all 0 before the SM ran).
	LID   uint16
	LMC   uint8
	SMLID uint16
	// PortStateChange is SwitchInfo.PortStateChange: a port went up or
	// down since the SM last cleared it.
	PortStateChange bool
	LinearFDBTop    uint16
	MulticastFDBTop uint16
	LifeTimeValue   uint8
	// MKeyProtectBits and MKeyViolations are port 0's M_Key state
	// (IBA 14.2.4): the protection level the SM set (0 again once the
	// lease ran out) and the count of SMPs dropped for a wrong M_Key.
	// The M_Key itself is not shown.
	MKeyProtectBits uint8
	MKeyViolations  uint16
	// Ports holds port 0 (the management port) and the external ports
	// 1..NumPorts, indexed by port number.
	Ports []PortStatus
	// LFT[lid] is the egress port of each LID 0..LinearFDBTop
	// (proto.LFTPortDrop: none; 0: the switch itself).
	LFT []uint8
	// MFT lists the MLIDs whose port mask is not empty, in MLID order.
	MFT []MFTEntry
	// Drops counts why packets were dropped, switch-wide.
	Drops Drops
}

// PortStatus is one port in a Snapshot.
type PortStatus struct {
	Port      int
	LinkUp    bool  // the cable, as SetPortLink reported it (port 0: always)
	State     uint8 // PortState: proto.PortStateDown .. PortStateActive
	PhysState uint8 // PortPhysicalState: proto.PortPhysState*
	// NeighborMTU and OperationalVLs as the SM set them (encodings).
	NeighborMTU    uint8
	OperationalVLs uint8
	// PartitionEnforcement reports inbound or outbound P_Key checks on.
	PartitionEnforcement bool
	Counters             Counters
}

// MFTEntry is one multicast group the MFT forwards.
type MFTEntry struct {
	MLID  uint16
	Ports []int // ascending; 0 is the switch's own port
}

// Snapshot returns a copy of the switch's state. Like every method it must
// be called by the goroutine that owns the switch.
func (s *Switch) Snapshot() Snapshot {
	p0 := &s.ports[0].pi
	s.mkey.Expire(p0, s.cfg.Clock.Now())
	snap := Snapshot{
		NodeGUID:        s.cfg.NodeGUID,
		Description:     s.cfg.Description,
		LID:             p0.LID,
		LMC:             p0.LMC,
		SMLID:           p0.MasterSMLID,
		PortStateChange: s.si.PortStateChange,
		LinearFDBTop:    s.si.LinearFDBTop,
		MulticastFDBTop: s.si.MulticastFDBTop,
		LifeTimeValue:   s.si.LifeTimeValue,
		MKeyProtectBits: p0.MKeyProtectBits,
		MKeyViolations:  p0.MKeyViolations,
		Ports:           make([]PortStatus, len(s.ports)),
		Drops:           s.drops,
	}
	for i := range s.ports {
		pt := &s.ports[i]
		snap.Ports[i] = PortStatus{
			Port:                 i,
			LinkUp:               pt.linkUp,
			State:                pt.pi.PortState,
			PhysState:            pt.pi.PortPhysicalState,
			NeighborMTU:          pt.pi.NeighborMTU,
			OperationalVLs:       pt.pi.OperationalVLs,
			PartitionEnforcement: pt.pi.PartitionEnforcementInbound || pt.pi.PartitionEnforcementOutbound,
			Counters:             pt.cnt,
		}
	}
	top := min(int(s.si.LinearFDBTop), len(s.lft)-1)
	snap.LFT = append([]uint8(nil), s.lft[:top+1]...)
	for idx := range s.cfg.MulticastFDBCap {
		var ports []int
		for pos, m := range s.mft[idx*s.positions : (idx+1)*s.positions] {
			for m != 0 {
				ports = append(ports, pos*proto.MFTPortsPerPosition+bits.TrailingZeros16(m))
				m &= m - 1
			}
		}
		if ports != nil {
			snap.MFT = append(snap.MFT, MFTEntry{MLID: uint16(proto.MFTMLIDBase + idx), Ports: ports})
		}
	}
	return snap
}

// PortStateName returns the IBA name of a PortState value, as ibstat and
// smpquery print it.
func PortStateName(state uint8) string {
	switch state {
	case proto.PortStateNoChange:
		return "NoChange"
	case proto.PortStateDown:
		return "Down"
	case proto.PortStateInit:
		return "Initialize"
	case proto.PortStateArmed:
		return "Armed"
	case proto.PortStateActive:
		return "Active"
	}
	return "Reserved"
}

// PhysStateName returns the IBA name of a PortPhysicalState value.
func PhysStateName(state uint8) string {
	switch state {
	case proto.PortPhysStateNoChange:
		return "NoChange"
	case proto.PortPhysStateSleep:
		return "Sleep"
	case proto.PortPhysStatePolling:
		return "Polling"
	case proto.PortPhysStateDisabled:
		return "Disabled"
	case proto.PortPhysStatePortConfigurationTraining:
		return "PortConfigurationTraining"
	case proto.PortPhysStateLinkUp:
		return "LinkUp"
	case proto.PortPhysStateLinkErrorRecovery:
		return "LinkErrorRecovery"
	case proto.PortPhysStatePhyTest:
		return "PhyTest"
	}
	return "Reserved"
}
