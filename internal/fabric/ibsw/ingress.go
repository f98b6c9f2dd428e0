package ibsw

import (
	"math/bits"

	"github.com/PacketFive/hinic/internal/proto"
)

// Ingress handles one IB packet, from the first byte of the LRH through the
// VCRC, that arrived on external port in (1..NumPorts), and calls emit once
// for every packet to transmit (zero or more times). The slice passed to
// emit is valid only during that call; the caller copies it. Ingress may
// rewrite pkt in place (see the package doc), never keeps it, never emits
// on port 0 or beyond NumPorts, and never emits more than
// max(len(pkt), MaxResponseSize) bytes. emit must not call back into the
// switch: the answers it passes live in the switch's scratch space.
//
// The relay checks what a switch checks (IBA 7.7, 7.8.2): the LRH (LVer,
// PktLen against the length, room for the headers LNH announces) and the
// VCRC. The ICRC is end-to-end: forwarded packets keep theirs untouched.
// Packets the switch itself consumes (SMPs and GMPs for port 0, and
// directed-route SMPs, whose MAD the switch rewrites) have their ICRC
// checked, as any end node does, before anything is answered or rewritten.
//
// Which packets a port accepts and sends follows the link states of
// IBA 7.2: an external port in Init passes only VL15 (SMPs); data packets
// need Active on the egress port; a data packet received on an Armed port
// moves it to Active (IBA 7.2's Armed-to-Active on the first data packet,
// as Linux hfi1's set_armed_to_active does) and is then forwarded.
func (s *Switch) Ingress(in int, pkt []byte, emit func(out int, pkt []byte)) {
	if in < 1 || in > s.cfg.NumPorts {
		s.drops.BadPort++
		return
	}
	ip := &s.ports[in]
	ip.cnt.RcvPkts++
	ip.cnt.RcvData += words(pkt)
	if !ip.linkUp || ip.pi.PortState == proto.PortStateDown {
		// A port without a link receives nothing; a caller that
		// still delivers is racing SetPortLink.
		s.drops.LinkDown++
		return
	}
	p, perr := proto.Parse(pkt, proto.LinkIB)
	if p.VCRC == nil {
		// LRH missing or PktLen disagreeing with the length.
		s.malformed(ip)
		return
	}
	if !p.VCRCValid() {
		s.drops.BadVCRC++
		ip.cnt.RcvErrors++
		return
	}
	lrh := p.LRH
	if lrh.LVer() != proto.LRHLinkVersion {
		s.malformed(ip)
		return
	}
	var bth proto.BTH
	switch lrh.LNH() {
	case proto.LNHIBALocal, proto.LNHIBAGlobal:
		// A switch does not interpret the transport, so an unknown
		// opcode or odd extension headers are forwarded; it only
		// needs the BTH (for QP0, P_Key) and, with a GRH, a
		// consistent GRH in front of it.
		if p.BTH == nil {
			s.malformed(ip)
			return
		}
		bth = p.BTH
	}

	vl15 := lrh.VL() == proto.VL15
	if vl15 || (bth != nil && bth.DestQP() == 0) {
		s.management(in, pkt, &p, perr, emit)
		return
	}

	// Data VLs from here on.
	if lrh.SLID() >= proto.LIDMulticastBase {
		// Multicast and permissive SLIDs are invalid on data VLs
		// (IBA 4.1.3: the permissive LID is for SMPs only).
		s.malformed(ip)
		return
	}
	switch ip.pi.PortState {
	case proto.PortStateActive:
	case proto.PortStateArmed:
		ip.pi.PortState = proto.PortStateActive
	default:
		s.drops.IngressState++
		return
	}
	if bth == nil {
		if ip.pi.FilterRawInbound {
			s.drops.RawFilter++
			ip.cnt.RcvConstraintErrors++
			return
		}
	} else if ip.pi.PartitionEnforcementInbound && !ip.pkeyAllowed(bth.PKey()) {
		s.drops.Partition++
		ip.cnt.RcvConstraintErrors++
		ip.pi.PKeyViolations = proto.PMACounterAdd16(ip.pi.PKeyViolations, 1)
		return
	}

	dlid := lrh.DLID()
	switch {
	case dlid >= proto.LIDMulticastBase && dlid <= proto.LIDMulticastLast:
		s.multicast(in, pkt, lrh, bth, dlid, emit)
	case s.ownLID(dlid):
		s.port0Data(in, pkt, &p, perr, emit)
	default:
		out := s.route(dlid)
		switch {
		case out == in:
			s.drops.Loop++
			ip.cnt.RcvSwitchRelayErrors++
		case out < 1 || out > s.cfg.NumPorts:
			s.drops.NoRoute++
			ip.cnt.RcvSwitchRelayErrors++
		default:
			s.sendData(in, out, pkt, lrh, bth, emit)
		}
	}
}

// malformed counts a packet that failed the link-level checks.
func (s *Switch) malformed(ip *port) {
	s.drops.Malformed++
	ip.cnt.RcvErrors++
}

// route returns the LFT entry of a unicast LID, or proto.LFTPortDrop for a
// LID above LinearFDBTop or beyond the table (IBA 14.2.5.4: the switch
// discards unicast DLIDs above LinearFDBTop). LID 0 and the permissive LID
// never route.
func (s *Switch) route(dlid uint16) int {
	if dlid == proto.LIDReserved || dlid > s.si.LinearFDBTop || int(dlid) >= len(s.lft) {
		return proto.LFTPortDrop
	}
	return int(s.lft[dlid])
}

// sendData transmits a data-VL packet out port out (from port in, or from
// port 0 when in is 0): the egress port must be Active, its
// OperationalVLs must include the VL the SL selects, and its outbound
// partition or raw filter must let the packet pass. The VL is rewritten
// (and the VCRC with it) only when it changes.
func (s *Switch) sendData(in, out int, pkt []byte, lrh proto.LRH, bth proto.BTH, emit func(int, []byte)) bool {
	op := &s.ports[out]
	if !op.linkUp || op.pi.PortState != proto.PortStateActive {
		s.drops.EgressState++
		op.cnt.XmitDiscards++
		return false
	}
	// No SLtoVLMappingTable is implemented: VL = SL while the SL is one
	// of the egress port's operational data VLs (the identity map ibsim
	// starts with); other SLs have no VL and are dropped, as a real
	// switch drops SLs its table maps to VL15 (IBA 7.6).
	vl := lrh.SL()
	if vl >= op.numVLs {
		s.drops.SLToVL++
		s.ports[in].cnt.RcvSwitchRelayErrors++
		return false
	}
	if bth == nil {
		if op.pi.FilterRawOutbound {
			s.drops.RawFilter++
			op.cnt.XmitConstraintErrors++
			return false
		}
	} else if op.pi.PartitionEnforcementOutbound && !op.pkeyAllowed(bth.PKey()) {
		s.drops.Partition++
		op.cnt.XmitConstraintErrors++
		op.pi.PKeyViolations = proto.PMACounterAdd16(op.pi.PKeyViolations, 1)
		return false
	}
	if lrh.VL() != vl {
		lrh.SetVL(vl)
		n := len(pkt) - proto.VCRCSize
		proto.PutVCRC(pkt[n:], proto.VCRC(pkt[:n]))
	}
	s.xmit(out, pkt, emit)
	return true
}

// sendVL15 transmits an SMP out port out. VL15 is not flow controlled and
// passes in Init and Armed as well as Active (IBA 7.2); it needs a link.
func (s *Switch) sendVL15(out int, pkt []byte, emit func(int, []byte)) bool {
	op := &s.ports[out]
	if !op.linkUp || op.pi.PortState < proto.PortStateInit {
		s.drops.EgressState++
		op.cnt.XmitDiscards++
		return false
	}
	s.xmit(out, pkt, emit)
	return true
}

// xmit counts and emits a packet on external port out.
func (s *Switch) xmit(out int, pkt []byte, emit func(int, []byte)) {
	c := &s.ports[out].cnt
	c.XmitPkts++
	c.XmitData += words(pkt)
	emit(out, pkt)
}

// multicast forwards a data packet to every port in the MLID's port mask
// except the one it came from (a switch never sends a multicast packet
// back out its ingress port, IBA chapter 18) and port 0 (the switch's own
// port joins no group).
func (s *Switch) multicast(in int, pkt []byte, lrh proto.LRH, bth proto.BTH, mlid uint16, emit func(int, []byte)) {
	idx := int(mlid - proto.MFTMLIDBase)
	if idx >= s.cfg.MulticastFDBCap {
		s.drops.NoMulticastPort++
		s.ports[in].cnt.RcvSwitchRelayErrors++
		return
	}
	masks := s.mft[idx*s.positions : (idx+1)*s.positions]
	members := false
	for pos, m := range masks {
		members = members || m != 0
		for m != 0 {
			bit := bits.TrailingZeros16(m)
			m &= m - 1
			out := pos*proto.MFTPortsPerPosition + bit
			if out == 0 || out == in || out > s.cfg.NumPorts {
				continue
			}
			s.sendData(in, out, pkt, lrh, bth, emit)
		}
	}
	if !members {
		s.drops.NoMulticastPort++
		s.ports[in].cnt.RcvSwitchRelayErrors++
	}
}

// management handles VL15 and QP0 traffic: SMPs only, on VL15, to QP0,
// without a GRH, as UD SEND-only packets carrying one MAD (IBA 14.2.1).
func (s *Switch) management(in int, pkt []byte, p *proto.Packet, perr error, emit func(int, []byte)) {
	ip := &s.ports[in]
	lrh := p.LRH
	if lrh.VL() != proto.VL15 || lrh.LNH() != proto.LNHIBALocal || p.BTH.DestQP() != 0 ||
		perr != nil || p.Opcode() != proto.OpUDSendOnly || len(p.Payload) != proto.MADSize {
		s.drops.VL15++
		ip.cnt.VL15Dropped++
		return
	}
	mgmtClass := p.Payload[1]
	if mgmtClass == proto.MgmtClassSubnDirectedRoute {
		s.directed(in, pkt, p, emit)
		return
	}
	dlid := lrh.DLID()
	if dlid == proto.LIDPermissive || s.ownLID(dlid) {
		// The permissive DLID addresses whichever node receives the
		// packet first (IBA 4.1.3).
		s.port0SMP(in, pkt, p, emit)
		return
	}
	if dlid >= proto.LIDMulticastBase {
		s.drops.VL15++
		ip.cnt.VL15Dropped++
		return
	}
	// A LID-routed SMP for someone else: relayed by the LFT on VL15,
	// untouched (its ICRC stays the sender's).
	out := s.route(dlid)
	switch {
	case out == in:
		s.drops.Loop++
		ip.cnt.RcvSwitchRelayErrors++
	case out < 1 || out > s.cfg.NumPorts:
		s.drops.NoRoute++
		ip.cnt.RcvSwitchRelayErrors++
	default:
		s.sendVL15(out, pkt, emit)
	}
}

// consume checks a packet port 0 is about to consume: its ICRC (port 0 is
// an end node) and counts it as received there.
func (s *Switch) consume(in int, pkt []byte, p *proto.Packet) bool {
	if !p.ICRCValid() {
		s.drops.BadICRC++
		s.ports[in].cnt.RcvErrors++
		return false
	}
	c := &s.ports[0].cnt
	c.RcvPkts++
	c.RcvData += words(pkt)
	return true
}
