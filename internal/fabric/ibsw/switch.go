package ibsw

import (
	"github.com/PacketFive/hinic/internal/proto"
)

// Fixed link attributes every port reports. The emulated links have no
// physical layer; these are plausible values for tools that print rates
// (4x QDR: 40 Gb/s signalling).
const (
	linkWidthSupported = proto.LinkWidth1X | proto.LinkWidth4X
	linkWidthActive    = proto.LinkWidth4X
	linkSpeedSupported = proto.LinkSpeedSDR | proto.LinkSpeedDDR | proto.LinkSpeedQDR
	linkSpeedActive    = proto.LinkSpeedQDR

	// port0CapabilityMask is port 0's PortInfo.CapabilityMask. Only
	// IsExtendedSpeedsSupported: the LinkSpeedExt fields are valid (and
	// say no extended speed), which makes OpenSM send PortInfo with the
	// SMSupportsExtendedSpeeds modifier bit as it does to real switches.
	// No traps, no SL mapping, no MulticastFDBTop: none is implemented.
	port0CapabilityMask = proto.PortCapIsExtendedSpeedsSupported

	// defaultLifeTimeValue is SwitchInfo.LifeTimeValue at power-on; the
	// SM sets its packet_life_time (OpenSM 0x12).
	defaultLifeTimeValue = 0
	// hoqLifeInfinite is the power-on HOQLife (IBA: 19+ is infinite);
	// the emulated relay never ages packets out whatever the SM sets.
	hoqLifeInfinite = 0x1F

	// defaultGIDPrefix is port 0's GidPrefix until the SM writes one:
	// the link-local prefix fe80::/64 (IBA 4.1.1).
	defaultGIDPrefix = 0xFE80000000000000

	// linkSpeedExtSetToSupported and linkSpeedExtNoChange are the
	// special LinkSpeedExtEnabled values of a Set (IBA 14.2.5.6).
	linkSpeedExtSetToSupported = 0x1E
	linkSpeedExtNoChange       = 0x1F
)

// port is the state of one switch port: 0 is the management port, 1..N
// the external ports.
type port struct {
	// linkUp is the cable: the caller's SetPortLink.
	linkUp bool
	// pi holds the PortInfo fields the port reports. Fields that only
	// port 0 carries (LID, M_Key, ...) are kept in port 0's pi and read
	// as zero on external ports.
	pi proto.PortInfoFields
	// pkeys is the P_Key table (PartitionCap entries for port 0,
	// PartitionEnforcementCap for the others).
	pkeys []uint16
	// numVLs is the number of data VLs OperationalVLs enables (cached
	// for the data path).
	numVLs uint8
	cnt    Counters
}

// Switch is one emulated InfiniBand switch. It is not safe for concurrent
// use: one goroutine owns it and makes every call (see the package doc).
type Switch struct {
	cfg   Config
	ports []port // 0..NumPorts

	// si holds the SwitchInfo fields the switch reports.
	si proto.SwitchInfoFields

	// lft[lid] is the egress port of a unicast LID (proto.LFTPortDrop:
	// none). len(lft) == LinearFDBCap.
	lft []uint8
	// mft[(mlid-0xC000)*positions+position] is the 16-port mask of that
	// MLID and position; positions covers ports 0..NumPorts.
	mft       []uint16
	positions int

	drops Drops

	// mkey is the M_Key lease timer of port 0, whose PortInfo holds the
	// switch's M_Key (IBA 14.2.4: a switch has one, on port 0).
	mkey proto.MKeyLease

	// Scratch space for building answers; Ingress is not reentrant.
	mad  [proto.MADSize]byte
	resp [MaxResponseSize]byte
	out  proto.PacketFields
}

// New builds a switch from cfg with every external port's link down, an
// LFT that drops everything, an empty MFT and P_Key tables holding only the
// default full-membership key 0xFFFF (as ibsim starts). It fails with an
// error wrapping ErrConfig when cfg is inconsistent.
func New(cfg Config) (*Switch, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Switch{
		cfg:       cfg,
		ports:     make([]port, cfg.NumPorts+1),
		lft:       make([]uint8, cfg.LinearFDBCap),
		positions: cfg.NumPorts/proto.MFTPortsPerPosition + 1,
	}
	s.mft = make([]uint16, cfg.MulticastFDBCap*s.positions)
	for i := range s.lft {
		s.lft[i] = proto.LFTPortDrop
	}
	s.si = proto.SwitchInfoFields{
		LinearFDBCap:                   uint16(cfg.LinearFDBCap),
		MulticastFDBCap:                uint16(cfg.MulticastFDBCap),
		DefaultMulticastPrimaryPort:    proto.LFTPortDrop,
		DefaultMulticastNotPrimaryPort: proto.LFTPortDrop,
		LifeTimeValue:                  defaultLifeTimeValue,
		PartitionEnforcementCap:        uint16(cfg.PartitionEnforcementCap),
		InboundEnforcementCap:          true,
		OutboundEnforcementCap:         true,
		FilterRawInboundCap:            true,
		FilterRawOutboundCap:           true,
	}
	for i := range s.ports {
		p := &s.ports[i]
		size := cfg.PartitionEnforcementCap
		if i == 0 {
			size = cfg.PartitionCap
		}
		p.pkeys = make([]uint16, size)
		p.pkeys[0] = proto.PKeyDefault
		p.pi = proto.PortInfoFields{
			LinkWidthEnabled:     linkWidthSupported,
			LinkWidthSupported:   linkWidthSupported,
			LinkWidthActive:      linkWidthActive,
			LinkSpeedSupported:   linkSpeedSupported,
			LinkSpeedActive:      linkSpeedActive,
			LinkSpeedEnabled:     linkSpeedSupported,
			PortState:            proto.PortStateDown,
			PortPhysicalState:    proto.PortPhysStatePolling,
			LinkDownDefaultState: proto.PortPhysStatePolling,
			NeighborMTU:          cfg.MTUCap,
			MTUCap:               cfg.MTUCap,
			VLCap:                cfg.VLCap,
			OperationalVLs:       proto.VLCapVL0,
			HOQLife:              hoqLifeInfinite,
			VLStallCount:         7,
		}
		p.numVLs = 1
	}
	// Base switch port 0 (EnhancedPort0 = 0) is always up: it has no
	// link of its own (IBA 14.2.5.6; ibsim reports it Active/LinkUp).
	p0 := &s.ports[0]
	p0.linkUp = true
	p0.pi.PortState = proto.PortStateActive
	p0.pi.PortPhysicalState = proto.PortPhysStateLinkUp
	p0.pi.CapabilityMask = port0CapabilityMask
	p0.pi.GIDPrefix = defaultGIDPrefix
	p0.pi.GUIDCap = 1
	p0.pi.OperationalVLs = cfg.VLCap
	p0.numVLs = uint8(proto.VLCapNumVLs(cfg.VLCap))
	return s, nil
}

// NumPorts returns the number of external ports.
func (s *Switch) NumPorts() int { return s.cfg.NumPorts }

// LID returns the switch's base LID (port 0's), 0 until the SM sets it.
func (s *Switch) LID() uint16 { return s.ports[0].pi.LID }

// SetPortLink tells the switch that the physical link of external port p
// came up or went down. Link up moves the port to LinkUp/Init, the state
// the SM finds and then moves to Armed and Active (IBA 7.2); link down
// moves it to Polling/Down and counts LinkDowned. Either change sets
// SwitchInfo.PortStateChange, which makes the SM sweep (IBA 14.2.5.4). A
// port the SM disabled (PortPhysicalState Disabled) stays Down until the SM
// re-enables it. Calls with p outside 1..NumPorts, or that do not change
// the link, are ignored.
func (s *Switch) SetPortLink(p int, up bool) {
	if p < 1 || p > s.cfg.NumPorts || s.ports[p].linkUp == up {
		return
	}
	pt := &s.ports[p]
	pt.linkUp = up
	if !up {
		pt.cnt.LinkDowned++
	}
	old := pt.pi.PortState
	s.retrain(pt)
	// PortStateChange reports the link state machine moving a port into
	// or out of Down; changes a SubnSet causes do not set it (IBA
	// 14.2.5.4, SwitchInfo).
	if (old == proto.PortStateDown) != (pt.pi.PortState == proto.PortStateDown) {
		s.si.PortStateChange = true
	}
}

// retrain recomputes a port's states after its link or its PhysState
// changed.
func (s *Switch) retrain(pt *port) {
	switch {
	case pt.pi.PortPhysicalState == proto.PortPhysStateDisabled:
		pt.pi.PortState = proto.PortStateDown
	case pt.linkUp:
		pt.pi.PortState = proto.PortStateInit
		pt.pi.PortPhysicalState = proto.PortPhysStateLinkUp
	default:
		pt.pi.PortState = proto.PortStateDown
		pt.pi.PortPhysicalState = proto.PortPhysStatePolling
	}
}

// ownLID reports whether dlid addresses port 0: its base LID with the LMC
// low bits free (IBA 7.11.1). An unassigned LID (0) matches nothing.
func (s *Switch) ownLID(dlid uint16) bool {
	pi := &s.ports[0].pi
	if pi.LID == 0 {
		return false
	}
	mask := ^uint16(0) << pi.LMC
	return dlid&mask == pi.LID&mask
}

// pkeyMatch implements the P_Key matching rule (IBA 10.9.3): the low 15
// bits are equal, at least one key is a full member, and the base is not
// the invalid key 0.
func pkeyMatch(a, b uint16) bool {
	return a&proto.PKeyBaseMask == b&proto.PKeyBaseMask &&
		a&proto.PKeyBaseMask != 0 &&
		(a|b)&proto.PKeyMembershipFull != 0
}

// pkeyAllowed reports whether key matches an entry of the port's table.
func (pt *port) pkeyAllowed(key uint16) bool {
	for _, k := range pt.pkeys {
		if pkeyMatch(key, k) {
			return true
		}
	}
	return false
}
