// Package ibswtest holds test helpers for HiSwitch's InfiniBand side: an
// in-memory wire between nodes (Fabric), a minimal channel-adapter port with
// its own SMA (CA), and a mini subnet manager (SM) that replays the
// bring-up sequence OpenSM 3.3.23 sends (docs: fabric-facts 2.4). They let
// tests drive ibsw.Switch values, or anything else with the Node methods,
// without sockets, goroutines or sleeps.
//
// It imports only internal/proto and the standard library. Nothing here is
// safe for concurrent use: a test owns its Fabric and everything on it.
package ibswtest

import (
	"errors"
	"fmt"
)

// Node is anything with IB ports that the Fabric can wire up: ibsw.Switch
// and CA have these methods.
type Node interface {
	// Ingress handles a packet that arrived on port in and emits what
	// it sends (the slice is valid only during emit).
	Ingress(in int, pkt []byte, emit func(out int, pkt []byte))
	// SetPortLink reports the cable of port p going up or down.
	SetPortLink(p int, up bool)
}

// End is one end of a cable: a node's port.
type End struct {
	Node Node
	Port int
}

// Fabric is an in-memory set of cables. Packets put on a cable wait in a
// FIFO until Run delivers them, so a test decides when the network moves
// and nothing recurses.
type Fabric struct {
	links map[End]End
	names map[Node]string
	queue []wirePacket

	// Trace, when set, sees every packet as it is delivered.
	Trace func(from, to End, pkt []byte)
	// Lost counts packets sent on ports without a cable.
	Lost int
	// Delivered counts packets delivered.
	Delivered int
}

type wirePacket struct {
	from, to End
	pkt      []byte
}

// ErrNotIdle means Run gave up: packets kept flowing (a forwarding loop).
var ErrNotIdle = errors.New("ibswtest: fabric not idle after the step limit")

// maxRunSteps bounds Run; a bring-up moves a few hundred packets.
const maxRunSteps = 100000

// NewFabric returns an empty fabric.
func NewFabric() *Fabric {
	return &Fabric{links: map[End]End{}, names: map[Node]string{}}
}

// Name gives n a display name for traces and errors.
func (f *Fabric) Name(n Node, name string) { f.names[n] = name }

// NameOf returns the name given with Name, or the node's type.
func (f *Fabric) NameOf(n Node) string {
	if s, ok := f.names[n]; ok {
		return s
	}
	return fmt.Sprintf("%T", n)
}

// EndName names a port as "name/port".
func (f *Fabric) EndName(e End) string { return fmt.Sprintf("%s/%d", f.NameOf(e.Node), e.Port) }

// Connect joins port pa of a and port pb of b with a cable and brings both
// links up (SetPortLink).
func (f *Fabric) Connect(a Node, pa int, b Node, pb int) {
	ea, eb := End{a, pa}, End{b, pb}
	f.links[ea], f.links[eb] = eb, ea
	a.SetPortLink(pa, true)
	b.SetPortLink(pb, true)
}

// Disconnect removes the cable at port p of n and brings both links down.
func (f *Fabric) Disconnect(n Node, p int) {
	e := End{n, p}
	o, ok := f.links[e]
	if !ok {
		return
	}
	delete(f.links, e)
	delete(f.links, o)
	e.Node.SetPortLink(e.Port, false)
	o.Node.SetPortLink(o.Port, false)
}

// Peer returns the other end of the cable at port p of n.
func (f *Fabric) Peer(n Node, p int) (End, bool) {
	o, ok := f.links[End{n, p}]
	return o, ok
}

// Send puts a copy of pkt on the cable of port p of n.
func (f *Fabric) Send(n Node, p int, pkt []byte) {
	from := End{n, p}
	to, ok := f.links[from]
	if !ok {
		f.Lost++
		return
	}
	f.queue = append(f.queue, wirePacket{from, to, append([]byte(nil), pkt...)})
}

// Run delivers packets, and whatever they cause, until no packet is in
// flight. It returns ErrNotIdle if that takes more than a bound of steps.
func (f *Fabric) Run() error {
	for steps := 0; len(f.queue) > 0; steps++ {
		if steps >= maxRunSteps {
			return ErrNotIdle
		}
		w := f.queue[0]
		f.queue = f.queue[1:]
		if f.Trace != nil {
			f.Trace(w.from, w.to, w.pkt)
		}
		f.Delivered++
		n := w.to.Node
		w.to.Node.Ingress(w.to.Port, w.pkt, func(out int, pkt []byte) { f.Send(n, out, pkt) })
	}
	f.queue = nil
	return nil
}
