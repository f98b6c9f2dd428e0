package rackview

import (
	"fmt"
	"io"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// textWidth is the inner width of a rack in the terminal front view.
const textWidth = 56

// ledGlyph is an LED in the terminal: the glyph tells the state apart
// without colour too.
var ledGlyph = map[State]string{Active: "●", Idle: "○", Fault: "✗", Off: "·"}

// ledANSI are the LEDs' terminal colours (ANSI 256).
var ledANSI = map[State]string{Active: "10", Idle: "8", Fault: "9", Off: "8"}

// Text writes the front view of m's racks for a terminal, top to bottom:
// the TOR with one LED per port, the HiLink switch, the management host,
// the blades, cable management and the power shelf. With color the LEDs
// and port stubs are coloured (lipgloss); without, the glyphs alone tell
// the states apart.
func Text(w io.Writer, m *Model, color bool) error {
	r := lipgloss.NewRenderer(w)
	if color {
		r = lipgloss.NewRenderer(w, termenv.WithTTY(true))
		r.SetColorProfile(termenv.ANSI256)
	} else {
		r.SetColorProfile(termenv.Ascii)
	}
	st := func(fg string) lipgloss.Style { return r.NewStyle().Foreground(lipgloss.Color(fg)) }
	led := func(s State) string { return st(ledANSI[s]).Render(ledGlyph[s]) }
	frame := st("8")
	blue, pink, yellow := st("33"), st("205"), st("220")
	var b strings.Builder
	sep := frame.Render("+" + strings.Repeat("-", textWidth) + "+")
	row := func(s string) {
		pad := textWidth - lipgloss.Width(s)
		if pad < 0 {
			s = truncate(s, textWidth)
			pad = textWidth - lipgloss.Width(s)
		}
		b.WriteString(frame.Render("|") + s + strings.Repeat(" ", pad) + frame.Render("|") + "\n")
	}
	for ri, rk := range m.Racks {
		if ri > 0 {
			b.WriteString("\n")
		}
		b.WriteString(sep + "\n")
		row(" rack " + rk.Name)
		b.WriteString(sep + "\n")
		for ui, u := range rk.Units {
			label := fmt.Sprintf(" %dOU %s ", u.Height, led(u.LED))
			switch u.Kind {
			case KindTOR, KindHiLink:
				var ports strings.Builder
				stub := blue
				if u.Kind == KindHiLink {
					stub = pink
				}
				for _, p := range u.Ports {
					ports.WriteString(led(p.LED))
				}
				row(label + fmt.Sprintf("%-11s", u.Name) + stub.Render("[") + ports.String() + stub.Render("]"))
				for _, x := range u.Lines[1:] {
					row("       " + x)
				}
			case KindMgmt:
				row(label + "mgmt   " + strings.Join(u.Lines[:1], ""))
				for _, x := range u.Lines[1:] {
					row("       " + x)
				}
				b.WriteString(sep + "\n")
			case KindBlade:
				nic := u.Ports[0]
				stubs := blue.Render("[") + led(nic.LED) + blue.Render("]")
				for _, p := range u.Ports[1:] {
					stubs += pink.Render("[") + led(p.LED) + pink.Render("]")
				}
				first := ""
				if len(u.Lines) > 0 {
					first = u.Lines[0]
				}
				row(label + fmt.Sprintf("%-8s %s %s", u.Name, stubs, first))
				for _, x := range u.Lines[1:] {
					row("         " + x)
				}
			case KindEmpty:
				// A run of empty slots is one line; the blanking panel in
				// place of a HiLink switch is none.
				if u.Slot == 0 || ui > 0 && rk.Units[ui-1].Kind == KindEmpty {
					continue
				}
				last := u.Slot
				for _, v := range rk.Units[ui+1:] {
					if v.Kind != KindEmpty {
						break
					}
					last = v.Slot
				}
				if last == u.Slot {
					row(fmt.Sprintf(" 2OU   slot %d empty", u.Slot))
				} else {
					row(fmt.Sprintf(" %dOU   slots %d-%d empty", 2*(last-u.Slot+1), u.Slot, last))
				}
			case KindCable:
				b.WriteString(sep + "\n")
				row(" 4OU   cable management")
				for _, x := range u.Lines {
					row("       " + x)
				}
			case KindPower:
				row(label + "power shelf")
			}
		}
		b.WriteString(sep + "\n")
	}
	for _, c := range m.InterTOR {
		a, z := m.Racks[c.A.Rack], m.Racks[c.B.Rack]
		fmt.Fprintf(&b, "%s %s:%d <-> %s:%d\n", yellow.Render("==== inter-TOR"),
			a.Switch, a.Units[c.A.Unit].Ports[c.A.Port].Num, z.Switch, z.Units[c.B.Unit].Ports[c.B.Port].Num)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// truncate cuts s, which may hold styles, to n cells.
func truncate(s string, n int) string {
	return lipgloss.NewStyle().MaxWidth(n).Render(s)
}
