// Package ibsm is a small InfiniBand subnet manager: it brings a subnet
// up the way OpenSM's first heavy sweep does (directed-route discovery,
// P_Keys, LIDs, min-hop routing, link parameters, Armed, Active), over any
// Port that carries SMPs and GMPs: an engine's QP0 and QP1 in HiNIC's
// embedded rack, or an in-memory fabric in tests.
package ibsm

import (
	"errors"
	"fmt"

	"github.com/PacketFive/hinic/internal/proto"
)

// OpenSM defaults the SM uses (include/opensm/osm_base.h, fabric-facts 2.4).
const (
	// SMMaxOpVLs is OpenSM's max_op_vls: OperationalVLs is the smaller
	// of it and both ends' VLCap.
	SMMaxOpVLs = proto.VLCapVL0To14
	// SMPacketLifeTime is OpenSM's packet_life_time, written to every
	// switch's SwitchInfo.LifeTimeValue.
	SMPacketLifeTime = 0x12
	// SMHOQLifeLeaf and SMHOQLife are OpenSM's leaf_head_of_queue_lifetime
	// (switch ports facing CAs) and head_of_queue_lifetime.
	SMHOQLifeLeaf = 0x10
	SMHOQLife     = 0x12
	// SMSubnetTimeout is OpenSM's subnet_timeout.
	SMSubnetTimeout = 0x12
	// SMGIDPrefix is the default subnet prefix fe80::/64.
	SMGIDPrefix = 0xFE80000000000000
)

// ErrNoAnswer means a request got no answer.
var ErrNoAnswer = errors.New("ibsm: no answer")

// Port is how the SM reaches the subnet: the SM's own HCA port. Each call
// sends one 256-byte MAD and returns the answer that carries its
// TransactionID, or an error (ErrNoAnswer when none came).
type Port interface {
	// SMP sends an SMP on QP0 (VL15): a directed-route one (class 0x81)
	// to the permissive LID, or a LID-routed one (class 0x01) to dlid. A
	// directed-route SMP with HopCount 0 is for the SM's own port and is
	// answered by it without the wire; for a longer route the port steps
	// HopPointer to 1 as it sends (IBA C14-9:1).
	SMP(dlid uint16, mad []byte) ([]byte, error)
	// GMP sends a GMP to QP1 of dlid (VL0, the default P_Key, Q_Key
	// 0x80010000).
	GMP(dlid uint16, mad []byte) ([]byte, error)
}

// Request records one MAD the SM sent and the status of its answer.
type Request struct {
	Class  uint8  // proto.MgmtClassSubnDirectedRoute, SubnLID or PerfMgt
	Method uint8  // proto.MADMethodGet or MADMethodSet
	Attr   uint16 // attribute ID
	AM     uint32 // attribute modifier
	Path   string // directed route "0,1,3" (HopCount 0: "0"); LID-routed: ""
	DLID   uint16 // LID-routed and GMP requests
	Status uint16 // the answer's status (15 bits for a directed route)
}

// SMNode is a node as the SM discovered it.
type SMNode struct {
	Info proto.NodeInfoFields
	Desc string
	// Path is the directed route from the SM's port: InitialPath[1..].
	// Empty for the SM's own node.
	Path []byte
	// SwitchInfo as last read or written (switches only).
	SwitchInfo proto.SwitchInfoFields
	// Ports by port number (a CA's port 0 is unused).
	Ports []SMPort
	// LID is the node's LID: port 0's for a switch, the port's for a CA.
	LID uint16
	// LFT is the table the SM computed (switches only), index = LID.
	LFT []uint8
}

// IsSwitch reports whether the node is a switch.
func (n *SMNode) IsSwitch() bool { return n.Info.NodeType == proto.NodeTypeSwitch }

// SMPort is one port of a discovered node.
type SMPort struct {
	Info       proto.PortInfoFields
	Known      bool // PortInfo was read
	Remote     *SMNode
	RemotePort int
	PKeys      []uint16
}

// SM is a minimal subnet manager behind a CA port. Bringup replays the
// SMP sequence OpenSM 3.3.23 sends on its first heavy sweep (fabric-facts
// 2.4): all of it directed-route (class 0x81) with DrSLID = DrDLID =
// 0xFFFF, one request at a time, each answered before the next.
type SM struct {
	Port Port
	// LID is the LID the SM gives its own port (1).
	LID uint16
	// Partitions are the P_Keys every CA port gets, and the switch ports
	// facing CAs with them (OpenSM's partition config). The default
	// partition 0xFFFF comes first.
	Partitions []uint16
	// Log records every request in order.
	Log []Request
	// Nodes lists the discovered nodes in discovery order; Nodes[0] is
	// the SM's own CA.
	Nodes []*SMNode

	tid uint64
}

// New returns an SM that works through port; its own port gets LID 1.
func New(port Port) *SM {
	return &SM{Port: port, LID: 1, Partitions: []uint16{proto.PKeyDefault}}
}

// Count returns how many logged requests match class, method and
// attribute (0 matches any class).
func (sm *SM) Count(class, method uint8, attr uint16) int {
	n := 0
	for _, r := range sm.Log {
		if (class == 0 || r.Class == class) && r.Method == method && r.Attr == attr {
			n++
		}
	}
	return n
}

// DR sends a directed-route SMP along path (InitialPath[1..]; empty for
// the SM's own port) and returns the answer's SMP data and status.
func (sm *SM) DR(method uint8, path []byte, attr uint16, am uint32, data []byte) ([]byte, uint16, error) {
	if len(path) > proto.SMPMaxHopCount {
		return nil, 0, fmt.Errorf("ibsm: path of %d hops", len(path))
	}
	sm.tid++
	f := proto.SMPFields{
		BaseVersion: proto.MADBaseVersion, MgmtClass: proto.MgmtClassSubnDirectedRoute,
		ClassVersion: proto.SMClassVersion, Method: method, TransactionID: sm.tid,
		AttributeID: attr, AttributeModifier: am,
		DrSLID: proto.SMPPermissiveLID, DrDLID: proto.SMPPermissiveLID,
		HopCount: uint8(len(path)),
	}
	copy(f.InitialPath[1:], path)
	mad := make([]byte, proto.MADSize)
	smp := proto.SMP(mad)
	smp.Encode(&f)
	copy(smp.Data(), data)
	rec := Request{Class: f.MgmtClass, Method: method, Attr: attr, AM: am, Path: pathString(path)}

	// A CA has one port: a route out of the SM's node starts at port 1.
	if len(path) > 0 && path[0] != 1 {
		return nil, 0, fmt.Errorf("ibsm: InitialPath[1] = %d is not the SM's port", path[0])
	}
	resp, err := sm.Port.SMP(proto.LIDPermissive, mad)
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s path %s: %w", methodName(method), attrName(attr), rec.Path, err)
	}
	if r := proto.SMP(resp); !r.Direction() || r.HopPointer() != 0 {
		return nil, 0, fmt.Errorf("ibsm: answer with D=%v HopPointer=%d", r.Direction(), r.HopPointer())
	}
	r := proto.SMP(resp)
	rec.Status = r.Status()
	sm.Log = append(sm.Log, rec)
	if r.Method() != proto.MADMethodGetResp {
		return nil, 0, fmt.Errorf("ibsm: answer method %#x", r.Method())
	}
	return append([]byte(nil), r.Data()...), r.Status(), nil
}

// LIDRouted sends a LID-routed SMP (class 0x01) to dlid, as `smpquery
// portinfo <lid> <port>` does, and returns the answer's data and status.
func (sm *SM) LIDRouted(method uint8, dlid uint16, attr uint16, am uint32, data []byte) ([]byte, uint16, error) {
	sm.tid++
	mad := make([]byte, proto.MADSize)
	smp := proto.SMP(mad)
	smp.Encode(&proto.SMPFields{
		BaseVersion: proto.MADBaseVersion, MgmtClass: proto.MgmtClassSubnLID,
		ClassVersion: proto.SMClassVersion, Method: method, TransactionID: sm.tid,
		AttributeID: attr, AttributeModifier: am,
	})
	copy(smp.Data(), data)
	resp, err := sm.Port.SMP(dlid, mad)
	rec := Request{Class: proto.MgmtClassSubnLID, Method: method, Attr: attr, AM: am, DLID: dlid}
	if err != nil {
		return nil, 0, fmt.Errorf("LID-routed %s to LID %d: %w", attrName(attr), dlid, err)
	}
	r := proto.SMP(resp)
	rec.Status = r.Status()
	sm.Log = append(sm.Log, rec)
	return append([]byte(nil), r.Data()...), r.Status(), nil
}

// Perf sends a PerfMgt GMP (class 0x04) to QP1 of dlid on VL0, as
// perfquery does, and returns the answer's attribute data (192 bytes) and
// status.
func (sm *SM) Perf(method uint8, dlid uint16, attr uint16, am uint32, data []byte) ([]byte, uint16, error) {
	sm.tid++
	mad := make([]byte, proto.MADSize)
	m := proto.PerfMgtMAD(mad)
	m.Encode(&proto.MADFields{
		BaseVersion: proto.MADBaseVersion, MgmtClass: proto.MgmtClassPerfMgt,
		ClassVersion: proto.PerfMgtClassVersion, Method: method, TransactionID: sm.tid,
		AttributeID: attr, AttributeModifier: am,
	})
	copy(m.Data(), data)
	resp, err := sm.Port.GMP(dlid, mad)
	rec := Request{Class: proto.MgmtClassPerfMgt, Method: method, Attr: attr, AM: am, DLID: dlid}
	if err != nil {
		return nil, 0, fmt.Errorf("PerfMgt %#x to LID %d: %w", attr, dlid, err)
	}
	r := proto.PerfMgtMAD(resp)
	rec.Status = r.Status()
	sm.Log = append(sm.Log, rec)
	return append([]byte(nil), r.Data()...), r.Status(), nil
}

// get and set are DR with a status check: any status but 0 is an error.
func (sm *SM) get(path []byte, attr uint16, am uint32) ([]byte, error) {
	return sm.checked(proto.MADMethodGet, path, attr, am, nil)
}

func (sm *SM) set(path []byte, attr uint16, am uint32, data []byte) ([]byte, error) {
	return sm.checked(proto.MADMethodSet, path, attr, am, data)
}

func (sm *SM) checked(method uint8, path []byte, attr uint16, am uint32, data []byte) ([]byte, error) {
	d, st, err := sm.DR(method, path, attr, am, data)
	if err != nil {
		return nil, err
	}
	if st != proto.MADStatusOK {
		return nil, fmt.Errorf("%s %s AM %#x path %s: status %#04x", methodName(method), attrName(attr), am, pathString(path), st)
	}
	return d, nil
}

// Bringup brings the subnet up the way OpenSM's first heavy sweep does
// (osm_state_mgr.c do_sweep; fabric-facts 2.4 steps 1-10, without the
// optional QoS, multicast and alias-GUID steps):
//
//  1. the SM's own port at HopCount 0: NodeInfo, NodeDescription,
//     PortInfo, P_KeyTable;
//  2. discovery by directed-route extension: for each new node NodeInfo,
//     NodeDescription, and for a switch SwitchInfo, PortInfo of ports
//     0..N, NodeInfo one hop further out of every port in Init or above
//     but the one we came in by, then the P_KeyTable blocks; for a CA
//     PortInfo of its port and its P_KeyTable;
//  3. Set SwitchInfo with PortStateChange=1 (write 1 to clear);
//  4. P_Key tables and partition enforcement on switch ports facing CAs;
//  5. the SM's port: LID, MasterSMLID;
//  6. every switch's port 0 and every CA port: LIDs (switches 2, 3, ...,
//     then the other CAs), MasterSMLID, NeighborMTU, OperationalVLs
//     (with PortState Down to retrain when those change);
//  7. min-hop routing: Set SwitchInfo (LinearFDBTop, LifeTimeValue),
//     then Set LinearForwardingTable blocks;
//  8. (QoS, multicast, alias GUIDs: skipped, as in the default config);
//  9. Set PortInfo with no state change on every port, AM | 0x80000000;
//  10. Set PortInfo Armed on every port below Armed, then Active.
//
// Calling it again is a new heavy sweep: the SM forgets what it knew,
// rediscovers and sends only what differs (and the link passes to ports
// below the target state), as OpenSM does after a PortStateChange.
func (sm *SM) Bringup() error {
	sm.Nodes = nil
	steps := []struct {
		name string
		fn   func() error
	}{
		{"discover", sm.discover},
		{"clear PortStateChange", sm.clearPortStateChange},
		{"partitions", sm.partitions},
		{"LIDs", sm.assignLIDs},
		{"routing", sm.route},
		{"link parameters", func() error { return sm.linkPass(proto.PortStateNoChange) }},
		{"arm", func() error { return sm.linkPass(proto.PortStateArmed) }},
		{"activate", func() error { return sm.linkPass(proto.PortStateActive) }},
	}
	for _, st := range steps {
		if err := st.fn(); err != nil {
			return fmt.Errorf("ibsm: bring-up, %s: %w", st.name, err)
		}
	}
	return nil
}

// Node returns the discovered node with the given GUID.
func (sm *SM) Node(guid uint64) *SMNode {
	for _, n := range sm.Nodes {
		if n.Info.NodeGUID == guid {
			return n
		}
	}
	return nil
}

// Switches returns the discovered switches in discovery order.
func (sm *SM) Switches() []*SMNode {
	var sws []*SMNode
	for _, n := range sm.Nodes {
		if n.IsSwitch() {
			sws = append(sws, n)
		}
	}
	return sws
}

// discover runs steps 1 and 2: breadth first, one request at a time.
func (sm *SM) discover() error {
	self, err := sm.probe(nil)
	if err != nil {
		return err
	}
	type hop struct {
		from *SMNode
		port int
	}
	var queue []hop
	enqueue := func(n *SMNode, inPort int) {
		for p := range n.Ports {
			if p == 0 || p == inPort || !n.Ports[p].Known {
				continue
			}
			if n.Ports[p].Info.PortState >= proto.PortStateInit && (n.IsSwitch() || len(n.Path) == 0) {
				queue = append(queue, hop{n, p})
			}
		}
	}
	enqueue(self, 0)
	for len(queue) > 0 {
		h := queue[0]
		queue = queue[1:]
		path := append(append([]byte(nil), h.from.Path...), byte(h.port))
		ni, err := sm.get(path, proto.SMPAttrNodeInfo, 0)
		if err != nil {
			return err
		}
		info := proto.NodeInfo(ni).Fields()
		if known := sm.Node(info.NodeGUID); known != nil {
			link(h.from, h.port, known, int(info.LocalPortNum))
			continue
		}
		n, err := sm.probeNew(path, info)
		if err != nil {
			return err
		}
		link(h.from, h.port, n, int(info.LocalPortNum))
		enqueue(n, int(info.LocalPortNum))
	}
	return nil
}

func link(a *SMNode, pa int, b *SMNode, pb int) {
	if pa < len(a.Ports) && pb < len(b.Ports) {
		a.Ports[pa].Remote, a.Ports[pa].RemotePort = b, pb
		b.Ports[pb].Remote, b.Ports[pb].RemotePort = a, pa
	}
}

// probe reads the node at path (step 1 for the SM's own port).
func (sm *SM) probe(path []byte) (*SMNode, error) {
	ni, err := sm.get(path, proto.SMPAttrNodeInfo, 0)
	if err != nil {
		return nil, err
	}
	return sm.probeNew(path, proto.NodeInfo(ni).Fields())
}

// probeNew reads what OpenSM reads of a newly found node.
func (sm *SM) probeNew(path []byte, info proto.NodeInfoFields) (*SMNode, error) {
	n := &SMNode{Info: info, Path: path, Ports: make([]SMPort, int(info.NumPorts)+1)}
	sm.Nodes = append(sm.Nodes, n)
	nd, err := sm.get(path, proto.SMPAttrNodeDescription, 0)
	if err != nil {
		return nil, err
	}
	n.Desc = string(proto.NodeDescription(nd).NodeString())
	if !n.IsSwitch() {
		p := int(info.LocalPortNum)
		if err := sm.readPort(n, p, uint32(p)); err != nil {
			return nil, err
		}
		return n, sm.readPKeys(n, p, 0, int(info.PartitionCap))
	}
	si, err := sm.get(path, proto.SMPAttrSwitchInfo, 0)
	if err != nil {
		return nil, err
	}
	n.SwitchInfo = proto.SwitchInfo(si[:proto.SwitchInfoSize]).Fields()
	for p := range n.Ports {
		if err := sm.readPort(n, p, uint32(p)); err != nil {
			return nil, err
		}
	}
	if err := sm.readPKeys(n, 0, 0, int(info.PartitionCap)); err != nil {
		return nil, err
	}
	for p := 1; p < len(n.Ports); p++ {
		if n.Ports[p].Info.PortState < proto.PortStateInit {
			continue
		}
		if err := sm.readPKeys(n, p, uint32(p)<<16, int(n.SwitchInfo.PartitionEnforcementCap)); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func (sm *SM) readPort(n *SMNode, p int, am uint32) error {
	pi, err := sm.get(n.Path, proto.SMPAttrPortInfo, am)
	if err != nil {
		return err
	}
	n.Ports[p].Info = proto.PortInfo(pi).Fields()
	n.Ports[p].Known = true
	return nil
}

// readPKeys reads ceil(size/32) P_KeyTable blocks with modifier am|block.
func (sm *SM) readPKeys(n *SMNode, p int, am uint32, size int) error {
	n.Ports[p].PKeys = nil
	for b := 0; b*proto.PKeyTableEntriesPerBlock < size; b++ {
		d, err := sm.get(n.Path, proto.SMPAttrPKeyTable, am|uint32(b))
		if err != nil {
			return err
		}
		f := proto.PKeyTable(d).Fields()
		n.Ports[p].PKeys = append(n.Ports[p].PKeys, f.PKeys[:]...)
	}
	return nil
}

// clearPortStateChange is step 3 (osm_reset_switch_state_change_bit): only
// switches that report the bit get the Set.
func (sm *SM) clearPortStateChange() error {
	for _, n := range sm.Switches() {
		if !n.SwitchInfo.PortStateChange {
			continue
		}
		si := n.SwitchInfo
		si.PortStateChange = true // write 1 to clear
		d, err := sm.set(n.Path, proto.SMPAttrSwitchInfo, 0, encodeSwitchInfo(&si))
		if err != nil {
			return err
		}
		n.SwitchInfo = proto.SwitchInfo(d[:proto.SwitchInfoSize]).Fields()
		if n.SwitchInfo.PortStateChange {
			return fmt.Errorf("switch %#x still reports PortStateChange", n.Info.NodeGUID)
		}
	}
	return nil
}

// partitions is step 4 (osm_pkey_mgr_process): the P_Key table of every
// CA port and of the switch port facing it, then partition enforcement on
// that switch port (OpenSM writes the PortInfo it read back with
// PartitionEnforcementInbound/Outbound set and state_info2 = 0).
func (sm *SM) partitions() error {
	want := make([]uint16, proto.PKeyTableEntriesPerBlock)
	copy(want, sm.Partitions)
	for _, n := range sm.Nodes {
		if n.IsSwitch() {
			continue
		}
		p := int(n.Info.LocalPortNum)
		if err := sm.syncPKeys(n, p, 0, want); err != nil {
			return err
		}
		sw, sp := n.Ports[p].Remote, n.Ports[p].RemotePort
		if sw == nil || !sw.IsSwitch() || sw.SwitchInfo.PartitionEnforcementCap == 0 {
			continue
		}
		if err := sm.syncPKeys(sw, sp, uint32(sp)<<16, want); err != nil {
			return err
		}
		pi := sw.Ports[sp].Info
		if pi.PartitionEnforcementInbound && pi.PartitionEnforcementOutbound {
			continue
		}
		pi.PartitionEnforcementInbound, pi.PartitionEnforcementOutbound = true, true
		pi.PortState, pi.PortPhysicalState, pi.LinkDownDefaultState = proto.PortStateNoChange, 0, 0
		if err := sm.setPort(sw, sp, uint32(sp), &pi); err != nil {
			return err
		}
	}
	return nil
}

// syncPKeys writes block 0 of a port's P_Key table when it differs.
func (sm *SM) syncPKeys(n *SMNode, p int, am uint32, want []uint16) error {
	have := n.Ports[p].PKeys
	same := len(have) >= len(want)
	for i := 0; same && i < len(want); i++ {
		same = have[i] == want[i]
	}
	if same {
		return nil
	}
	var f proto.PKeyTableFields
	copy(f.PKeys[:], want)
	d := make([]byte, proto.SMPDataSize)
	proto.PKeyTable(d).Encode(&f)
	r, err := sm.set(n.Path, proto.SMPAttrPKeyTable, am, d)
	if err != nil {
		return err
	}
	got := proto.PKeyTable(r).Fields()
	if len(have) < proto.PKeyTableEntriesPerBlock {
		have = make([]uint16, proto.PKeyTableEntriesPerBlock)
	}
	copy(have, got.PKeys[:])
	n.Ports[p].PKeys = have
	return nil
}

// setPort sends a PortInfo Set and keeps the answer as the port's state.
func (sm *SM) setPort(n *SMNode, p int, am uint32, pi *proto.PortInfoFields) error {
	d := make([]byte, proto.SMPDataSize)
	proto.PortInfo(d).Encode(pi)
	r, err := sm.set(n.Path, proto.SMPAttrPortInfo, am, d)
	if err != nil {
		return err
	}
	n.Ports[p].Info = proto.PortInfo(r).Fields()
	return nil
}

// assignLIDs is steps 5 and 6 (osm_lid_mgr_process_sm and _subnet).
func (sm *SM) assignLIDs() error {
	self := sm.Nodes[0]
	next := sm.LID
	self.LID = next
	var order []*SMNode
	order = append(order, sm.Switches()...)
	for _, n := range sm.Nodes[1:] {
		if !n.IsSwitch() {
			order = append(order, n)
		}
	}
	if err := sm.setLID(self); err != nil {
		return err
	}
	for _, n := range order {
		next++
		n.LID = next
		if err := sm.setLID(n); err != nil {
			return err
		}
	}
	return nil
}

// setLID writes a node's LID as OpenSM's lid_mgr_set_physp_pi does: the
// PortInfo as read, with the LID, MasterSMLID, GidPrefix, SubnetTimeOut,
// state_info2 = 0x02 and no state change; on a CA port also NeighborMTU and
// OperationalVLs for the link, with PortState Down when they change.
func (sm *SM) setLID(n *SMNode) error {
	p := 0
	if !n.IsSwitch() {
		p = int(n.Info.LocalPortNum)
	}
	pi := n.Ports[p].Info
	pi.LID = n.LID
	pi.MasterSMLID = sm.LID
	pi.GIDPrefix = SMGIDPrefix
	pi.SubnetTimeOut = SMSubnetTimeout
	pi.PortState, pi.PortPhysicalState, pi.LinkDownDefaultState = proto.PortStateNoChange, 0, proto.PortPhysStatePolling
	if p != 0 {
		mtu, vls := sm.linkParams(n, p)
		if mtu != pi.NeighborMTU || vls != pi.OperationalVLs {
			pi.PortState = proto.PortStateDown
		}
		pi.NeighborMTU, pi.OperationalVLs = mtu, vls
	}
	if err := sm.setPort(n, p, uint32(p), &pi); err != nil {
		return err
	}
	if got := n.Ports[p].Info.LID; got != n.LID {
		return fmt.Errorf("node %#x took LID %d, answered %d", n.Info.NodeGUID, n.LID, got)
	}
	return nil
}

// linkParams is osm_physp_calc_link_mtu / _op_vls: the smaller of both
// ends' MTUCap and VLCap (and SMMaxOpVLs).
func (sm *SM) linkParams(n *SMNode, p int) (mtu, vls uint8) {
	pi := n.Ports[p].Info
	mtu, vls = pi.MTUCap, min(pi.VLCap, SMMaxOpVLs)
	if r := n.Ports[p].Remote; r != nil && r.Ports[n.Ports[p].RemotePort].Known {
		rpi := r.Ports[n.Ports[p].RemotePort].Info
		mtu, vls = min(mtu, rpi.MTUCap), min(vls, rpi.VLCap)
	}
	return mtu, vls
}

// route is step 7 (osm_ucast_mgr_process with the default min-hop engine):
// per switch, each LID goes out the lowest-numbered port on a shortest
// path; the switch's own LID goes to port 0.
func (sm *SM) route() error {
	maxLID := uint16(0)
	for _, n := range sm.Nodes {
		maxLID = max(maxLID, n.LID)
	}
	for _, sw := range sm.Switches() {
		sw.LFT = make([]uint8, proto.LFTEntriesPerBlock*(int(maxLID)/proto.LFTEntriesPerBlock+1))
		for i := range sw.LFT {
			sw.LFT[i] = proto.LFTPortDrop
		}
		for _, dst := range sm.Nodes {
			if dst.LID == 0 {
				continue
			}
			if dst == sw {
				sw.LFT[dst.LID] = 0
				continue
			}
			dist := sm.distances(dst)
			best, bestPort := -1, proto.LFTPortDrop
			for p := 1; p < len(sw.Ports); p++ {
				r := sw.Ports[p].Remote
				if r == nil {
					continue
				}
				if d, ok := dist[r]; ok && (best < 0 || d < best) {
					best, bestPort = d, p
				}
			}
			sw.LFT[dst.LID] = uint8(bestPort)
		}
	}
	// Top of the tables first (ucast_mgr_set_fwd_top), then the blocks
	// (ucast_mgr_pipeline_fwd_tbl).
	for _, sw := range sm.Switches() {
		si := sw.SwitchInfo
		si.LinearFDBTop = maxLID
		si.LifeTimeValue = SMPacketLifeTime
		if si == sw.SwitchInfo {
			continue
		}
		d, err := sm.set(sw.Path, proto.SMPAttrSwitchInfo, 0, encodeSwitchInfo(&si))
		if err != nil {
			return err
		}
		sw.SwitchInfo = proto.SwitchInfo(d[:proto.SwitchInfoSize]).Fields()
	}
	for b := 0; b*proto.LFTEntriesPerBlock <= int(maxLID); b++ {
		for _, sw := range sm.Switches() {
			blk := sw.LFT[b*proto.LFTEntriesPerBlock : (b+1)*proto.LFTEntriesPerBlock]
			if _, err := sm.set(sw.Path, proto.SMPAttrLinearForwardingTable, uint32(b), blk); err != nil {
				return err
			}
		}
	}
	return nil
}

// distances returns the hop count from every node to dst through
// switches (CAs do not forward).
func (sm *SM) distances(dst *SMNode) map[*SMNode]int {
	dist := map[*SMNode]int{dst: 0}
	queue := []*SMNode{dst}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if n != dst && !n.IsSwitch() {
			continue
		}
		for p := range n.Ports {
			r := n.Ports[p].Remote
			if r == nil {
				continue
			}
			if _, seen := dist[r]; !seen {
				dist[r] = dist[n] + 1
				queue = append(queue, r)
			}
		}
	}
	return dist
}

// linkPass is steps 9 and 10 (osm_link_mgr_process): every port that is
// not Down and (unless state is NoChange) below the target state gets a
// PortInfo Set with that state; the modifier carries
// SMSupportsExtendedSpeeds (bit 31) when the port's CapabilityMask (port
// 0's for a switch) has IsExtendedSpeedsSupported. Switch port 0 is
// skipped: the base port 0 is always Active and needs no link settings.
// The NoChange pass also writes the link parameters of switch ports:
// NeighborMTU, OperationalVLs, HOQLife (leaf or not) and VLStallCount.
func (sm *SM) linkPass(state uint8) error {
	for _, n := range sm.Nodes {
		for p := range n.Ports {
			if p == 0 || !n.Ports[p].Known {
				continue
			}
			pi := n.Ports[p].Info
			cur := pi.PortState
			if cur == proto.PortStateDown || (state != proto.PortStateNoChange && cur >= state) {
				continue
			}
			capMask := pi.CapabilityMask
			if n.IsSwitch() {
				capMask = n.Ports[0].Info.CapabilityMask
			}
			am := proto.PortInfoAttrMod(uint8(p), capMask&proto.PortCapIsExtendedSpeedsSupported != 0)
			pi.PortState, pi.PortPhysicalState, pi.LinkDownDefaultState = state, 0, proto.PortPhysStatePolling
			if state == proto.PortStateNoChange {
				pi.NeighborMTU, pi.OperationalVLs = sm.linkParams(n, p)
				if n.IsSwitch() {
					pi.HOQLife, pi.VLStallCount = SMHOQLife, 7
					if r := n.Ports[p].Remote; r != nil && !r.IsSwitch() {
						pi.HOQLife = SMHOQLifeLeaf
					}
				}
			}
			if err := sm.setPort(n, p, am, &pi); err != nil {
				return err
			}
			if state != proto.PortStateNoChange && n.Ports[p].Info.PortState != state {
				return fmt.Errorf("node %#x port %d in state %d after Set %d", n.Info.NodeGUID, p, n.Ports[p].Info.PortState, state)
			}
		}
	}
	return nil
}

func encodeSwitchInfo(f *proto.SwitchInfoFields) []byte {
	d := make([]byte, proto.SMPDataSize)
	proto.SwitchInfo(d[:proto.SwitchInfoSize]).Encode(f)
	return d
}

func pathString(path []byte) string {
	s := "0"
	for _, p := range path {
		s += fmt.Sprintf(",%d", p)
	}
	return s
}

func methodName(m uint8) string {
	switch m {
	case proto.MADMethodGet:
		return "Get"
	case proto.MADMethodSet:
		return "Set"
	}
	return fmt.Sprintf("method %#x", m)
}

func attrName(a uint16) string {
	switch a {
	case proto.SMPAttrNodeInfo:
		return "NodeInfo"
	case proto.SMPAttrNodeDescription:
		return "NodeDescription"
	case proto.SMPAttrSwitchInfo:
		return "SwitchInfo"
	case proto.SMPAttrPortInfo:
		return "PortInfo"
	case proto.SMPAttrPKeyTable:
		return "P_KeyTable"
	case proto.SMPAttrLinearForwardingTable:
		return "LinearForwardingTable"
	case proto.SMPAttrMulticastForwardingTable:
		return "MulticastForwardingTable"
	case proto.SMPAttrGUIDInfo:
		return "GUIDInfo"
	}
	return fmt.Sprintf("attribute %#x", a)
}
