package ibsw

import (
	"github.com/PacketFive/hinic/internal/ibagent"
	"github.com/PacketFive/hinic/internal/proto"
)

// port0Data handles a data-VL packet addressed to the switch's LID (raw
// packets included): GMPs on
// QP1 (UD, Q_Key 0x80010000, a P_Key of port 0's table) for the GSI. The
// PerfMgt class goes to the PMA; other classes' requests are answered
// "method/attribute not supported" (0x000C), as Linux ib_mad answers a
// class nobody registered.
func (s *Switch) port0Data(in int, pkt []byte, p *proto.Packet, perr error, emit func(int, []byte)) {
	p0 := &s.ports[0]
	if p.BTH == nil || p.BTH.DestQP() != 1 {
		// Raw packets and other QPs: port 0 has only QP0 and QP1.
		s.drops.NoQP++
		return
	}
	if perr != nil || p.DETH == nil || p.Opcode() != proto.OpUDSendOnly || len(p.Payload) != proto.MADSize {
		s.drops.MAD++
		p0.cnt.QP1Dropped++
		return
	}
	if !s.consume(in, pkt, p) {
		return
	}
	if !p0.pkeyAllowed(p.BTH.PKey()) {
		s.drops.Partition++
		p0.cnt.QP1Dropped++
		p0.pi.PKeyViolations = proto.PMACounterAdd16(p0.pi.PKeyViolations, 1)
		return
	}
	if p.DETH.QKey() != qp1QKey {
		s.drops.MAD++
		p0.cnt.QP1Dropped++
		p0.pi.QKeyViolations = proto.PMACounterAdd16(p0.pi.QKeyViolations, 1)
		return
	}
	if !s.gsiProcess(p.Payload) {
		return
	}
	lrh := p.LRH
	dlid := lrh.SLID()
	out := s.replyPort(in, lrh.DLID(), dlid)
	if out == 0 {
		return
	}
	r := s.buildReply(&replyHdr{
		sl:     lrh.SL(),
		dlid:   dlid,
		pkey:   p.BTH.PKey(),
		destQP: p.DETH.SrcQP(),
		grh:    p.GRH,
	})
	if r == nil {
		return
	}
	rp, _ := proto.Parse(r, proto.LinkIB)
	s.sendData(0, out, r, rp.LRH, rp.BTH, emit)
}

// gsiProcess turns the GMP req into its answer in s.mad; it reports false
// when the MAD gets no answer (a response, a method without one, or a
// BaseVersion other than 1).
func (s *Switch) gsiProcess(req []byte) bool {
	copy(s.mad[:], req)
	m := proto.MAD(s.mad[:])
	if m.BaseVersion() != proto.MADBaseVersion || m.IsResponse() {
		s.drops.MAD++
		return false
	}
	status := uint16(proto.MADStatusMethodAttrUnsupported)
	if m.MgmtClass() == proto.MgmtClassPerfMgt {
		status = s.pma(proto.PerfMgtMAD(s.mad[:]))
	}
	if !m.MakeResponse(status) {
		s.drops.MAD++
		return false
	}
	return true
}

// pma answers a PerfMgt request in place (ibagent.ServePMA) and returns
// the status: ClassPortInfo (Get) and PortCounters (Get, and Set to clear
// the counters CounterSelect names) for any port 0..NumPorts, or for all
// of them summed with PortSelect 0xFF (IBA 16.1.3.5, AllPortSelect).
func (s *Switch) pma(m proto.PerfMgtMAD) uint16 { return ibagent.ServePMA(m, switchPMA{s}) }

// switchPMA is the switch's counters as its PMA reads them.
type switchPMA struct{ s *Switch }

func (p switchPMA) PortCounters(sel uint8, clear bool, csel uint16, csel2 uint8) (proto.PortCountersFields, bool) {
	s := p.s
	var c Counters
	switch {
	case sel == proto.PMAPortSelectAll:
		for i := range s.ports {
			if clear {
				s.ports[i].cnt.clearSelected(csel, csel2)
			}
			c = c.add(s.ports[i].cnt)
		}
	case int(sel) <= s.cfg.NumPorts:
		if clear {
			s.ports[sel].cnt.clearSelected(csel, csel2)
		}
		c = s.ports[sel].cnt
	default:
		return proto.PortCountersFields{}, false
	}
	return c.pmaFields(), true
}
