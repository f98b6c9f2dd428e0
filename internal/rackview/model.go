// Package rackview draws racks: one drawing model of an OCP Open Rack v3
// (ORv3) rack, built from a rack spec or from a running rack's status,
// and its renderings (the front view and the logical view as SVG, the
// logical view as Mermaid and Graphviz dot, the front view as coloured
// terminal text, and the animated two-flow SVG).
//
// The geometry is the ORv3 one: 48 mm Open Units (OU) in a 21-inch bay.
// Each HiSwitch of a spec is the top-of-rack switch (TOR) of one rack,
// so a spec with two switches joined by links draws two racks side by
// side with the inter-TOR cables between them. From the top, a rack
// holds the 1OU TOR, a 1OU HiLink switch (when its guests have GPUs),
// the 1OU management host, eight 2OU blades (one guest each), 4OU of
// cable management and the 2OU power shelf: 25 OU (RackOU).
//
// Every output is deterministic (spec order, fixed number formats), so
// the drawings are golden-tested and the docs' pictures are checked to
// be current. rackview imports deploy (the spec and status types) and
// the fabric, device and gpu status types through it; it must not import
// the CLI.
package rackview

import (
	"fmt"
	"slices"
	"strings"

	"github.com/PacketFive/hinic/internal/deploy"
	"github.com/PacketFive/hinic/internal/fabric"
)

// ORv3 geometry, in millimetres.
const (
	OUmm   = 48    // one Open Unit
	BayMM  = 533.4 // the 21-inch equipment bay
	RackMM = 600   // the rack's outer width
	// RackOU is the height drawn, the sum of the units below. The
	// issue's layout says "24 OU in all", but its units add up to 25:
	// they are drawn as listed.
	RackOU     = torOU + hilinkOU + mgmtOU + BladeSlots*bladeOU + cableOU + powerOU
	BladeSlots = 8 // 2OU VM blades per rack
)

// Heights of the units, in OU, top to bottom.
const (
	torOU    = 1
	hilinkOU = 1
	mgmtOU   = 1
	bladeOU  = 2
	cableOU  = 4
	powerOU  = 2
)

// State is what an LED shows.
type State string

// LED states: green, grey, red, and dark for an empty port.
const (
	Active State = "active"
	Idle   State = "idle"
	Fault  State = "fault"
	Off    State = "off"
)

// Kind names a unit or a port.
type Kind string

// Unit kinds, top to bottom.
const (
	KindTOR    Kind = "tor"
	KindHiLink Kind = "hilink"
	KindMgmt   Kind = "mgmt"
	KindBlade  Kind = "blade"
	KindEmpty  Kind = "empty" // a blade slot without a guest
	KindCable  Kind = "cable-management"
	KindPower  Kind = "power"
)

// Port and cable kinds: the link a port carries.
const (
	PortRoCE      Kind = "roce"      // Ethernet: RoCEv2 (blue)
	PortIB        Kind = "ib"        // native InfiniBand (blue)
	PortHiLink    Kind = "hilink"    // a GPU's HiLink lane (pink)
	CableInterTOR Kind = "inter-tor" // a switch-to-switch cable (yellow)
)

// Model is one drawing: the racks of a spec, left to right, and the
// cables between their TORs. It is plain data, safe to share once built.
type Model struct {
	Name string `json:"name"`
	// Source is "spec" (nothing runs: guests idle) or "status" (a
	// running rack's state and counters).
	Source   string  `json:"source"`
	Racks    []Rack  `json:"racks"`
	InterTOR []Cable `json:"inter_tor,omitempty"`
}

// Rack is one ORv3 rack: its units top to bottom and its cables.
type Rack struct {
	Name   string `json:"name"`
	Switch string `json:"switch"`
	Link   string `json:"link"` // eth or ib
	Units  []Unit `json:"units"`
	// Cables join a blade's port (its NIC or a GPU) to the TOR or the
	// HiLink switch of the same rack.
	Cables []Cable `json:"cables"`
	// Overflow counts the guests of the switch beyond BladeSlots, not
	// drawn.
	Overflow int `json:"overflow,omitempty"`
}

// Unit is one piece of equipment, or an empty slot.
type Unit struct {
	Kind   Kind   `json:"kind"`
	Top    int    `json:"top_ou"` // first OU from the top, 0-based
	Height int    `json:"height_ou"`
	Name   string `json:"name,omitempty"`
	Slot   int    `json:"slot,omitempty"` // a blade slot's number, 1 to BladeSlots, top down
	LED    State  `json:"led"`
	// Lines are the unit's labels after its name, short enough for a
	// terminal line.
	Lines []string `json:"lines,omitempty"`
	// Ports are a switch's ports, or a blade's NIC then its GPUs.
	Ports []Port `json:"ports,omitempty"`
}

// Port is a switch port or a blade's connector.
type Port struct {
	Num  int    `json:"num"` // switch port number, or GPU id on a blade; the NIC is 0
	Kind Kind   `json:"kind"`
	LED  State  `json:"led"`
	Peer string `json:"peer,omitempty"` // what the cable reaches: "vm-a", "sw1:10", "vm-a gpu1"
	// Label names a blade's NIC: "hicain 10.43.0.1".
	Label string `json:"label,omitempty"`
	// Counters of a switch port of a running fabric.
	RxFrames uint64 `json:"rx_frames,omitempty"`
	TxFrames uint64 `json:"tx_frames,omitempty"`
	RxBytes  uint64 `json:"rx_bytes,omitempty"`
	TxBytes  uint64 `json:"tx_bytes,omitempty"`
}

// End is one end of a cable: a port of a unit of a rack, by index.
type End struct {
	Rack int `json:"rack"`
	Unit int `json:"unit"`
	Port int `json:"port"`
}

// Cable joins two ports.
type Cable struct {
	Kind Kind `json:"kind"`
	A    End  `json:"a"`
	B    End  `json:"b"`
}

// PortID is a stable name of a port for the live page and the SVG's element
// ids: "sw0-3" (switch port), "vm-a-nic", "vm-a-gpu1", "hl-sw0-2".
func (m *Model) PortID(e End) string {
	u := &m.Racks[e.Rack].Units[e.Unit]
	p := u.Ports[e.Port]
	switch u.Kind {
	case KindTOR:
		return SwitchPortID(u.Name, p.Num)
	case KindHiLink:
		return fmt.Sprintf("hl-%s-%d", m.Racks[e.Rack].Switch, p.Num)
	}
	if p.Kind == PortHiLink {
		return fmt.Sprintf("%s-gpu%d", u.Name, p.Num)
	}
	return u.Name + "-nic"
}

// ElementID makes a name usable in an SVG element id: "led-" +
// ElementID(switch) + "-0" is a TOR's LED.
func ElementID(name string) string { return idSafe(name) }

// SwitchPortID is the PortID of port n of switch sw, as an element id:
// the live page finds a port's LED, cable and rate by it.
func SwitchPortID(sw string, n int) string {
	return idSafe(fmt.Sprintf("%s-%d", sw, n))
}

// FromSpec draws a rack spec (completed by Defaults): nothing runs, so
// guests and ports are idle, the management host and power shelf on.
func FromSpec(r *deploy.Rack) *Model {
	return build(r, nil)
}

// FromStatus draws a deployed rack: r is its spec (deploy.State.Rack),
// rs what deploy.Status read.
func FromStatus(r *deploy.Rack, rs *deploy.RackStatus) *Model {
	return build(r, rs)
}

func build(r *deploy.Rack, rs *deploy.RackStatus) *Model {
	m := &Model{Name: r.Name, Source: "spec"}
	if rs != nil {
		m.Source = "status"
	}
	rackOf := map[string]int{}
	for i, sw := range r.Switches {
		rackOf[sw.Name] = i
		name := r.Name
		if len(r.Switches) > 1 {
			name = r.Name + " " + sw.Name
		}
		m.Racks = append(m.Racks, buildRack(r, rs, sw, name, i))
	}
	for _, l := range r.Links {
		a, okA := linkEnd(m, rackOf, l.A)
		b, okB := linkEnd(m, rackOf, l.B)
		if !okA || !okB {
			continue
		}
		m.InterTOR = append(m.InterTOR, Cable{Kind: CableInterTOR, A: a, B: b})
		for _, e := range []struct {
			end  End
			peer string
		}{{a, l.B}, {b, l.A}} {
			p := &m.Racks[e.end.Rack].Units[e.end.Unit].Ports[e.end.Port]
			p.Peer = e.peer
			if p.LED == Off {
				p.LED = Idle
			}
		}
	}
	return m
}

// linkEnd finds the TOR port of a link end "sw0:10".
func linkEnd(m *Model, rackOf map[string]int, end string) (End, bool) {
	sw, port, _ := strings.Cut(end, ":")
	ri, ok := rackOf[sw]
	if !ok {
		return End{}, false
	}
	var n int
	if _, err := fmt.Sscan(port, &n); err != nil {
		return End{}, false
	}
	for pi, p := range m.Racks[ri].Units[0].Ports {
		if p.Num == n {
			return End{Rack: ri, Unit: 0, Port: pi}, true
		}
	}
	return End{}, false
}

// ledOf maps a process's state ("running", "stopped") to an LED.
func ledOf(state string) State {
	switch state {
	case "running", "live", "up", "ACTIVE":
		return Active
	case "crashed", "unreachable", "fatal":
		return Fault
	}
	return Idle
}

func buildRack(r *deploy.Rack, rs *deploy.RackStatus, sw deploy.Switch, name string, ri int) Rack {
	link := r.SwitchLink(sw.Name)
	rk := Rack{Name: name, Switch: sw.Name, Link: link}
	portKind := PortRoCE
	if link == deploy.LinkIB {
		portKind = PortIB
	}
	var guests []deploy.Guest
	for _, g := range r.Guests {
		if g.Switch == sw.Name {
			guests = append(guests, g)
		}
	}
	if len(guests) > BladeSlots {
		rk.Overflow = len(guests) - BladeSlots
		guests = guests[:BladeSlots]
	}
	top := 0
	add := func(u Unit) int {
		u.Top = top
		top += u.Height
		rk.Units = append(rk.Units, u)
		return len(rk.Units) - 1
	}

	// The TOR: its ports and their state.
	var swst *fabric.SwitchStatus
	if rs != nil && rs.Switches != nil {
		for i := range rs.Switches.Switches {
			if rs.Switches.Switches[i].Name == sw.Name {
				swst = &rs.Switches.Switches[i]
			}
		}
	}
	tor := Unit{Kind: KindTOR, Height: torOU, Name: sw.Name, LED: Idle,
		Lines: []string{fmt.Sprintf("HiSwitch, %s", linkName(link))}}
	if rs != nil {
		tor.LED = ledOf(rs.Fabric)
		if rs.Fabric != "running" {
			tor.Lines = append(tor.Lines, "fabric "+rs.Fabric)
		}
	}
	for n := 1; n <= sw.Ports; n++ {
		p := Port{Num: n, Kind: portKind, LED: Off}
		if swst != nil {
			for _, ps := range swst.Ports {
				if ps.Num != n {
					continue
				}
				p.RxFrames, p.TxFrames, p.RxBytes, p.TxBytes = ps.RxFrames, ps.TxFrames, ps.RxBytes, ps.TxBytes
				if ps.State == "up" {
					p.LED = Active
				}
			}
		}
		tor.Ports = append(tor.Ports, p)
	}
	torIdx := add(tor)

	// The HiLink switch (the spec's switches[].hilink): its ports
	// 0..N-1, the GPUs of the rack's guests cabled to theirs.
	hlIdx := -1
	ngpu := 0
	for _, g := range guests {
		if onHiLink(sw, g) {
			ngpu += len(g.GPUs.IDs)
		}
	}
	if ngpu > 0 {
		hl := Unit{Kind: KindHiLink, Height: hilinkOU, Name: sw.HiLink.Name, LED: Idle,
			Lines: []string{fmt.Sprintf("HiLink, %d GPU lanes", ngpu)}}
		if rs != nil {
			hl.LED = ledOf(rs.GPU)
			for _, h := range rs.HiLink {
				if h.Name == sw.HiLink.Name && h.State != "running" {
					hl.LED = ledOf(h.State)
				}
			}
		}
		for n := range max(sw.HiLink.Ports, 1) {
			hl.Ports = append(hl.Ports, Port{Num: n, Kind: PortHiLink, LED: Off})
		}
		hlIdx = add(hl)
	} else {
		// A blanking panel keeps every rack RackOU high, its units in
		// line with the other racks'.
		add(Unit{Kind: KindEmpty, Height: hilinkOU, LED: Off})
	}

	// The management host: this machine, running hinic and the SSH
	// forwards; the backends' state when the rack runs.
	mg := Unit{Kind: KindMgmt, Height: mgmtOU, Name: "mgmt", LED: Active, Lines: []string{"this host: hinic, SSH fwd"}}
	if rs != nil {
		if rs.Device != "" {
			mg.Lines = append(mg.Lines, fmt.Sprintf("device backend %s, %d vNIC(s)", rs.Device, len(rs.VNICs)))
		}
		if rs.GPU != "" {
			mg.Lines = append(mg.Lines, fmt.Sprintf("GPU backend %s, %d GPU(s)", rs.GPU, len(rs.GPUs)))
		}
	}
	add(mg)

	// The blades.
	for slot := 0; slot < BladeSlots; slot++ {
		if slot >= len(guests) {
			add(Unit{Kind: KindEmpty, Height: bladeOU, Slot: slot + 1, LED: Off})
			continue
		}
		g := guests[slot]
		gs := guestStatus(rs, g.Name)
		b := Unit{Kind: KindBlade, Height: bladeOU, Name: g.Name, Slot: slot + 1, LED: Idle}
		nic := g.NIC
		if g.Link == deploy.LinkIB {
			nic += "/ib"
		}
		line := fmt.Sprintf("%s %s", nic, g.IP)
		nicLED := Idle
		if gs != nil {
			b.LED = ledOf(gs.State)
			line = strings.Join(strings.Fields(gs.State+" "+gs.RDMADev+" "+portLabel(gs)), " ")
			nicLED = ledOf(gs.PortState)
			if gs.State != "running" {
				nicLED = b.LED
				if nicLED == Active {
					nicLED = Idle
				}
			}
		}
		b.Lines = append(b.Lines, line)
		if gs != nil {
			b.Lines = append(b.Lines, fmt.Sprintf("%s  ssh %s", gs.DataIP, gs.SSH))
		}
		b.Ports = append(b.Ports, Port{Num: 0, Kind: portKind, LED: nicLED, Peer: fmt.Sprintf("%s:%d", sw.Name, g.Port),
			Label: nic + " " + g.IP})
		var gpuParts []string
		for k, id := range g.GPUs.IDs {
			led := Idle
			state := ""
			if rs != nil {
				for _, x := range rs.GPUs {
					if x.Guest == g.Name && x.ID == id {
						led, state = ledOf(x.State), x.State
					}
				}
				gpuParts = append(gpuParts, fmt.Sprintf("%d %s", id, state))
			} else {
				gpuParts = append(gpuParts, fmt.Sprintf("%d", id))
			}
			peer := "no HiLink port"
			if onHiLink(sw, g) {
				peer = fmt.Sprintf("%s:%d", sw.HiLink.Name, g.GPUs.HiLinkPorts[k])
			}
			b.Ports = append(b.Ports, Port{Num: id, Kind: PortHiLink, LED: led, Peer: peer})
		}
		if len(gpuParts) > 0 {
			b.Lines = append(b.Lines, "GPUs "+strings.Join(gpuParts, ", "))
		}
		bi := add(b)
		// Cables: the NIC to its TOR port, each GPU to its HiLink port.
		for pi, p := range rk.Units[torIdx].Ports {
			if p.Num == g.Port {
				rk.Units[torIdx].Ports[pi].Peer = g.Name
				if rk.Units[torIdx].Ports[pi].LED == Off {
					rk.Units[torIdx].Ports[pi].LED = Idle
				}
				rk.Cables = append(rk.Cables, Cable{Kind: portKind, A: End{ri, bi, 0}, B: End{ri, torIdx, pi}})
			}
		}
		for k := range g.GPUs.IDs {
			if !onHiLink(sw, g) {
				break
			}
			n := g.GPUs.HiLinkPorts[k]
			hp := &rk.Units[hlIdx].Ports[n]
			hp.Peer = fmt.Sprintf("%s gpu%d", g.Name, g.GPUs.IDs[k])
			hp.LED = rk.Units[bi].Ports[1+k].LED
			rk.Cables = append(rk.Cables, Cable{Kind: PortHiLink, A: End{ri, bi, 1 + k}, B: End{ri, hlIdx, n}})
		}
	}
	cm := Unit{Kind: KindCable, Height: cableOU, Name: "cable management", LED: Off}
	if rk.Overflow > 0 {
		cm.Lines = []string{fmt.Sprintf("%d more guest(s) on %s, not drawn", rk.Overflow, sw.Name)}
	}
	add(cm)
	add(Unit{Kind: KindPower, Height: powerOU, Name: "power shelf", LED: Active})
	return rk
}

// guestStatus finds a guest in a status; nil without one.
func guestStatus(rs *deploy.RackStatus, name string) *deploy.GuestStatus {
	if rs == nil {
		return nil
	}
	for i := range rs.Guests {
		if rs.Guests[i].Name == name {
			return &rs.Guests[i]
		}
	}
	return nil
}

// portLabel is a guest's RDMA port state, with the LID of an InfiniBand
// port.
func portLabel(g *deploy.GuestStatus) string {
	if g.LID != "" {
		return g.PortState + " LID " + g.LID
	}
	return g.PortState
}

func linkName(link string) string {
	if link == deploy.LinkIB {
		return "InfiniBand"
	}
	return "RoCEv2"
}

// onHiLink reports whether guest g's GPUs are cabled to the HiLink
// switch of sw's rack (as deploy's Defaults cables them: one port each).
func onHiLink(sw deploy.Switch, g deploy.Guest) bool {
	return g.GPUs.Count > 0 && g.GPUs.HiLink == sw.HiLink.Name && len(g.GPUs.HiLinkPorts) == len(g.GPUs.IDs) &&
		!slices.ContainsFunc(g.GPUs.HiLinkPorts, func(p int) bool { return p < 0 || p >= max(sw.HiLink.Ports, 1) })
}
