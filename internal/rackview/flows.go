package rackview

import (
	"fmt"
	"io"
	"strings"
)

// flow is one animated transfer of the flows view.
type flow struct {
	kind    Kind // roce, ib or hilink
	caption string
	path    []cubic
}

// flows picks the two transfers of the flows view: a SEND between two
// guests, across an inter-TOR cable when the racks have one (else
// within a rack), and a HiLink copy between two GPUs of one rack.
func (l *layout) flows() []flow {
	var out []flow
	if f, ok := l.sendFlow(); ok {
		out = append(out, f)
	}
	if f, ok := l.copyFlow(); ok {
		out = append(out, f)
	}
	return out
}

// nicCable finds the cable of a blade's NIC.
func (m *Model) nicCable(ri, ui int) (Cable, bool) {
	for _, c := range m.Racks[ri].Cables {
		if c.A.Unit == ui && c.A.Port == 0 {
			return c, true
		}
	}
	return Cable{}, false
}

// blades lists the blades of a rack that have a cabled NIC.
func (m *Model) blades(ri int) []int {
	var out []int
	for ui, u := range m.Racks[ri].Units {
		if u.Kind == KindBlade {
			if _, ok := m.nicCable(ri, ui); ok {
				out = append(out, ui)
			}
		}
	}
	return out
}

func (l *layout) sendFlow() (flow, bool) {
	m := l.m
	proto := func(ri int) (string, Kind) {
		if m.Racks[ri].Link == "ib" {
			return "InfiniBand SEND", PortIB
		}
		return "RoCEv2 SEND", PortRoCE
	}
	// Across racks: the first inter-TOR cable whose two racks have guests.
	for _, it := range m.InterTOR {
		ba, bb := m.blades(it.A.Rack), m.blades(it.B.Rack)
		if len(ba) == 0 || len(bb) == 0 {
			continue
		}
		ca, _ := m.nicCable(it.A.Rack, ba[0])
		cb, _ := m.nicCable(it.B.Rack, bb[0])
		path := l.route(ca)
		path = append(path, line(l.portBottom(ca.B), l.portBottom(it.A)), line(l.portBottom(it.A), l.portTop(it.A)))
		path = append(path, l.route(it)...)
		path = append(path, line(l.portTop(it.B), l.portBottom(it.B)), line(l.portBottom(it.B), l.portBottom(cb.B)))
		path = append(path, reverseRoute(l.route(cb))...)
		name, kind := proto(it.A.Rack)
		ga, gb := m.Racks[it.A.Rack].Units[ba[0]].Name, m.Racks[it.B.Rack].Units[bb[0]].Name
		return flow{kind: kind, path: path, caption: fmt.Sprintf("%s: %s -> %s -> inter-TOR cable -> %s -> %s",
			name, ga, m.Racks[it.A.Rack].Switch, m.Racks[it.B.Rack].Switch, gb)}, true
	}
	// Within a rack.
	for ri := range m.Racks {
		b := m.blades(ri)
		if len(b) < 2 {
			continue
		}
		ca, _ := m.nicCable(ri, b[0])
		cb, _ := m.nicCable(ri, b[1])
		path := append(l.route(ca), line(l.portBottom(ca.B), l.portBottom(cb.B)))
		path = append(path, reverseRoute(l.route(cb))...)
		name, kind := proto(ri)
		return flow{kind: kind, path: path, caption: fmt.Sprintf("%s: %s -> %s -> %s",
			name, m.Racks[ri].Units[b[0]].Name, m.Racks[ri].Switch, m.Racks[ri].Units[b[1]].Name)}, true
	}
	return flow{}, false
}

func (l *layout) copyFlow() (flow, bool) {
	m := l.m
	for _, rk := range m.Racks {
		var gpus []Cable
		for _, c := range rk.Cables {
			if c.Kind == PortHiLink {
				gpus = append(gpus, c)
			}
		}
		if len(gpus) < 2 {
			continue
		}
		a, b := gpus[0], gpus[1]
		path := append(l.route(a), line(l.portBottom(a.B), l.portBottom(b.B)))
		path = append(path, reverseRoute(l.route(b))...)
		ua, ub := rk.Units[a.A.Unit], rk.Units[b.A.Unit]
		return flow{kind: PortHiLink, path: path, caption: fmt.Sprintf("HiLink copy: %s gpu%d -> %s -> %s gpu%d, staying in the rack",
			ua.Name, ua.Ports[a.A.Port].Num, rk.Units[a.B.Unit].Name, ub.Name, ub.Ports[b.A.Port].Num)}, true
	}
	return flow{}, false
}

// flowCSS stops the packets, and shows them parked along their routes,
// for readers who ask for reduced motion.
const flowCSS = `.route { fill: none; stroke-width: 12; stroke-linecap: round; stroke-linejoin: round; opacity: 0.35; }
.still { display: none; }
@media (prefers-reduced-motion: reduce) {
  .pkt { display: none; }
  .still { display: inline; }
}
`

// flowSeconds is one packet's trip.
const flowSeconds = 4

// FlowsSVG writes the front view of m's racks with two animated
// transfers (SMIL animateMotion): a SEND between guests, crossing the
// inter-TOR cable when there is one, and a HiLink copy between two GPUs
// of one rack. Under prefers-reduced-motion the packets stand still.
func FlowsSVG(out io.Writer, m *Model) error {
	l := newLayout(m)
	fl := l.flows()
	l.h += float64(len(fl))*30 + 20
	var w strings.Builder
	svgOpen(&w, l.w, l.h, fmt.Sprintf("Rack %s: a SEND and a HiLink copy", m.Name), flowCSS)
	l.front(&w)
	var captions []string
	for i, f := range fl {
		col := colBlue
		if f.kind == PortHiLink {
			col = colPink
		}
		d := pathD(f.path...)
		fmt.Fprintf(&w, `<path id="flow-%d" class="route" stroke="%s" d="%s"/>`+"\n", i, col, d)
		for k := 0; k < 3; k++ {
			// Negative begins: every packet is on its way from the start.
			begin := fmt.Sprintf("%ss", num(-float64(k)*flowSeconds/3))
			fmt.Fprintf(&w, `<circle class="pkt" r="11" fill="%s" stroke="#fff" stroke-width="3"><animateMotion dur="%ds" begin="%s" repeatCount="indefinite" path="%s"/></circle>`+"\n",
				col, flowSeconds, begin, d)
		}
		// The parked packets: at the route's ends and middle.
		for _, p := range []pt{f.path[0].p0, f.path[len(f.path)/2].p0, f.path[len(f.path)-1].p3} {
			fmt.Fprintf(&w, `<circle class="still" cx="%s" cy="%s" r="11" fill="%s" stroke="#fff" stroke-width="3"/>`+"\n", num(p.x), num(p.y), col)
		}
		captions = append(captions, fmt.Sprintf("%d. %s", i+1, f.caption))
	}
	l.legend(&w, captions)
	w.WriteString("</svg>\n")
	_, err := io.WriteString(out, w.String())
	return err
}
