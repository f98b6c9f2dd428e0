package device

import (
	"unsafe"

	"github.com/PacketFive/hinic/internal/rdma"
)

// Raw packet QPs and flow steering (ABI 1.16, HICAIN_CAP_RAW). The
// engine sends a raw QP's frames and steers frames to raw QPs by their
// flows (rdma/raw.go); the backend adds the guest's side: the
// CREATE_FLOW and DESTROY_FLOW commands, per-guest limits, the vNIC's
// source checks on the frames raw QPs send to the wire (l2Allowed, as
// for the netdev's), and, in the fabric receive path (VNIC.deliver),
// the frames flows take from the netdev.

// Per-guest limits of raw packet QPs and flows, besides the memory
// budget: a flow costs every frame the vNIC receives a comparison, so
// their number is bounded too.
const (
	MaxRawQP = 64
	MaxFlow  = 256
)

// gflow is a guest flow: an engine flow on the raw QP qpn.
type gflow struct {
	flow *rdma.Flow
	qpn  uint32
}

var gflowSize = int64(unsafe.Sizeof(gflow{}))

func flowCost() int64 { return gflowSize + rdma.FlowMemory() }

func (s *session) createFlow(a *CmdCreateFlowArgs, out *AdminCQE) uint16 {
	q, ok := s.qps[a.QPN]
	if !ok {
		return StENOENT
	}
	if q.typ != rdma.QPTypeRawPacket {
		return StEOPNOTSUPP // UD flows (ib_core allows them) are not steered
	}
	spec, st := flowSpecFromABI(a)
	if st != StOK {
		return st
	}
	if len(s.flows) >= MaxFlow || !s.mem.charge(flowCost()) {
		return StENOMEM
	}
	f, err := q.qp.CreateFlow(spec)
	if err != nil {
		s.mem.refund(flowCost())
		return status(err)
	}
	h := nextHandle(&s.nextFlow, s.flows)
	s.flows[h] = &gflow{flow: f, qpn: a.QPN}
	q.flows++
	out.Handle = h
	return StOK
}

func (s *session) destroyFlow(h uint32) uint16 {
	f, ok := s.flows[h]
	if !ok {
		return StENOENT
	}
	if err := f.flow.Destroy(); err != nil {
		return status(err)
	}
	delete(s.flows, h)
	if q := s.qps[f.qpn]; q != nil {
		q.flows--
	}
	s.mem.refund(flowCost())
	return StOK
}

// flowSpecFromABI checks a CREATE_FLOW command and gives the engine's
// spec: EINVAL for an unknown header bit, a port other than 1, both IP
// families, both TCP and UDP, or bits in reserved fields.
func flowSpecFromABI(a *CmdCreateFlowArgs) (rdma.FlowSpec, uint16) {
	var sp rdma.FlowSpec
	const known = FlowEth | FlowIPv4 | FlowIPv6 | FlowTCP | FlowUDP
	m := a.Match
	switch {
	case m&^known != 0, a.Port != 1,
		m&(FlowIPv4|FlowIPv6) == FlowIPv4|FlowIPv6, m&(FlowTCP|FlowUDP) == FlowTCP|FlowUDP:
		return sp, StEINVAL
	}
	// Reserved words must be zero, so that a later minor may use them.
	raw := AsBytes(a)
	for _, r := range [][2]uintptr{{unsafe.Offsetof(a.Port) + 1, 5}, {unsafe.Offsetof(a.IPProtoMask) + 1, 2}} {
		for _, b := range raw[r[0] : r[0]+r[1]] {
			if b != 0 {
				return sp, StEINVAL
			}
		}
	}
	sp.Priority = a.Priority
	if m&FlowEth != 0 {
		sp.Eth = &rdma.FlowEth{DstMAC: a.DMAC, DstMACMask: a.DMACMask, SrcMAC: a.SMAC, SrcMACMask: a.SMACMask,
			EtherType: be16(a.EtherType), EtherTypeMask: be16(a.EtherTypeMask),
			VLANTag: be16(a.VLANTag), VLANMask: be16(a.VLANTagMask)}
	}
	switch {
	case m&FlowIPv4 != 0:
		// An IPv4 address is the first 4 bytes; the rest must be zero.
		for _, b := range [][16]byte{a.SrcIP, a.SrcIPMask, a.DstIP, a.DstIPMask} {
			if [12]byte(b[4:]) != ([12]byte{}) {
				return sp, StEINVAL
			}
		}
		sp.IPv4 = &rdma.FlowIPv4{Src: [4]byte(a.SrcIP[:4]), SrcMask: [4]byte(a.SrcIPMask[:4]),
			Dst: [4]byte(a.DstIP[:4]), DstMask: [4]byte(a.DstIPMask[:4]), Proto: a.IPProto, ProtoMask: a.IPProtoMask}
	case m&FlowIPv6 != 0:
		sp.IPv6 = &rdma.FlowIPv6{Src: a.SrcIP, SrcMask: a.SrcIPMask, Dst: a.DstIP, DstMask: a.DstIPMask,
			NextHdr: a.IPProto, NextHdrMask: a.IPProtoMask}
	}
	if m&(FlowTCP|FlowUDP) != 0 {
		sp.L4 = &rdma.FlowL4{Proto: rdma.ProtoUDP, SrcPort: be16(a.SrcPort), SrcPortMask: be16(a.SrcPortMask),
			DstPort: be16(a.DstPort), DstPortMask: be16(a.DstPortMask)}
		if m&FlowTCP != 0 {
			sp.L4.Proto = rdma.ProtoTCP
		}
	}
	return sp, StOK
}

func be16(b [2]byte) uint16 { return uint16(b[0])<<8 | uint16(b[1]) }

// setRSS gives an RSS QP (a raw QP created without queues) its
// indirection table of work queues (raw QPs created without an SQ) and
// its hash, once.
func (s *session) setRSS(a *CmdSetRSSArgs) uint16 {
	q, ok := s.qps[a.QPN]
	if !ok {
		return StENOENT
	}
	if q.typ != rdma.QPTypeRawPacket || !q.noSQ || !q.noRQ || q.rssTable != nil || a.LogTable > 5 {
		return StEINVAL
	}
	n := 1 << a.LogTable
	table := make([]*gqp, n)
	wqs := make([]*rdma.QP, n)
	for i, qpn := range a.Table[:n] {
		w, ok := s.qps[qpn]
		if !ok {
			return StENOENT
		}
		if w.typ != rdma.QPTypeRawPacket || !w.noSQ || w.noRQ {
			return StEINVAL
		}
		table[i], wqs[i] = w, w.qp
	}
	if err := q.qp.SetRSS(rdma.RSSConfig{Fields: a.Fields, Key: a.Key, Table: wqs}); err != nil {
		return status(err)
	}
	q.rssTable = table
	for _, w := range table {
		w.rssUsers++
	}
	return StOK
}
