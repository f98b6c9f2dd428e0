package fabric

import (
	"time"

	"github.com/PacketFive/hinic/internal/clock"
	"github.com/PacketFive/hinic/internal/proto"
)

// IBSwitch is what HiSwitch needs of an InfiniBand forwarding engine
// (package ibsw): the relay and its SMA/PMA, without sockets. It is not
// safe for concurrent use; the switch calls it only with its IB lock
// held, so it has one owner at a time.
type IBSwitch interface {
	// Ingress takes a packet (LRH through VCRC) that arrived on port in
	// (1-based) and calls emit for every packet to send; the packet given
	// to emit is valid only during the call.
	Ingress(in int, pkt []byte, emit func(out int, pkt []byte))
	// SetPortLink reports a cable: a peer connected to port p or left.
	SetPortLink(p int, up bool)
	// Status returns what status shows of the IB switch.
	Status() *IBStatus
}

// IBConfig is what the switch tells a new IB engine.
type IBConfig struct {
	NodeGUID    uint64
	NumPorts    int
	Description string
	// Clock is the switch's clock (Config.Clock), for the engine's
	// timers (the SMA's M_Key lease).
	Clock clock.Clock
}

// IBStatus is the InfiniBand part of a switch's status.
type IBStatus struct {
	LID uint16 `json:"lid"`
	// LFT lists the valid entries of the linear forwarding table.
	LFT []LFTEntry `json:"lft"`
	// Ports holds per-port IB state.
	Ports []IBPortStatus `json:"ports,omitempty"`
	// Raw is the engine's full snapshot, for JSON output.
	Raw any `json:"snapshot,omitempty"`
}

// LFTEntry is one LID routed by the LFT.
type LFTEntry struct {
	LID  uint16 `json:"lid"`
	Port int    `json:"port"`
}

// IBPortStatus is one port's IB state.
type IBPortStatus struct {
	Port  int    `json:"port"`
	State string `json:"state"`
}

// ibIngress hands an IB packet to the IB engine and queues what it
// emits. The engine is owned by whoever holds ibMu; ibIn and ibNow carry
// the context into ibEmit.
func (sw *Switch) ibIngress(p *port, f *frame, now time.Time) {
	if sw.ib == nil {
		sw.drop(p, f, DropLinkLayer)
		return
	}
	if _, err := proto.Parse(f.buf, proto.LinkIB); err != nil && err != proto.ErrUnknownOpcode {
		sw.drop(p, f, DropMalformed)
		return
	}
	sw.ibMu.Lock()
	sw.ibIn, sw.ibNow, sw.ibEmits = p, now, 0
	sw.ib.Ingress(p.cfg.num, f.buf, sw.ibEmitFn)
	sw.ibIn = nil
	sw.ibMu.Unlock()
	sw.pool.put(f)
}

// ibEmit queues a copy of a packet the IB engine sends (the engine's
// buffer is valid only during the call). IB links are lossless (credit
// flow control), except VL15, whose SMPs may be dropped.
func (sw *Switch) ibEmit(out int, pkt []byte) {
	in := sw.ibIn
	sw.ibEmits++
	if out < 1 || out > len(sw.ports) {
		in.ctr.drops[DropUnroutable].Add(1)
		return
	}
	o := sw.ports[out-1]
	if o.cfg.link != LinkIB {
		in.ctr.drops[DropLinkLayer].Add(1)
		return
	}
	if len(pkt) == 0 || len(pkt) > o.cfg.maxFrame || len(pkt) > sw.pool.size {
		o.ctr.drops[DropOversize].Add(1)
		return
	}
	f := sw.pool.get()
	f.buf = f.buf[:copy(f.buf, pkt)]
	vl := pkt[0] >> 4
	f.in, f.tc, f.lossless = int16(in.idx), vl&7, vl != proto.VL15
	if vl == proto.VL15 {
		// Management traffic: the highest class.
		f.tc = NumTC - 1
	}
	sw.enqueue(in, o, f, sw.ibNow)
}

// ibStatus reads the IB engine's status under the IB lock.
func (sw *Switch) ibStatus() *IBStatus {
	if sw.ib == nil {
		return nil
	}
	sw.ibMu.Lock()
	defer sw.ibMu.Unlock()
	return sw.ib.Status()
}
