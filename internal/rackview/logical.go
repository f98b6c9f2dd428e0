package rackview

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Graph is the logical view: guests, their NICs and GPUs, the switches
// and the links between them, without the rack's geometry.
type Graph struct {
	Nodes []Node `json:"nodes"`
	Edges []Edge `json:"edges"`
}

// Node kinds of the logical view.
const (
	NodeSwitch Kind = "switch"
	NodeHiLink Kind = "hilink"
	NodeNIC    Kind = "nic"
	NodeGuest  Kind = "guest"
	NodeGPU    Kind = "gpu"
)

// Node is one vertex of the logical view.
type Node struct {
	ID    string `json:"id"` // "sw:sw0", "nic:vm-a", "guest:vm-a", "gpu:vm-a:1", "hilink:sw0"
	Kind  Kind   `json:"kind"`
	Label string `json:"label"`
	Rack  int    `json:"rack"`
	State State  `json:"state"`
}

// Edge is one link of the logical view.
type Edge struct {
	A     string `json:"a"`
	B     string `json:"b"`
	Kind  Kind   `json:"kind"` // roce, ib, hilink, inter-tor, or "pci" between a guest and its devices
	Label string `json:"label,omitempty"`
}

// KindPCI is an edge between a guest and one of its PCI functions.
const KindPCI Kind = "pci"

// Logical returns the logical view of m, in spec order.
func (m *Model) Logical() Graph {
	var g Graph
	for ri, rk := range m.Racks {
		tor := &rk.Units[0]
		swID := "sw:" + rk.Switch
		g.Nodes = append(g.Nodes, Node{ID: swID, Kind: NodeSwitch, Label: rk.Switch + " (HiSwitch, " + rk.Link + ")", Rack: ri, State: tor.LED})
		var hlID string
		for _, u := range rk.Units {
			if u.Kind == KindHiLink {
				hlID = "hilink:" + rk.Switch
				g.Nodes = append(g.Nodes, Node{ID: hlID, Kind: NodeHiLink, Label: u.Name + " (HiLink)", Rack: ri, State: u.LED})
			}
		}
		for _, u := range rk.Units {
			if u.Kind != KindBlade {
				continue
			}
			gid, nid := "guest:"+u.Name, "nic:"+u.Name
			nic := u.Ports[0]
			g.Nodes = append(g.Nodes, Node{ID: gid, Kind: NodeGuest, Label: u.Name, Rack: ri, State: u.LED},
				Node{ID: nid, Kind: NodeNIC, Label: nicLabel(u), Rack: ri, State: nic.LED})
			g.Edges = append(g.Edges, Edge{A: gid, B: nid, Kind: KindPCI},
				Edge{A: nid, B: swID, Kind: nic.Kind, Label: "port " + strings.TrimPrefix(nic.Peer, rk.Switch+":")})
			for _, p := range u.Ports[1:] {
				pid := fmt.Sprintf("gpu:%s:%d", u.Name, p.Num)
				g.Nodes = append(g.Nodes, Node{ID: pid, Kind: NodeGPU, Label: fmt.Sprintf("%s gpu%d", u.Name, p.Num), Rack: ri, State: p.LED})
				g.Edges = append(g.Edges, Edge{A: gid, B: pid, Kind: KindPCI})
				if hlID != "" {
					_, port, _ := strings.Cut(p.Peer, ":")
					g.Edges = append(g.Edges, Edge{A: pid, B: hlID, Kind: PortHiLink, Label: "lane " + port})
				}
			}
		}
	}
	for _, c := range m.InterTOR {
		a, b := m.Racks[c.A.Rack], m.Racks[c.B.Rack]
		pa, pb := a.Units[c.A.Unit].Ports[c.A.Port], b.Units[c.B.Unit].Ports[c.B.Port]
		g.Edges = append(g.Edges, Edge{A: "sw:" + a.Switch, B: "sw:" + b.Switch, Kind: CableInterTOR,
			Label: fmt.Sprintf("%s:%d - %s:%d", a.Switch, pa.Num, b.Switch, pb.Num)})
	}
	return g
}

// nicLabel names a blade's NIC: "hicain 10.43.0.1".
func nicLabel(u Unit) string {
	if l := u.Ports[0].Label; l != "" {
		return l
	}
	return u.Name + " NIC"
}

// mermaidID makes a node id Mermaid accepts.
func mermaidID(id string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, id)
}

// Mermaid writes the logical view as a Mermaid flowchart: one subgraph
// per rack, the inter-TOR links between them.
func Mermaid(w io.Writer, m *Model) error {
	g := m.Logical()
	var b strings.Builder
	b.WriteString("flowchart TB\n")
	shape := map[Kind][2]string{NodeSwitch: {"[[", "]]"}, NodeHiLink: {"[[", "]]"}, NodeNIC: {"([", "])"},
		NodeGuest: {"[", "]"}, NodeGPU: {"{{", "}}"}}
	for ri, rk := range m.Racks {
		fmt.Fprintf(&b, "  subgraph rack%d[\"rack %s\"]\n", ri, strings.ReplaceAll(rk.Name, `"`, "'"))
		for _, n := range g.Nodes {
			if n.Rack == ri {
				s := shape[n.Kind]
				fmt.Fprintf(&b, "    %s%s\"%s\"%s\n", mermaidID(n.ID), s[0], strings.ReplaceAll(n.Label, `"`, "'"), s[1])
			}
		}
		b.WriteString("  end\n")
	}
	for _, e := range g.Edges {
		arrow := "---"
		if e.Kind == CableInterTOR {
			arrow = "==="
		}
		if e.Label != "" {
			fmt.Fprintf(&b, "  %s %s|\"%s\"| %s\n", mermaidID(e.A), arrow, e.Label, mermaidID(e.B))
		} else {
			fmt.Fprintf(&b, "  %s %s %s\n", mermaidID(e.A), arrow, mermaidID(e.B))
		}
	}
	b.WriteString("  classDef active stroke:#30d158,stroke-width:3px\n  classDef fault stroke:#ff453a,stroke-width:3px\n")
	for _, st := range []State{Active, Fault} {
		var ids []string
		for _, n := range g.Nodes {
			if n.State == st {
				ids = append(ids, mermaidID(n.ID))
			}
		}
		if len(ids) > 0 {
			fmt.Fprintf(&b, "  class %s %s\n", strings.Join(ids, ","), st)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// dotQuote quotes a string for Graphviz.
func dotQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

// Dot writes the logical view as a Graphviz graph: one cluster per rack.
func Dot(w io.Writer, m *Model) error {
	g := m.Logical()
	var b strings.Builder
	fmt.Fprintf(&b, "graph %s {\n  rankdir=TB;\n  node [fontname=\"DejaVu Sans\", style=filled, fillcolor=\"#f4f5f7\"];\n", dotQuote(m.Name))
	shape := map[Kind]string{NodeSwitch: "box3d", NodeHiLink: "box3d", NodeNIC: "ellipse", NodeGuest: "box", NodeGPU: "hexagon"}
	colour := map[Kind]string{PortRoCE: colBlue, PortIB: colBlue, PortHiLink: colPink, CableInterTOR: colYellow, KindPCI: "#636366"}
	for ri, rk := range m.Racks {
		fmt.Fprintf(&b, "  subgraph cluster_%d {\n    label=%s;\n", ri, dotQuote("rack "+rk.Name))
		for _, n := range g.Nodes {
			if n.Rack == ri {
				fmt.Fprintf(&b, "    %s [label=%s, shape=%s, color=%s];\n", dotQuote(n.ID), dotQuote(n.Label), shape[n.Kind], dotQuote(ledColour[n.State]))
			}
		}
		b.WriteString("  }\n")
	}
	for _, e := range g.Edges {
		attrs := "color=" + dotQuote(colour[e.Kind])
		if e.Kind == CableInterTOR {
			attrs += ", penwidth=3"
		}
		if e.Label != "" {
			attrs += ", label=" + dotQuote(e.Label)
		}
		fmt.Fprintf(&b, "  %s -- %s [%s];\n", dotQuote(e.A), dotQuote(e.B), attrs)
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// Logical SVG layout, in the same millimetre units as the front view.
const (
	lgColMM   = 250 // one guest's column
	lgRowMM   = 130 // between rows
	lgBoxW    = 210
	lgBoxH    = 56
	lgMarginX = 60
	lgTop     = 110
)

// LogicalSVG writes the logical view: per rack, the switch on top, then
// the NICs, the guests, their GPUs and the HiLink switch.
func LogicalSVG(out io.Writer, m *Model) error {
	g := m.Logical()
	// Columns: each rack is as wide as its guests (at least one).
	pos := map[string]pt{}
	row := map[Kind]int{NodeSwitch: 0, NodeNIC: 1, NodeGuest: 2, NodeGPU: 3, NodeHiLink: 4}
	x := float64(lgMarginX)
	var rackBoxes [][4]float64
	hasGPU := false
	for ri := range m.Racks {
		var guests []Node
		var nGPU int
		for _, n := range g.Nodes {
			if n.Rack == ri && n.Kind == NodeGuest {
				guests = append(guests, n)
			}
			if n.Rack == ri && n.Kind == NodeGPU {
				nGPU++
			}
		}
		cols := max(len(guests), 1, (nGPU+1)/2)
		w := float64(cols) * lgColMM
		rackBoxes = append(rackBoxes, [4]float64{x - 20, lgTop - 50, w + 40, 0})
		gpuCol := 0
		for _, n := range g.Nodes {
			if n.Rack != ri {
				continue
			}
			switch n.Kind {
			case NodeSwitch, NodeHiLink:
				pos[n.ID] = pt{x + w/2, lgTop + float64(row[n.Kind])*lgRowMM}
			case NodeGPU:
				hasGPU = true
				pos[n.ID] = pt{x + lgColMM/2 + float64(gpuCol)*lgColMM/2 - lgColMM/4 + 0, lgTop + 3*lgRowMM}
				gpuCol++
			}
		}
		for i, n := range guests {
			cx := x + lgColMM/2 + float64(i)*lgColMM
			pos[n.ID] = pt{cx, lgTop + 2*lgRowMM}
			pos["nic:"+strings.TrimPrefix(n.ID, "guest:")] = pt{cx, lgTop + lgRowMM}
		}
		// GPUs under their guest: spread them around its column.
		for _, n := range guests {
			var gpus []string
			for _, e := range g.Edges {
				if e.A == n.ID && strings.HasPrefix(e.B, "gpu:") {
					gpus = append(gpus, e.B)
				}
			}
			c := pos[n.ID]
			for k, id := range gpus {
				off := (float64(k) - float64(len(gpus)-1)/2) * (lgBoxW * 0.55)
				pos[id] = pt{c.x + off, lgTop + 3*lgRowMM + float64(k%2)*0}
			}
		}
		x += w + 120
	}
	rows := 3
	if hasGPU {
		rows = 5
	}
	h := lgTop + float64(rows-1)*lgRowMM + lgBoxH + 140
	width := x - 120 + lgMarginX
	for i := range rackBoxes {
		rackBoxes[i][3] = float64(rows-1)*lgRowMM + lgBoxH + 80
	}
	var b strings.Builder
	svgOpen(&b, width, h, fmt.Sprintf("Rack %s, logical view", m.Name), ".n { font-size: 15px; fill: "+colInk+"; }\n.e { font-size: 13px; fill: #48484a; }\n")
	for ri, rb := range rackBoxes {
		fmt.Fprintf(&b, `<rect x="%s" y="%s" width="%s" height="%s" rx="14" fill="none" stroke="#c7c7cc" stroke-width="2" stroke-dasharray="10 6"/>`+"\n",
			num(rb[0]), num(rb[1]), num(rb[2]), num(rb[3]))
		fmt.Fprintf(&b, `<text class="t" x="%s" y="%s" font-size="20px">%s</text>`+"\n", num(rb[0]+12), num(rb[1]-10), esc("rack "+m.Racks[ri].Name))
	}
	edgeColour := map[Kind]string{PortRoCE: colBlue, PortIB: colBlue, PortHiLink: colPink, CableInterTOR: "#e0b800", KindPCI: "#8e8e93"}
	for _, e := range g.Edges {
		a, c := pos[e.A], pos[e.B]
		sw := "3"
		if e.Kind == CableInterTOR {
			sw = "7"
		}
		fmt.Fprintf(&b, `<path class="edge %s" d="M%s %s L%s %s" stroke="%s" stroke-width="%s"/>`+"\n", e.Kind, num(a.x), num(a.y), num(c.x), num(c.y), edgeColour[e.Kind], sw)
		if e.Label != "" {
			mx, my := (a.x+c.x)/2, (a.y+c.y)/2
			fmt.Fprintf(&b, `<text class="e" x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", num(mx+6), num(my-8), esc(e.Label))
		}
	}
	fill := map[Kind]string{NodeSwitch: "#d6e4f5", NodeHiLink: "#f8d7ea", NodeNIC: "#dbeafe", NodeGuest: "#ffffff", NodeGPU: "#fde2f0"}
	for _, n := range g.Nodes {
		p := pos[n.ID]
		bw := float64(lgBoxW)
		if n.Kind == NodeGPU {
			bw = lgBoxW * 0.5
		}
		fmt.Fprintf(&b, `<g class="node %s" id="node-%s">`, n.Kind, idSafe(n.ID))
		fmt.Fprintf(&b, `<rect x="%s" y="%s" width="%s" height="%s" rx="10" fill="%s" stroke="%s" stroke-width="3"/>`,
			num(p.x-bw/2), num(p.y-lgBoxH/2), num(bw), num(lgBoxH), fill[n.Kind], ledColour[n.State])
		label := n.Label
		if n.Kind == NodeGPU {
			label = label[strings.LastIndexByte(label, ' ')+1:]
		}
		fmt.Fprintf(&b, `<text class="n" x="%s" y="%s" text-anchor="middle">%s</text></g>`+"\n", num(p.x), num(p.y+5), esc(label))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(out, b.String())
	return err
}

// document is the JSON output: the model, with the logical view's graph
// when that is the view.
type document struct {
	View string `json:"view"`
	*Model
	Logical *Graph `json:"logical,omitempty"`
}

// JSON writes the model of view (front, logical, flows) as indented
// JSON; the logical view adds its graph.
func JSON(w io.Writer, m *Model, view string) error {
	d := document{View: view, Model: m}
	if view == "logical" {
		g := m.Logical()
		d.Logical = &g
	}
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(d)
}
