package ibsm

import (
	"fmt"

	"github.com/PacketFive/hinic/internal/proto"
)

// Multicast programs a multicast group into every switch's
// MulticastForwardingTable: a packet to mlid reaches every CA in members
// over a tree of min-hop paths between their switches. It is what an SA
// does when ports join an MCMemberRecord; this SM has no SA, so the
// caller names the members (CA nodes as discovered). The group's other
// MFT entries are kept (each block is read, changed and written back).
func (sm *SM) Multicast(mlid uint16, members []*SMNode) error {
	block, entry, ok := proto.MFTMLIDBlock(mlid)
	if !ok || mlid == proto.LIDPermissive {
		return fmt.Errorf("ibsm: %#x is not a multicast LID", mlid)
	}
	ports := map[*SMNode]map[int]bool{}
	add := func(n *SMNode, p int) {
		if ports[n] == nil {
			ports[n] = map[int]bool{}
		}
		ports[n][p] = true
	}
	var root *SMNode
	for _, m := range members {
		if m.IsSwitch() {
			return fmt.Errorf("ibsm: multicast member %#x is a switch", m.Info.NodeGUID)
		}
		p := int(m.Info.LocalPortNum)
		if p >= len(m.Ports) || m.Ports[p].Remote == nil || !m.Ports[p].Remote.IsSwitch() {
			return fmt.Errorf("ibsm: multicast member %#x is not cabled to a switch", m.Info.NodeGUID)
		}
		sw, sp := m.Ports[p].Remote, m.Ports[p].RemotePort
		add(sw, sp)
		if root == nil {
			root = sw
		}
		// Join the member's switch to the tree: along the min-hop path
		// towards the root, both ends of every hop.
		for sw != root {
			dist := sm.distances(root)
			best, bp := -1, 0
			for q := 1; q < len(sw.Ports); q++ {
				r := sw.Ports[q].Remote
				if r == nil || !r.IsSwitch() {
					continue
				}
				if d, ok := dist[r]; ok && (best < 0 || d < best) {
					best, bp = d, q
				}
			}
			if best < 0 {
				return fmt.Errorf("ibsm: switch %#x has no path to switch %#x", sw.Info.NodeGUID, root.Info.NodeGUID)
			}
			next, np := sw.Ports[bp].Remote, sw.Ports[bp].RemotePort
			add(sw, bp)
			add(next, np)
			sw = next
		}
	}
	for _, sw := range sm.Switches() {
		set := ports[sw]
		positions := (len(sw.Ports)-1)/proto.MFTPortsPerPosition + 1
		for pos := range positions {
			am := proto.MFTAttrMod(uint8(pos), block)
			d, err := sm.get(sw.Path, proto.SMPAttrMulticastForwardingTable, am)
			if err != nil {
				return err
			}
			f := proto.MulticastForwardingTable(d).Fields()
			var mask uint16
			for j := range proto.MFTPortsPerPosition {
				if set[pos*proto.MFTPortsPerPosition+j] {
					mask |= 1 << j
				}
			}
			f.PortMasks[entry] = mask
			b := make([]byte, proto.SMPDataSize)
			proto.MulticastForwardingTable(b).Encode(&f)
			if _, err := sm.set(sw.Path, proto.SMPAttrMulticastForwardingTable, am, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// NodeByPortGUID returns the discovered CA whose port has the given GUID.
func (sm *SM) NodeByPortGUID(guid uint64) *SMNode {
	for _, n := range sm.Nodes {
		if !n.IsSwitch() && n.Info.PortGUID == guid {
			return n
		}
	}
	return nil
}
