package ibsw

import (
	"encoding/binary"

	"github.com/PacketFive/hinic/internal/proto"
)

// MaxResponseSize is the largest packet the switch originates (an answer
// MAD with a GRH, 330 bytes). Ingress never emits more than the larger of
// this and the packet it was given.
const MaxResponseSize = proto.LRHSize + proto.GRHSize + proto.BTHSize + proto.DETHSize +
	proto.MADSize + proto.ICRCSize + proto.VCRCSize

// qp1QKey is the well-known Q_Key of QP1 (IBA 13.5.1).
const qp1QKey = 0x80010000

// replyHdr addresses an answer of port 0's agents; the MAD is s.mad.
type replyHdr struct {
	vl15   bool   // SMP (VL15, QP0) or GMP (data VL by SL, QP1)
	sl     uint8  // GMP: the request's SL
	dlid   uint16 // the request's SLID
	pkey   uint16 // the request's P_Key (SMPs: 0xFFFF)
	destQP uint32 // GMP: the request's source QP
	grh    proto.GRH
}

// buildReply encodes the answer in s.mad as a new packet in s.resp and
// counts it as sent by port 0 (nil only if encoding failed, which the
// fixed sizes rule out). The LRH is addressed back to the requester:
// DLID = the request's SLID, SLID = the switch's LID, or the permissive LID
// when the switch has none yet or the answer goes to the permissive LID (a
// directed-route answer, like Linux qib and hfi1 address them). SMPs go on
// VL15 from QP0 to QP0; GMPs from QP1 with the well-known Q_Key to the
// requesting QP, on the request's SL. A request with a GRH gets one back,
// with the GIDs swapped.
func (s *Switch) buildReply(h *replyHdr) []byte {
	slid := s.ports[0].pi.LID
	if slid == 0 || h.dlid == proto.LIDPermissive {
		slid = proto.LIDPermissive
	}
	f := &s.out
	*f = proto.PacketFields{
		Link:    proto.LinkIB,
		LRH:     proto.LRHFields{VL: h.sl, SL: h.sl, DLID: h.dlid, SLID: slid},
		BTH:     proto.BTHFields{Opcode: proto.OpUDSendOnly, PKey: h.pkey, DestQP: h.destQP},
		Payload: s.mad[:],
	}
	if h.vl15 {
		f.LRH.VL, f.LRH.SL = proto.VL15, 0
	} else {
		f.DETH = proto.DETHFields{QKey: qp1QKey, SrcQP: 1}
	}
	if h.grh != nil {
		f.Global = true
		f.GRH = proto.GRHFields{
			TClass:    h.grh.TClass(),
			FlowLabel: h.grh.FlowLabel(),
			HopLmt:    0xFF,
		}
		binary.BigEndian.PutUint64(f.GRH.SGID[:8], s.ports[0].pi.GIDPrefix)
		binary.BigEndian.PutUint64(f.GRH.SGID[8:], s.cfg.NodeGUID)
		copy(f.GRH.DGID[:], h.grh.SGID())
	}
	n, err := f.Encode(s.resp[:])
	if err != nil {
		// Unreachable: every size is fixed and fits s.resp.
		return nil
	}
	pkt := s.resp[:n]
	c := &s.ports[0].cnt
	c.XmitPkts++
	c.XmitData += words(pkt)
	return pkt
}

// replyPort picks the port a LID-routed answer leaves on: the LFT entry of
// its DLID, or the ingress port when the request used the permissive DLID
// (it came from the neighbour, which may have no LID or route yet). It
// returns 0 when there is no usable route.
func (s *Switch) replyPort(in int, reqDLID, dlid uint16) int {
	if reqDLID == proto.LIDPermissive || dlid == proto.LIDPermissive {
		return in
	}
	out := s.route(dlid)
	if out < 1 || out > s.cfg.NumPorts {
		s.drops.NoRoute++
		s.ports[0].cnt.RcvSwitchRelayErrors++
		return 0
	}
	return out
}
