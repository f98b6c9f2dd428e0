package decode

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/PacketFive/hinic/internal/hilink/wire"
	"github.com/PacketFive/hinic/internal/proto"
)

// Record is one decoded frame as `hinic proto decode --output json` prints
// it. Keys of absent headers are left out.
type Record struct {
	Frame int    `json:"frame"`
	Len   int    `json:"len"`
	Link  string `json:"link"` // roce-v2, roce-v1, ib, hilink or other
	// FrameType refines Link: "ib-raw" and "mac-control" frames have Link
	// "ib" and "other".
	FrameType string `json:"frame_type"`
	Error     string `json:"error,omitempty"`

	SrcMAC string `json:"src_mac,omitempty"`
	DstMAC string `json:"dst_mac,omitempty"`
	VLAN   *int   `json:"vlan,omitempty"`
	PCP    *int   `json:"pcp,omitempty"`

	IPVersion int    `json:"ip_version,omitempty"`
	Src       string `json:"src,omitempty"`
	Dst       string `json:"dst,omitempty"`
	DSCP      *int   `json:"dscp,omitempty"`
	ECN       *int   `json:"ecn,omitempty"`
	TTL       *int   `json:"ttl,omitempty"`
	UDPSrc    *int   `json:"udp_sport,omitempty"`

	LRH *LRH `json:"lrh,omitempty"`
	GRH *GRH `json:"grh,omitempty"`

	Opcode      string  `json:"opcode,omitempty"`
	OpcodeValue *int    `json:"opcode_value,omitempty"`
	DestQP      *uint32 `json:"dest_qp,omitempty"`
	PSN         *uint32 `json:"psn,omitempty"`
	AckReq      *bool   `json:"ack_req,omitempty"`
	SE          *bool   `json:"se,omitempty"`
	PKey        *int    `json:"pkey,omitempty"`
	FECN        *bool   `json:"fecn,omitempty"`
	BECN        *bool   `json:"becn,omitempty"`
	Pad         *int    `json:"pad,omitempty"`

	// XRCSRQ is the XRCETH's SRQ number (XRC requests).
	XRCSRQ    *uint32    `json:"xrc_srq,omitempty"`
	RETH      *RETH      `json:"reth,omitempty"`
	AETH      *AETH      `json:"aeth,omitempty"`
	Atomic    *Atomic    `json:"atomic,omitempty"`
	AtomicAck *AtomicAck `json:"atomic_ack,omitempty"`
	DETH      *DETH      `json:"deth,omitempty"`
	Imm       *uint32    `json:"imm,omitempty"`
	IETH      *IETH      `json:"ieth,omitempty"`

	PayloadLen *int  `json:"payload_len,omitempty"`
	ICRCOK     *bool `json:"icrc_ok,omitempty"`
	VCRCOK     *bool `json:"vcrc_ok,omitempty"`

	MAD *MAD `json:"mad,omitempty"`
	PFC *PFC `json:"pfc,omitempty"`

	HiLink *HiLink `json:"hilink,omitempty"`
}

// HiLink is the header of a HiLink message (docs/hilink-wire.md). It is
// shown whenever the message holds a whole header, valid or not.
type HiLink struct {
	Version int    `json:"version"`
	Type    string `json:"type"` // hello, credit, write, write-resp, read-req, read-resp or unknown
	Last    bool   `json:"last"`
	Status  int    `json:"status"`
	Credits int    `json:"credits"`
	SrcGPU  int    `json:"src_gpu"`
	DstGPU  int    `json:"dst_gpu"`
	Tag     uint32 `json:"tag"`
	Length  uint32 `json:"length"`
	Address uint64 `json:"address"`

	typ wire.Type // Type, for summary
}

// LRH is the native IB local route header.
type LRH struct {
	VL     int `json:"vl"`
	SL     int `json:"sl"`
	LNH    int `json:"lnh"`
	DLID   int `json:"dlid"`
	SLID   int `json:"slid"`
	PktLen int `json:"pkt_len"`
}

// GRH is the global route header (native IB or RoCEv1).
type GRH struct {
	TClass    int    `json:"tclass"`
	FlowLabel int    `json:"flow_label"`
	HopLimit  int    `json:"hop_limit"`
	SGID      string `json:"sgid"`
	DGID      string `json:"dgid"`
}

// RETH is the RDMA extended transport header.
type RETH struct {
	VA     uint64 `json:"va"`
	RKey   uint32 `json:"rkey"`
	DMALen uint32 `json:"dma_len"`
}

// AETH is the ACK extended transport header; Type and Value decode the
// syndrome.
type AETH struct {
	Syndrome int    `json:"syndrome"`
	MSN      uint32 `json:"msn"`
	Type     string `json:"type"`
	Value    int    `json:"value"`
}

// Atomic is the atomic extended transport header.
type Atomic struct {
	VA      uint64 `json:"va"`
	RKey    uint32 `json:"rkey"`
	Swap    uint64 `json:"swap"`
	Compare uint64 `json:"compare"`
}

// AtomicAck is the atomic acknowledge extended transport header.
type AtomicAck struct {
	Orig uint64 `json:"orig"`
}

// DETH is the datagram extended transport header.
type DETH struct {
	QKey  uint32 `json:"qkey"`
	SrcQP uint32 `json:"src_qp"`
}

// IETH is the invalidate extended transport header.
type IETH struct {
	RKey uint32 `json:"rkey"`
}

// MAD summarises a management datagram carried to QP0 or QP1.
type MAD struct {
	Class     int    `json:"class"`
	Method    int    `json:"method"`
	AttrID    int    `json:"attr_id"`
	AttrMod   uint32 `json:"attr_mod"`
	TID       uint64 `json:"tid"`
	Status    int    `json:"status"`
	HopPtr    *int   `json:"hop_ptr,omitempty"`
	HopCount  *int   `json:"hop_count,omitempty"`
	Direction *int   `json:"direction,omitempty"`
}

// PFC is an 802.1Qbb priority flow control (or 802.3x PAUSE) frame.
type PFC struct {
	Opcode int      `json:"opcode"`
	Enable int      `json:"enable"`
	Time   []uint16 `json:"time"`
}

func ptr[T any](v T) *T { return &v }

// errorName maps the parsers' sentinel errors (proto's and HiLink's
// wire) to the short names printed in the error column.
func errorName(err error) string {
	switch {
	case errors.Is(err, proto.ErrTruncated), errors.Is(err, wire.ErrTruncated):
		return "truncated"
	case errors.Is(err, proto.ErrMalformed), errors.Is(err, wire.ErrMalformed):
		return "malformed"
	case errors.Is(err, proto.ErrUnknownOpcode):
		return "unknown opcode"
	case errors.Is(err, wire.ErrVersion):
		return "unsupported version"
	case errors.Is(err, wire.ErrType):
		return "unknown type"
	}
	return err.Error()
}

// Describe turns one frame into a Record. It parses frame as arriving on
// link; index is the 1-based frame number.
func Describe(index int, frame []byte, link Link) Record {
	if link == LinkHiLink {
		return describeHiLink(index, frame)
	}
	p, err := proto.Parse(frame, link.protoLink())
	r := Record{Frame: index, Len: len(frame), FrameType: p.Type.String()}
	switch p.Type {
	case proto.FrameRoCEv2, proto.FrameRoCEv1:
		r.Link = p.Type.String()
	case proto.FrameIB, proto.FrameIBRaw:
		r.Link = "ib"
	default:
		r.Link = "other"
		if link == LinkIB {
			r.Link = "ib"
		}
	}
	if err != nil {
		r.Error = errorName(err)
	}
	describeL2L3(&r, &p)
	if err != nil && !errors.Is(err, proto.ErrUnknownOpcode) {
		return r
	}
	if p.BTH != nil {
		describeTransport(&r, &p)
	}
	if p.MACControl != nil {
		mc := p.MACControl
		pfc := &PFC{Opcode: int(mc.Opcode())}
		switch {
		case mc.IsPFC():
			pfc.Enable = int(mc.PFCEnable())
			for i := range proto.PFCPriorities {
				pfc.Time = append(pfc.Time, mc.PFCTime(i))
			}
		case mc.IsPause():
			pfc.Time = []uint16{mc.PauseTime()}
		}
		r.PFC = pfc
	}
	if p.Type == proto.FrameIBRaw {
		r.PayloadLen = ptr(len(p.Payload))
	}
	if p.VCRC != nil && err == nil {
		r.VCRCOK = ptr(p.VCRCValid())
	}
	return r
}

// describeHiLink describes a HiLink message: its header's fields when it
// holds a whole header, and wire.Parse's verdict as the error.
func describeHiLink(index int, msg []byte) Record {
	r := Record{Frame: index, Len: len(msg), Link: "hilink", FrameType: "hilink"}
	if _, err := wire.Parse(msg); err != nil {
		r.Error = errorName(err)
	}
	if len(msg) < wire.HeaderSize {
		return r
	}
	h := wire.Header(msg)
	r.HiLink = &HiLink{Version: int(h.Version()), Type: h.Type().String(), Last: h.Last(), Status: int(h.Status()),
		Credits: int(h.Credits()), SrcGPU: int(h.SrcGPU()), DstGPU: int(h.DstGPU()), Tag: h.Tag(),
		Length: h.Length(), Address: h.Address(), typ: h.Type()}
	r.Opcode = r.HiLink.Type
	r.PayloadLen = ptr(len(msg) - wire.HeaderSize)
	return r
}

// summary is the DETAIL of a HiLink message: the fields its type uses
// (a credit has only Credits).
func (h *HiLink) summary() []string {
	var s []string
	if h.typ != wire.TypeCredit {
		s = append(s, fmt.Sprintf("gpu %d->%d tag=%d", h.SrcGPU, h.DstGPU, h.Tag))
		switch h.typ {
		case wire.TypeWrite, wire.TypeReadReq, wire.TypeReadResp:
			s = append(s, fmt.Sprintf("addr=%#x len=%d", h.Address, h.Length))
		case wire.TypeWriteResp:
			s = append(s, fmt.Sprintf("len=%d", h.Length))
		}
		if h.Last {
			s = append(s, "last")
		}
		if h.Status != 0 {
			s = append(s, fmt.Sprintf("status=%d", h.Status))
		}
	}
	if h.Credits != 0 || h.typ == wire.TypeCredit {
		s = append(s, fmt.Sprintf("credits=%d", h.Credits))
	}
	return s
}

func describeL2L3(r *Record, p *proto.Packet) {
	if e := p.Eth; e != nil {
		r.SrcMAC = net.HardwareAddr(e.Src()).String()
		r.DstMAC = net.HardwareAddr(e.Dst()).String()
		if e.HasVLAN() {
			r.VLAN, r.PCP = ptr(int(e.VLANID())), ptr(int(e.PCP()))
		}
	}
	if ip := p.IPv4; ip != nil {
		r.IPVersion = 4
		r.Src, r.Dst = net.IP(ip.Src()).String(), net.IP(ip.Dst()).String()
		r.DSCP, r.ECN, r.TTL = ptr(int(ip.DSCP())), ptr(int(ip.ECN())), ptr(int(ip.TTL()))
	}
	if ip := p.IPv6; ip != nil {
		r.IPVersion = 6
		r.Src, r.Dst = net.IP(ip.Src()).String(), net.IP(ip.Dst()).String()
		r.DSCP, r.ECN, r.TTL = ptr(int(ip.TrafficClass()>>2)), ptr(int(ip.ECN())), ptr(int(ip.HopLimit()))
	}
	if u := p.UDP; u != nil {
		r.UDPSrc = ptr(int(u.SrcPort()))
	}
	if l := p.LRH; l != nil {
		r.LRH = &LRH{VL: int(l.VL()), SL: int(l.SL()), LNH: int(l.LNH()), DLID: int(l.DLID()),
			SLID: int(l.SLID()), PktLen: int(l.PktLen())}
	}
	if g := p.GRH; g != nil {
		r.GRH = &GRH{TClass: int(g.TClass()), FlowLabel: int(g.FlowLabel()), HopLimit: int(g.HopLmt()),
			SGID: net.IP(g.SGID()).String(), DGID: net.IP(g.DGID()).String()}
	}
}

func describeTransport(r *Record, p *proto.Packet) {
	b := p.BTH
	op := b.Opcode()
	r.Opcode = op.String()
	r.OpcodeValue = ptr(int(op))
	r.DestQP = ptr(b.DestQP())
	r.PSN = ptr(uint32(b.PSN()))
	r.AckReq, r.SE = ptr(b.AckReq()), ptr(b.SE())
	r.PKey = ptr(int(b.PKey()))
	r.FECN, r.BECN = ptr(b.FECN()), ptr(b.BECN())
	r.Pad = ptr(b.PadCnt())
	if !p.HasTransport() {
		return
	}
	if h := p.XRCETH; h != nil {
		r.XRCSRQ = ptr(h.XRCSRQ())
	}
	if h := p.RETH; h != nil {
		r.RETH = &RETH{VA: h.VA(), RKey: h.RKey(), DMALen: h.DMALength()}
	}
	if h := p.AETH; h != nil {
		r.AETH = &AETH{Syndrome: int(h.Syndrome()), MSN: h.MSN(), Type: ackTypeName(h.Type()), Value: int(h.Value())}
	}
	if h := p.AtomicETH; h != nil {
		r.Atomic = &Atomic{VA: h.VA(), RKey: h.RKey(), Swap: h.SwapData(), Compare: h.CompareData()}
	}
	if h := p.AtomicAckETH; h != nil {
		r.AtomicAck = &AtomicAck{Orig: h.OrigRemoteData()}
	}
	if h := p.DETH; h != nil {
		r.DETH = &DETH{QKey: h.QKey(), SrcQP: h.SrcQP()}
	}
	if h := p.ImmDt; h != nil {
		r.Imm = ptr(h.Value())
	}
	if h := p.IETH; h != nil {
		r.IETH = &IETH{RKey: h.RKey()}
	}
	r.PayloadLen = ptr(len(p.Payload))
	r.ICRCOK = ptr(p.ICRCValid())
	if p.DETH != nil && b.DestQP() <= 1 {
		r.MAD = describeMAD(p.Payload)
	}
}

func ackTypeName(t proto.AckType) string {
	switch t {
	case proto.AckTypeACK:
		return "ack"
	case proto.AckTypeRNRNAK:
		return "rnr-nak"
	case proto.AckTypeNAK:
		return "nak"
	}
	return "reserved"
}

// summary is the DETAIL column of the table: the extension headers and
// checks in a compact form.
func (r *Record) summary() string {
	var s []string
	add := func(format string, a ...any) { s = append(s, fmt.Sprintf(format, a...)) }
	if r.Error != "" {
		add("error=%s", r.Error)
	}
	if r.VLAN != nil {
		add("vlan=%d pcp=%d", *r.VLAN, *r.PCP)
	}
	if r.ECN != nil && *r.ECN != 0 {
		add("ecn=%d", *r.ECN)
	}
	if r.LRH != nil {
		add("dlid=%d slid=%d vl=%d sl=%d", r.LRH.DLID, r.LRH.SLID, r.LRH.VL, r.LRH.SL)
	}
	if r.XRCSRQ != nil {
		add("xrc_srq=%#x", *r.XRCSRQ)
	}
	if r.RETH != nil {
		add("va=%#x rkey=%#x len=%d", r.RETH.VA, r.RETH.RKey, r.RETH.DMALen)
	}
	if r.AETH != nil {
		add("%s/%d msn=%d", r.AETH.Type, r.AETH.Value, r.AETH.MSN)
	}
	if r.Atomic != nil {
		add("va=%#x rkey=%#x swap=%#x cmp=%#x", r.Atomic.VA, r.Atomic.RKey, r.Atomic.Swap, r.Atomic.Compare)
	}
	if r.AtomicAck != nil {
		add("orig=%#x", r.AtomicAck.Orig)
	}
	if r.DETH != nil {
		add("qkey=%#x srcqp=%d", r.DETH.QKey, r.DETH.SrcQP)
	}
	if r.Imm != nil {
		add("imm=%#x", *r.Imm)
	}
	if r.IETH != nil {
		add("inv_rkey=%#x", r.IETH.RKey)
	}
	if r.MAD != nil {
		add("mad class=%#x method=%#x attr=%#x", r.MAD.Class, r.MAD.Method, r.MAD.AttrID)
	}
	if r.PFC != nil {
		add("pfc enable=%#02x time=%v", r.PFC.Enable, r.PFC.Time)
	}
	if r.VCRCOK != nil && !*r.VCRCOK {
		add("BAD-VCRC")
	}
	if r.HiLink != nil {
		s = append(s, r.HiLink.summary()...)
	}
	return strings.Join(s, " ")
}

// row is the table form of r, one cell per column of columns.
func (r *Record) row() []string {
	opt := func(v *uint32) string {
		if v == nil {
			return "-"
		}
		return strconv.FormatUint(uint64(*v), 10)
	}
	icrc := "-"
	if r.ICRCOK != nil {
		icrc = "ok"
		if !*r.ICRCOK {
			icrc = "BAD"
		}
	}
	ack := "-"
	if r.AckReq != nil && *r.AckReq {
		ack = "A"
	}
	op, plen := r.Opcode, "-"
	if op == "" {
		op = r.FrameType
	}
	if r.PayloadLen != nil {
		plen = strconv.Itoa(*r.PayloadLen)
	}
	return []string{strconv.Itoa(r.Frame), r.Link, op, opt(r.DestQP), opt(r.PSN), ack, plen, icrc, r.summary()}
}

var columns = []string{"FRAME", "LINK", "OPCODE", "QP", "PSN", "ACK", "LEN", "ICRC", "DETAIL"}
