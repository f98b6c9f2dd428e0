package ibsw

import (
	"github.com/PacketFive/hinic/internal/proto"
)

// directed handles a directed-route SMP (class 0x81) that arrived on port
// in, following the hop-pointer rules of IBA 14.2.2.2 as Linux
// drivers/infiniband/core/smi.c implements them (fabric-facts 2.3):
//
// Outbound (D=0), the SMP arrives at path index i with HopPointer = i:
//
//   - C14-9:1: HopPointer 0 means the sender did not step it: discard.
//   - C14-9:2: 0 < i < HopCount: record ReturnPath[i] = ingress port,
//     step HopPointer to i+1 and send out InitialPath[i+1].
//   - C14-9:3: i == HopCount: record ReturnPath[i], step HopPointer to
//     HopCount+1 and give the SMP to the SMA, which answers it.
//
// Returning (D=1), a switch at path index i receives HopPointer = i+1:
//
//   - C14-13:1 (at the responder): the answer leaves with HopPointer =
//     HopCount out ReturnPath[HopCount], the port the request came in on.
//   - C14-13:2: 2 <= HopPointer <= HopCount: step HopPointer to i and send
//     out ReturnPath[i].
//   - C14-13:3: HopPointer 1 reaches path index 0, the requester. The
//     requester of a directed route is the SM's node; a switch has no SM,
//     so there the SMP is discarded.
//
// Only purely directed routes are supported: DrSLID and DrDLID must both be
// the permissive LID, which is what OpenSM (osm_req.c) and infiniband-diags
// (smpquery -D, ibnetdiscover) send, and all ibsim and pib accept. A route
// with a LID-routed part at either end (C14-9:4, C14-13:3 with a real
// DrSLID) is dropped and counted as DRUnsupported. HopCount 0 SMPs belong to
// the sender's own node and never reach a wire; one that does is dropped.
//
// A relayed SMP is rewritten in place (HopPointer, ReturnPath) after its
// ICRC was checked, and leaves with a fresh ICRC and VCRC: the switch's SMA
// is the end node of each hop of a directed route.
func (s *Switch) directed(in int, pkt []byte, p *proto.Packet, emit func(int, []byte)) {
	ip := &s.ports[in]
	drop := func(unsupported bool) {
		if unsupported {
			s.drops.DRUnsupported++
		} else {
			s.drops.DirectedRoute++
		}
		ip.cnt.VL15Dropped++
	}
	smp, err := proto.ParseSMP(p.Payload)
	if err != nil {
		drop(false)
		return
	}
	if smp.DrSLID() != proto.SMPPermissiveLID || smp.DrDLID() != proto.SMPPermissiveLID {
		drop(true)
		return
	}
	if !p.ICRCValid() {
		s.drops.BadICRC++
		ip.cnt.RcvErrors++
		return
	}
	hc, hp := smp.HopCount(), smp.HopPointer()
	n := s.cfg.NumPorts
	if !smp.Direction() {
		switch {
		case hc == 0 || hp == 0:
			drop(false)
		case hp < hc: // C14-9:2
			out := int(smp.InitialPath()[hp+1])
			if out < 1 || out > n {
				drop(false)
				return
			}
			smp.ReturnPath()[hp] = byte(in)
			smp.SetHopPointer(hp + 1)
			s.relaySMP(out, pkt, emit)
		case hp == hc: // C14-9:3
			smp.ReturnPath()[hp] = byte(in)
			smp.SetHopPointer(hp + 1)
			s.answerDirected(in, pkt, p.LRH, smp, emit)
		default: // hp == hc+1: a LID-routed tail, excluded by DrDLID
			drop(false)
		}
		return
	}
	if hp < 2 || hp > hc { // C14-13:3 (no SM here), or no valid hop
		drop(false)
		return
	}
	out := int(smp.ReturnPath()[hp-1]) // C14-13:2
	if out < 1 || out > n {
		drop(false)
		return
	}
	smp.SetHopPointer(hp - 1)
	s.relaySMP(out, pkt, emit)
}

// relaySMP recomputes the ICRC and VCRC of a directed-route SMP whose MAD
// was rewritten and sends it on VL15.
func (s *Switch) relaySMP(out int, pkt []byte, emit func(int, []byte)) {
	icrc := len(pkt) - proto.VCRCSize - proto.ICRCSize
	proto.PutICRC(pkt[icrc:], proto.ICRCIB(pkt[:icrc]))
	proto.PutVCRC(pkt[icrc+proto.ICRCSize:], proto.VCRC(pkt[:icrc+proto.ICRCSize]))
	s.sendVL15(out, pkt, emit)
}

// answerDirected lets the SMA answer a directed-route SMP that ends here
// and sends the answer back along the return path (C14-13:1).
func (s *Switch) answerDirected(in int, pkt []byte, lrh proto.LRH, req proto.SMP, emit func(int, []byte)) {
	c := &s.ports[0].cnt
	c.RcvPkts++
	c.RcvData += words(pkt)
	if !s.smaProcess(in, req) {
		return
	}
	resp := proto.SMP(s.mad[:])
	hc := resp.HopCount()
	resp.SetHopPointer(hc)
	out := int(resp.ReturnPath()[hc]) // the ingress port, recorded above
	if r := s.buildReply(&replyHdr{vl15: true, dlid: lrh.SLID(), pkey: proto.PKeyDefault}); r != nil {
		s.sendVL15(out, r, emit)
	}
}
