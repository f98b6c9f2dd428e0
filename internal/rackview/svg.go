package rackview

import (
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Drawing constants of the SVG front view, in millimetres: the SVG's
// user unit is the millimetre, so the viewBox carries the real ORv3
// geometry and the width and height attributes scale it for a screen.
const (
	marginMM  = 130 // left and right of the racks: room for cable bends
	topMM     = 190 // above the racks: titles and the inter-TOR cable
	gapMM     = 320 // between racks
	capMM     = 30  // the rack frame above and below the units
	legendMM  = 120 // below the racks
	pxPerMM   = 0.6 // width and height attributes
	postMM    = (RackMM - BayMM) / 2
	laneMM    = 9  // spacing of the cables beside a rack
	channelMM = 36 // the first cable lane, out from the rack's side
)

// Colours of the drawing.
const (
	colBackground = "#f4f5f7"
	colFrame      = "#2b2d31"
	colBay        = "#151618"
	colText       = "#e8e8ed"
	colDim        = "#a1a1a6"
	colInk        = "#1d1d1f" // text on the background
	colBlue       = "#0a84ff" // RoCEv2 and InfiniBand
	colPink       = "#ff5fae" // HiLink
	colYellow     = "#ffd60a" // inter-TOR
)

var ledColour = map[State]string{Active: "#30d158", Idle: "#8e8e93", Fault: "#ff453a", Off: "#3a3a3c"}

var unitColour = map[Kind]string{KindTOR: "#34495e", KindHiLink: "#5b3a57", KindMgmt: "#3d4450",
	KindBlade: "#2c3440", KindEmpty: "#202225", KindCable: "#1c1d20", KindPower: "#3a3a3c"}

// num formats a coordinate: one decimal, none when it is whole, so the
// output is the same on every machine.
func num(v float64) string {
	s := strconv.FormatFloat(v, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0")
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// idSafe makes a name usable in an element id.
func idSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

// pt is a point in millimetres.
type pt struct{ x, y float64 }

// cubic is one cubic Bézier segment.
type cubic struct{ p0, p1, p2, p3 pt }

func (c cubic) reverse() cubic { return cubic{c.p3, c.p2, c.p1, c.p0} }

// layout places a model's racks.
type layout struct {
	m    *Model
	w, h float64
}

func newLayout(m *Model) *layout {
	n := float64(max(len(m.Racks), 1))
	return &layout{m: m, w: 2*marginMM + n*RackMM + (n-1)*gapMM, h: topMM + RackOU*OUmm + 2*capMM + legendMM}
}

func (l *layout) rackX(ri int) float64 { return marginMM + float64(ri)*(RackMM+gapMM) }
func (l *layout) bayX(ri int) float64  { return l.rackX(ri) + postMM }
func (l *layout) unitY(u *Unit) float64 {
	return topMM + capMM + float64(u.Top)*OUmm
}

// portRect is where a port is drawn: x, y, width, height.
func (l *layout) portRect(e End) (x, y, w, h float64) {
	u := &l.m.Racks[e.Rack].Units[e.Unit]
	bx, uy := l.bayX(e.Rack), l.unitY(u)
	switch u.Kind {
	case KindTOR:
		// Right-aligned: the NIC cables come up the right side.
		n := float64(len(u.Ports))
		pitch := min(30, (BayMM-240)/n)
		return bx + BayMM - 12 - (n-float64(e.Port))*pitch, uy + 14, pitch * 0.72, 20
	case KindHiLink:
		// Left-aligned: the GPU cables come up the left side.
		n := float64(len(u.Ports))
		pitch := min(30, (BayMM-240)/n)
		// Numbered from the right, so that the cables of the upper blades,
		// which reach the left lane's inside, run to the farther ports
		// and no two cross.
		return bx + 12 + (n-1-float64(e.Port))*pitch, uy + 14, pitch * 0.72, 20
	}
	p := u.Ports[e.Port]
	if p.Kind == PortHiLink {
		return bx + 22 + float64(e.Port-1)*28, uy + 62, 22, 20
	}
	return bx + BayMM - 52, uy + 36, 32, 24
}

func (l *layout) portCentre(e End) pt {
	x, y, w, h := l.portRect(e)
	return pt{x + w/2, y + h/2}
}

// portBottom and portTop are where cables meet a port.
func (l *layout) portBottom(e End) pt {
	x, y, w, h := l.portRect(e)
	return pt{x + w/2, y + h}
}

func (l *layout) portTop(e End) pt {
	x, y, w, _ := l.portRect(e)
	return pt{x + w/2, y}
}

// cornerMM is the bend radius of a dressed cable.
const cornerMM = 12

// cableRoute is a cable's path, as cubic segments from end A to end B.
// A blade's cable leaves its port sideways to its lane beside the rack
// (right for the NIC, left for the GPUs), runs up, turns along its own
// height just under the switch and rises into the port from below. An
// inter-TOR cable arcs over the racks.
func (l *layout) cableRoute(c Cable, lane, lanes int) []cubic {
	if c.Kind == CableInterTOR {
		a, b := l.portTop(c.A), l.portTop(c.B)
		up := float64(topMM - 120)
		return []cubic{{a, pt{a.x, up}, pt{b.x, up}, b}}
	}
	a, b := l.portCentre(c.A), l.portBottom(c.B)
	sw := &l.m.Racks[c.B.Rack].Units[c.B.Unit]
	yl := l.unitY(sw) + float64(sw.Height)*OUmm + 8 + float64(lanes-1-lane)*6
	x := l.rackX(c.A.Rack) + RackMM + channelMM + float64(lane)*laneMM
	dir := 1.0 // the lane is to the right
	if c.Kind == PortHiLink {
		x = l.rackX(c.A.Rack) - channelMM - float64(lane)*laneMM
		dir = -1
	}
	r := float64(cornerMM)
	// Corner from heading h to the point q, turning at the corner c.
	corner := func(p, k, q pt) cubic {
		return cubic{p, pt{p.x + (k.x-p.x)*0.55, p.y + (k.y-p.y)*0.55}, pt{q.x + (k.x-q.x)*0.55, q.y + (k.y-q.y)*0.55}, q}
	}
	p1 := pt{x - dir*r, a.y}
	p2 := pt{x, a.y - r}
	p3 := pt{x, yl + r}
	p4 := pt{x - dir*r, yl}
	hdir := 1.0 // which way the run under the switch goes
	if b.x < x {
		hdir = -1
	}
	p5 := pt{b.x - hdir*r, yl}
	p6 := pt{b.x, yl - r}
	return []cubic{line(a, p1), corner(p1, pt{x, a.y}, p2), line(p2, p3), corner(p3, pt{x, yl}, p4),
		line(p4, p5), corner(p5, pt{b.x, yl}, p6), line(p6, b)}
}

// route is the path of a cable of a rack. Its lane beside the rack
// follows the distance from the lane to its switch port: the farthest
// port takes the inside lane and the lowest run, so cables do not cross.
func (l *layout) route(c Cable) []cubic {
	if c.Kind == CableInterTOR {
		return l.cableRoute(c, 0, 1)
	}
	rk := &l.m.Racks[c.A.Rack]
	dist := func(x Cable) float64 {
		p := l.portCentre(x.B)
		if x.Kind == PortHiLink {
			return p.x - l.rackX(x.A.Rack)
		}
		return l.rackX(x.A.Rack) + RackMM - p.x
	}
	lane, lanes := 0, 0
	for _, o := range rk.Cables {
		if o.Kind != c.Kind {
			continue
		}
		lanes++
		if d, dc := dist(o), dist(c); d > dc || d == dc && o.B.Port < c.B.Port {
			lane++
		}
	}
	return l.cableRoute(c, lane, lanes)
}

func reverseRoute(segs []cubic) []cubic {
	out := make([]cubic, len(segs))
	for i, s := range segs {
		out[len(segs)-1-i] = s.reverse()
	}
	return out
}

func pathD(segs ...cubic) string {
	var b strings.Builder
	for i, s := range segs {
		if i == 0 {
			fmt.Fprintf(&b, "M%s %s", num(s.p0.x), num(s.p0.y))
		} else if s.p0 != segs[i-1].p3 {
			fmt.Fprintf(&b, " L%s %s", num(s.p0.x), num(s.p0.y))
		}
		fmt.Fprintf(&b, " C%s %s %s %s %s %s", num(s.p1.x), num(s.p1.y), num(s.p2.x), num(s.p2.y), num(s.p3.x), num(s.p3.y))
	}
	return b.String()
}

// line is a straight segment as a cubic, so that paths join up.
func line(a, b pt) cubic { return cubic{a, a, b, b} }

// svgOpen writes the root element and the shared style.
func svgOpen(w *strings.Builder, width, height float64, title, css string) {
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %s %s" width="%s" height="%s" role="img" aria-labelledby="title">`+"\n",
		num(width), num(height), num(width*pxPerMM), num(height*pxPerMM))
	fmt.Fprintf(w, "<title id=\"title\">%s</title>\n", esc(title))
	fmt.Fprintf(w, "<style>\n%s</style>\n", baseCSS+css)
	fmt.Fprintf(w, `<rect width="%s" height="%s" fill="%s"/>`+"\n", num(width), num(height), colBackground)
}

const baseCSS = `text { font-family: "DejaVu Sans", Verdana, sans-serif; }
.u { fill: ` + colText + `; font-size: 20px; font-weight: bold; }
.d { fill: ` + colDim + `; font-size: 14px; }
.t { fill: ` + colInk + `; font-size: 26px; font-weight: bold; }
.l { fill: ` + colInk + `; font-size: 17px; }
.cable { fill: none; stroke-width: 5; stroke-linecap: round; opacity: 0.9; }
`

// FrontSVG writes the front view of every rack of m, side by side, with
// their cables.
func FrontSVG(out io.Writer, m *Model) error {
	var w strings.Builder
	l := newLayout(m)
	svgOpen(&w, l.w, l.h, fmt.Sprintf("Rack %s, front view (OCP Open Rack v3)", m.Name), "")
	l.front(&w)
	l.legend(&w, nil)
	w.WriteString("</svg>\n")
	_, err := io.WriteString(out, w.String())
	return err
}

// front draws the racks, units, ports and cables.
func (l *layout) front(w *strings.Builder) {
	m := l.m
	for ri := range m.Racks {
		l.rack(w, ri)
	}
	// Cables above the units: blade cables, then the inter-TOR ones.
	for _, rk := range m.Racks {
		for _, c := range rk.Cables {
			col := colBlue
			if c.Kind == PortHiLink {
				col = colPink
			}
			fmt.Fprintf(w, `<path id="cable-%s" class="cable" data-a="%s" data-b="%s" stroke="%s" d="%s"/>`+"\n",
				idSafe(m.PortID(c.A)), idSafe(m.PortID(c.A)), idSafe(m.PortID(c.B)), col, pathD(l.route(c)...))
		}
	}
	for _, c := range m.InterTOR {
		cv := l.cableRoute(c, 0, 1)
		fmt.Fprintf(w, `<path id="link-%s" class="cable" data-a="%s" data-b="%s" stroke="%s" stroke-width="7" d="%s"/>`+"\n",
			idSafe(m.PortID(c.A)), idSafe(m.PortID(c.A)), idSafe(m.PortID(c.B)), colYellow, pathD(cv...))
	}
}

func (l *layout) rack(w *strings.Builder, ri int) {
	rk := &l.m.Racks[ri]
	x, bx := l.rackX(ri), l.bayX(ri)
	y := float64(topMM)
	fmt.Fprintf(w, `<g id="rack-%s">`+"\n", idSafe(rk.Switch))
	fmt.Fprintf(w, `<text class="t" x="%s" y="%s">%s</text>`+"\n", num(x), num(y-14), esc("rack "+rk.Name))
	fmt.Fprintf(w, `<rect x="%s" y="%s" width="%s" height="%s" rx="8" fill="%s"/>`+"\n", num(x), num(y), num(RackMM), num(RackOU*OUmm+2*capMM), colFrame)
	fmt.Fprintf(w, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s"/>`+"\n", num(bx), num(y+capMM), num(BayMM), num(RackOU*OUmm), colBay)
	// OU marks on the posts: every OU, numbered from the bottom.
	for ou := 0; ou < RackOU; ou++ {
		yy := y + capMM + float64(ou)*OUmm
		fmt.Fprintf(w, `<text class="d" x="%s" y="%s" font-size="11px">%d</text>`+"\n", num(x+6), num(yy+28), RackOU-ou)
	}
	for ui := range rk.Units {
		l.unit(w, ri, ui)
	}
	w.WriteString("</g>\n")
}

func (l *layout) unit(w *strings.Builder, ri, ui int) {
	m := l.m
	u := &m.Racks[ri].Units[ui]
	bx, uy := l.bayX(ri), l.unitY(u)
	h := float64(u.Height) * OUmm
	fmt.Fprintf(w, `<g class="unit %s" id="unit-%s-%d">`+"\n", u.Kind, idSafe(m.Racks[ri].Switch), ui)
	fmt.Fprintf(w, `<rect x="%s" y="%s" width="%s" height="%s" rx="3" fill="%s" stroke="#000" stroke-width="1.5"/>`+"\n",
		num(bx+1), num(uy+1), num(BayMM-2), num(h-2), unitColour[u.Kind])
	led := func(id string, cx, cy, r float64, s State) {
		fmt.Fprintf(w, `<circle id="%s" class="led %s" cx="%s" cy="%s" r="%s" fill="%s"/>`+"\n", id, s, num(cx), num(cy), num(r), ledColour[s])
	}
	ledID := "led-" + idSafe(m.Racks[ri].Switch) + "-" + strconv.Itoa(ui)
	if u.Kind == KindBlade {
		ledID = "led-" + idSafe(u.Name)
	}
	switch u.Kind {
	case KindTOR, KindHiLink, KindMgmt:
		// The HiLink switch's ports and the GPU cables take its left
		// side, and those cables pass the management host's: their
		// labels start further right.
		tx := bx + 16
		switch u.Kind {
		case KindHiLink:
			px, _, pw, _ := l.portRect(End{ri, ui, 0})
			tx = px + pw + 24
		case KindMgmt:
			tx = bx + 150
		}
		led(ledID, tx, uy+24, 6, u.LED)
		fmt.Fprintf(w, `<text class="u" x="%s" y="%s">%s</text>`+"\n", num(tx+14), num(uy+22), esc(u.Name))
		if len(u.Lines) > 0 {
			fmt.Fprintf(w, `<text class="d" x="%s" y="%s" font-size="11px">%s</text>`+"\n", num(tx+14), num(uy+40), esc(u.Lines[0]))
		}
	case KindBlade:
		led(ledID, bx+18, uy+22, 7, u.LED)
		fmt.Fprintf(w, `<text class="u" x="%s" y="%s">%s</text>`+"\n", num(bx+34), num(uy+29), esc(u.Name))
		if len(u.Lines) > 0 {
			fmt.Fprintf(w, `<text class="d" x="%s" y="%s">%s</text>`+"\n", num(bx+150), num(uy+28), esc(u.Lines[0]))
		}
		fmt.Fprintf(w, `<text class="d" x="%s" y="%s" font-size="11px">2OU blade %d</text>`+"\n", num(bx+BayMM-150), num(uy+88), u.Slot)
	case KindEmpty:
		for i := 0; i < 6; i++ {
			xx := bx + 40 + float64(i)*80
			fmt.Fprintf(w, `<rect x="%s" y="%s" width="60" height="6" rx="3" fill="#2e3034"/>`+"\n", num(xx), num(uy+h/2-3))
		}
	case KindCable:
		for i := 0; i < 5; i++ {
			xx := bx + 50 + float64(i)*105
			fmt.Fprintf(w, `<path d="M%s %s a22 22 0 0 0 44 0" fill="none" stroke="#55575c" stroke-width="5"/>`+"\n", num(xx), num(uy+60))
		}
		fmt.Fprintf(w, `<text class="d" x="%s" y="%s">%s</text>`+"\n", num(bx+20), num(uy+150), esc(strings.Join(append([]string{"4OU cable management"}, u.Lines...), "; ")))
	case KindPower:
		for i := 0; i < 6; i++ {
			xx := bx + 14 + float64(i)*86
			fmt.Fprintf(w, `<rect x="%s" y="%s" width="78" height="70" rx="3" fill="#4a4a4e" stroke="#000"/>`+"\n", num(xx), num(uy+13))
			led(fmt.Sprintf("led-psu-%s-%d", idSafe(m.Racks[ri].Switch), i), xx+64, uy+26, 4.5, u.LED)
		}
		fmt.Fprintf(w, `<text class="u" x="%s" y="%s" font-size="13px">2OU power shelf</text>`+"\n", num(bx+20), num(uy+56))
	}
	for pi, p := range u.Ports {
		e := End{Rack: ri, Unit: ui, Port: pi}
		x, y, pw, ph := l.portRect(e)
		col := colBlue
		if p.Kind == PortHiLink {
			col = colPink
		}
		id := idSafe(m.PortID(e))
		fmt.Fprintf(w, `<rect class="port %s" x="%s" y="%s" width="%s" height="%s" rx="2" fill="%s"><title>%s</title></rect>`+"\n",
			p.Kind, num(x), num(y), num(pw), num(ph), col, esc(portTitle(u, p)))
		led("port-"+id, x+pw/2, y+ph/2, min(pw, ph)/4, p.LED)
	}
	w.WriteString("</g>\n")
}

func portTitle(u *Unit, p Port) string {
	var s string
	switch {
	case u.Kind == KindTOR || u.Kind == KindHiLink:
		s = fmt.Sprintf("%s port %d", u.Name, p.Num)
	case p.Kind == PortHiLink:
		s = fmt.Sprintf("%s gpu%d", u.Name, p.Num)
	default:
		s = u.Name + " NIC"
	}
	if p.Peer != "" {
		s += " to " + p.Peer
	}
	if p.RxFrames+p.TxFrames > 0 {
		s += fmt.Sprintf(": rx %d frames, tx %d frames", p.RxFrames, p.TxFrames)
	}
	return s
}

// legend writes the key below the racks, and the flows' captions.
func (l *layout) legend(w *strings.Builder, captions []string) {
	y := float64(topMM+RackOU*OUmm+2*capMM) + 50 // under the racks, whatever follows
	x := float64(marginMM)
	item := func(mark, text string) {
		w.WriteString(mark)
		fmt.Fprintf(w, `<text class="l" x="%s" y="%s">%s</text>`+"\n", num(x+28), num(y+6), esc(text))
		x += 28 + float64(len(text))*9.5 + 30
	}
	dot := func(c string) string {
		return fmt.Sprintf(`<circle cx="%s" cy="%s" r="8" fill="%s"/>`, num(x+10), num(y), c)
	}
	bar := func(c string) string {
		return fmt.Sprintf(`<path d="M%s %s h24" stroke="%s" stroke-width="6" stroke-linecap="round"/>`, num(x), num(y), c)
	}
	item(dot(ledColour[Active]), "active")
	item(dot(ledColour[Idle]), "idle")
	item(dot(ledColour[Fault]), "fault")
	item(bar(colBlue), "RoCEv2 / InfiniBand")
	item(bar(colPink), "HiLink")
	if len(l.m.Racks) > 1 {
		item(bar(colYellow), "inter-TOR")
	}
	fmt.Fprintf(w, `<text class="l" x="%s" y="%s">%s</text>`+"\n", num(marginMM), num(y+40),
		esc(fmt.Sprintf("OCP Open Rack v3: %d OU of %d mm, 21-inch bay; from %s", RackOU, OUmm, l.m.Source)))
	for i, c := range captions {
		fmt.Fprintf(w, `<text class="l" x="%s" y="%s">%s</text>`+"\n", num(marginMM), num(y+70+float64(i)*26), esc(c))
	}
}
