package rdma

import (
	"fmt"

	"github.com/PacketFive/hinic/internal/proto"
)

// Port is where the engine's frames go: the device's link to the fabric.
// The engine calls Send from its goroutine only, one frame at a time, with
// a buffer it reuses: Send must not keep frame after it returns (copy it if
// needed). Send may block for back-pressure but must not call back into the
// engine: no control calls (Modify, CreateQP, Close, ...) of the sending
// device from inside Send. Calling Deliver, of any device, is fine: it only
// enqueues, waiting at most DeviceConfig.RxWait for room.
// An error counts as TxErrors and the frame is lost, as on a wire;
// retransmission recovers.
type Port interface {
	Send(frame []byte) error
}

// FlushPort is a Port whose Send may hold frames back to send them
// together (a socket port gathering a batch for one sendmmsg). The
// engine calls Flush from its goroutine after every round of work,
// before it waits, so no frame waits longer than one round. Flush
// follows Send's rules; an error counts as TxErrors like Send's.
type FlushPort interface {
	Port
	Flush() error
}

// A BackloggedPort is a Port that never makes the engine wait: what its
// peer cannot take now it keeps and sends later, in order, calling
// Device.TxReady each time it has sent some. While it keeps maxPortBacklog
// frames or more, the engine starts no new requests, READ responses or
// datagrams (the QPs stay scheduled) and goes on taking frames, so the
// goroutine that reads the link is never stopped by the link's
// back-pressure.
type BackloggedPort interface {
	Port
	// Backlog is how many frames the port keeps that its peer has not
	// taken.
	Backlog() int
}

// txPath is a QP's precomputed addressing: the parts of every frame the QP
// sends that do not change per packet (Ethernet, IP and UDP headers, the
// BTH's P_Key and destination QP). It is built from the AV when the QP goes
// to RTR and is owned by the engine goroutine.
type txPath struct {
	f        proto.PacketFields
	tc       uint8 // traffic class with the ECN bits cleared (DSCP << 2)
	loopback bool  // the destination is this device: frames skip the port
	mcast    bool  // a UD multicast destination (group)
	group    [16]byte
}

// ipv4Mapped reports whether gid is an IPv4-mapped address ::ffff:a.b.c.d,
// which RoCEv2 sends as IPv4 (IBTA Annex A17).
func ipv4Mapped(g [16]byte) bool {
	for _, b := range g[:10] {
		if b != 0 {
			return false
		}
	}
	return g[10] == 0xff && g[11] == 0xff
}

// udpSourcePort is rxe's source port: 0xC000 + hash_32(qpn, 14), the
// kernel's golden-ratio hash of the local QP number. It spreads QPs over
// ECMP paths and receive queues while keeping one flow per QP.
func udpSourcePort(qpn uint32) uint16 {
	h := (qpn * 0x61C88647) >> (32 - 14)
	return proto.RoCEv2SourcePortBase | uint16(h&0x3FFF)
}

// buildPath checks an AV for a QP and returns its frame template.
func (d *Device) buildPath(qpn, destQPN uint32, ah *AHAttr) (txPath, error) {
	if d.ib() {
		return d.buildPathIB(destQPN, ah, false)
	}
	var p txPath
	if !ah.IsGlobal {
		return p, fmt.Errorf("AV: RoCE needs a GRH (AHAttr.IsGlobal): %w", ErrInvalid)
	}
	if ah.PortNum > 1 {
		return p, fmt.Errorf("AV: port %d does not exist: %w", ah.PortNum, ErrInvalid)
	}
	g := &ah.GRH
	gids := d.gidTable()
	if int(g.SGIDIndex) >= len(gids) {
		return p, fmt.Errorf("AV: SGID index %d outside the %d-entry GID table: %w", g.SGIDIndex, len(gids), ErrInvalid)
	}
	sgid, dgid := gids[g.SGIDIndex], g.DGID
	if dgid == ([16]byte{}) {
		return p, fmt.Errorf("AV: zero DGID: %w", ErrInvalid)
	}
	if isMcastGID(dgid) {
		return p, fmt.Errorf("AV: multicast DGID %s needs a UD QP: %w", gidString(dgid), ErrInvalid)
	}
	if ipv4Mapped(dgid) != ipv4Mapped(sgid) {
		return p, fmt.Errorf("AV: SGID %d (%s) and DGID (%s) are of different IP families: %w",
			g.SGIDIndex, gidString(sgid), gidString(dgid), ErrInvalid)
	}
	dmac := ah.DMAC
	p.loopback = d.gidIndex(dgid) >= 0 || dmac == d.cfg.MAC
	if dmac == ([6]byte{}) {
		if !p.loopback {
			return p, fmt.Errorf("AV: DMAC not set (the caller resolves the next-hop MAC of %s): %w", gidString(dgid), ErrInvalid)
		}
		dmac = d.cfg.MAC
	}
	p.roceHeaders(d.cfg.MAC, dmac, sgid, g)
	p.f.UDP.SrcPort = udpSourcePort(qpn)
	p.f.BTH.DestQP = destQPN
	return p, nil
}

// roceHeaders fills the Ethernet, IP, UDP and BTH parts of a RoCEv2
// template from src to dmac and g.DGID (IPv4 when the GIDs are
// IPv4-mapped, as RoCEv2 sends them).
func (p *txPath) roceHeaders(src, dmac [6]byte, sgid [16]byte, g *GlobalRoute) {
	hop := g.HopLimit
	if hop == 0 {
		hop = 64
	}
	f := &p.f
	f.Link = proto.LinkEthernet
	f.Eth = proto.EthernetFields{Dst: dmac, Src: src}
	p.tc = g.TrafficClass &^ 3
	if ipv4Mapped(g.DGID) {
		f.IP4 = proto.IPv4Fields{TTL: hop, Flags: 0b010} // DF, as rxe
		copy(f.IP4.Src[:], sgid[12:])
		copy(f.IP4.Dst[:], g.DGID[12:])
	} else {
		f.IPv6 = true
		f.IP6 = proto.IPv6Fields{FlowLabel: g.FlowLabel & 0xFFFFF, HopLimit: hop, Src: sgid, Dst: g.DGID}
	}
	f.UDP = proto.UDPFields{DstPort: proto.RoCEv2Port}
	f.BTH = proto.BTHFields{PKey: pkeyDefault}
}

func gidString(g [16]byte) string {
	if ipv4Mapped(g) {
		return fmt.Sprintf("::ffff:%d.%d.%d.%d", g[12], g[13], g[14], g[15])
	}
	return fmt.Sprintf("%x:%x:%x:%x:%x:%x:%x:%x",
		uint16(g[0])<<8|uint16(g[1]), uint16(g[2])<<8|uint16(g[3]),
		uint16(g[4])<<8|uint16(g[5]), uint16(g[6])<<8|uint16(g[7]),
		uint16(g[8])<<8|uint16(g[9]), uint16(g[10])<<8|uint16(g[11]),
		uint16(g[12])<<8|uint16(g[13]), uint16(g[14])<<8|uint16(g[15]))
}

// txBegin finishes the per-packet IP fields of f (a copy of the QP's
// template with the BTH and extension headers filled in) and returns the
// buffer to build in and the offset where the payload goes, so callers DMA
// the payload straight into the frame. ect marks the packet ECN-capable
// (ECT(0)), which RoCEv2 data packets are; ACKs are not-ECT.
func (qp *QP) txBegin(f *proto.PacketFields, ect bool) (*frameBuf, int) {
	return qp.txBeginOn(&qp.path, f, ect)
}

// txBeginOn is txBegin for a frame on path p (a UD address handle's).
func (qp *QP) txBeginOn(p *txPath, f *proto.PacketFields, ect bool) (*frameBuf, int) {
	e := &qp.dev.eng
	if qp.isXRC() && f.BTH.Opcode.Transport() == proto.TransportRC {
		// The requester and responder build RC opcodes; XRC's are the
		// same operations at base 0xA0 (IBA 9.2.1 table 38).
		f.BTH.Opcode += proto.XRCBase
	}
	tos := p.tc
	if ect {
		tos |= proto.ECNECT0
	}
	if f.Link == proto.LinkIB {
		qp.ibStamp(f)
	} else if f.IPv6 {
		f.IP6.TrafficClass = tos
	} else {
		f.IP4.TOS = tos
		f.IP4.ID = e.ipID
		e.ipID++
	}
	fb := &e.tx
	if p.loopback {
		fb = e.getBuf()
	}
	f.Payload = nil
	off := f.Len() - proto.ICRCSize // the headers; the payload goes right after
	if f.Link == proto.LinkIB {
		off -= proto.VCRCSize
	}
	return fb, off
}

// txEnd encodes the frame (payload already in place in fb) and sends it
// out of the port, or queues it on the loopback queue.
func (qp *QP) txEnd(f *proto.PacketFields, fb *frameBuf, payload []byte) {
	qp.txEndOn(&qp.path, f, fb, payload)
}

// txEndOn is txEnd for a frame on path p.
func (qp *QP) txEndOn(p *txPath, f *proto.PacketFields, fb *frameBuf, payload []byte) {
	d := qp.dev
	e := &d.eng
	f.Payload = payload
	n, err := f.Encode(fb.b[:])
	if err != nil { // cannot happen for the sizes the engine builds
		d.ctr.txErrors.Add(1)
		if p.loopback {
			e.putBuf(fb)
		}
		return
	}
	if p.loopback {
		d.ctr.loopback.Add(1)
		if len(e.loopQ)-e.loopHead >= maxLoopQueue {
			d.ctr.rxDropped.Add(1)
			e.putBuf(fb)
		} else {
			fb.n = n
			e.loopQ = append(e.loopQ, fb)
		}
	} else if err := d.port.Send(fb.b[:n]); err != nil {
		d.ctr.txErrors.Add(1)
	}
	// Counted after the hand-off: rdmatest.Settle relies on a frame being
	// in its receiver's queue by the time it shows in TxPackets.
	d.ctr.txPackets.Add(1)
	d.ctr.txBytes.Add(uint64(n))
}

// sendAck sends an ACK or NAK (opcode ACKNOWLEDGE) for psn with the given
// AETH syndrome and the responder's current MSN.
func (qp *QP) sendAck(psn proto.PSN, syndrome uint8) {
	f := qp.path.f
	f.BTH.Opcode = proto.OpRCAcknowledge
	f.BTH.PSN = psn
	f.AETH = proto.AETHFields{Syndrome: syndrome, MSN: qp.resp.msn}
	fb, _ := qp.txBegin(&f, false)
	qp.txEnd(&f, fb, nil)
}
