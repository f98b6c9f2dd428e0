package proto

// PacketFields describes a whole RoCEv2, RoCEv1 or native IB packet to build
// with Encode. Encode fills in everything derivable: EtherType, lengths
// (IPv4 TotalLength, IPv6 PayloadLength, UDP Length, GRH PayLen, LRH PktLen),
// LRH LNH, BTH PadCnt, the pad bytes, the IPv4 header checksum, the ICRC and
// the VCRC. Which extension headers are written follows from BTH.Opcode.
type PacketFields struct {
	Link LinkType

	// Ethernet links.
	Eth    EthernetFields
	RoCEv1 bool // GRH directly after Ethernet instead of IP/UDP
	IPv6   bool // IPv6 instead of IPv4 (RoCEv2)
	IP4    IPv4Fields
	IP6    IPv6Fields
	UDP    UDPFields // DstPort 0 means RoCEv2Port

	// InfiniBand links.
	LRH    LRHFields
	Global bool // add a GRH (native IB)

	// GRH for native IB with Global set, and for RoCEv1.
	GRH GRHFields

	BTH BTHFields
	// XRCSRQ is the XRCETH's SRQ number (XRC requests).
	XRCSRQ    uint32
	DETH      DETHFields
	RETH      RETHFields
	AtomicETH AtomicETHFields
	AETH      AETHFields
	// AtomicAckData is the AtomicAckETH's original remote data.
	AtomicAckData uint64
	// Imm is the ImmDt value.
	Imm uint32
	// InvalidateRKey is the IETH's R_Key.
	InvalidateRKey uint32

	Payload []byte
}

// transportLen is BTH + extension headers + payload + pad + ICRC.
func (f *PacketFields) transportLen() int {
	info := f.BTH.Opcode.Info()
	n := len(f.Payload)
	return BTHSize + info.HeaderLen + n + padFor(n) + ICRCSize
}

func padFor(n int) int { return -n & 3 }

// Len returns the number of bytes Encode writes.
func (f *PacketFields) Len() int {
	n := f.transportLen()
	if f.Link == LinkIB {
		n += LRHSize + VCRCSize
		if f.Global {
			n += GRHSize
		}
		return n
	}
	n += f.Eth.Size()
	switch {
	case f.RoCEv1:
		n += GRHSize
	case f.IPv6:
		n += IPv6HeaderSize + UDPHeaderSize
	default:
		n += IPv4MinHeaderSize + UDPHeaderSize
	}
	return n
}

// Encode writes the packet into buf and returns its length. It fails with
// ErrUnknownOpcode for an opcode that has no table entry, ErrShortBuffer when
// buf is smaller than Len, and ErrMalformed when the payload does not fit
// the length fields. It does not allocate.
func (f *PacketFields) Encode(buf []byte) (int, error) {
	info := f.BTH.Opcode.Info()
	if !info.Valid {
		return 0, ErrUnknownOpcode
	}
	total := f.Len()
	if len(buf) < total {
		return 0, ErrShortBuffer
	}
	b := buf[:total]
	tl := f.transportLen()
	off, icrcStart := 0, 0
	if f.Link == LinkIB {
		if total-VCRCSize > LRHMaxPacketWords*4 {
			return 0, ErrMalformed
		}
		lrh := f.LRH
		lrh.LNH = LNHIBALocal
		if f.Global {
			lrh.LNH = LNHIBAGlobal
		}
		lrh.PktLen = uint16((total - VCRCSize) / 4)
		LRH(b).Encode(&lrh)
		off = LRHSize
		if f.Global {
			g := f.GRH
			g.PayLen = uint16(tl)
			g.NxtHdr = GRHNextHeaderIBA
			GRH(b[off:]).Encode(&g)
			off += GRHSize
		}
	} else {
		eth := f.Eth
		switch {
		case f.RoCEv1:
			eth.EtherType = EtherTypeRoCEv1
		case f.IPv6:
			eth.EtherType = EtherTypeIPv6
		default:
			eth.EtherType = EtherTypeIPv4
		}
		Ethernet(b).Encode(&eth)
		off = eth.Size()
		icrcStart = off
		switch {
		case f.RoCEv1:
			g := f.GRH
			g.PayLen = uint16(tl)
			g.NxtHdr = GRHNextHeaderIBA
			GRH(b[off:]).Encode(&g)
			off += GRHSize
		case f.IPv6:
			if UDPHeaderSize+tl > 0xFFFF {
				return 0, ErrMalformed
			}
			ip := f.IP6
			ip.PayloadLength = uint16(UDPHeaderSize + tl)
			ip.NextHeader = IPProtocolUDP
			IPv6(b[off:]).Encode(&ip)
			off += IPv6HeaderSize
			off = f.encodeUDP(b, off, tl)
		default:
			if IPv4MinHeaderSize+UDPHeaderSize+tl > 0xFFFF {
				return 0, ErrMalformed
			}
			ip := f.IP4
			ip.TotalLength = uint16(IPv4MinHeaderSize + UDPHeaderSize + tl)
			ip.Protocol = IPProtocolUDP
			IPv4(b[off:]).Encode(&ip)
			off += IPv4MinHeaderSize
			off = f.encodeUDP(b, off, tl)
		}
	}
	off = f.encodeTransport(b, off, info)
	icrc := off
	switch {
	case f.Link == LinkIB:
		PutICRC(b[icrc:], ICRCIB(b[:icrc]))
		PutVCRC(b[icrc+ICRCSize:], VCRC(b[:icrc+ICRCSize]))
	case f.RoCEv1:
		PutICRC(b[icrc:], icrcAfterLRH(b[icrcStart:icrc], true))
	default:
		PutICRC(b[icrc:], ICRCRoCEv2(b[icrcStart:icrc]))
	}
	return total, nil
}

func (f *PacketFields) encodeUDP(b []byte, off, tl int) int {
	u := f.UDP
	if u.DstPort == 0 {
		u.DstPort = RoCEv2Port
	}
	u.Length = uint16(UDPHeaderSize + tl)
	UDP(b[off:]).Encode(&u)
	return off + UDPHeaderSize
}

// encodeTransport writes BTH, extension headers, payload and pad at off and
// returns where the ICRC goes.
func (f *PacketFields) encodeTransport(b []byte, off int, info *OpcodeInfo) int {
	bth := f.BTH
	pad := padFor(len(f.Payload))
	bth.PadCnt = uint8(pad)
	BTH(b[off:]).Encode(&bth)
	off += BTHSize
	h := info.Headers
	if h&HdrXRCETH != 0 {
		XRCETH(b[off:]).Encode(f.XRCSRQ)
		off += XRCETHSize
	}
	if h&HdrDETH != 0 {
		DETH(b[off:]).Encode(&f.DETH)
		off += DETHSize
	}
	if h&HdrRETH != 0 {
		RETH(b[off:]).Encode(&f.RETH)
		off += RETHSize
	}
	if h&HdrAtomicETH != 0 {
		AtomicETH(b[off:]).Encode(&f.AtomicETH)
		off += AtomicETHSize
	}
	if h&HdrAETH != 0 {
		AETH(b[off:]).Encode(&f.AETH)
		off += AETHSize
	}
	if h&HdrAtomicAckETH != 0 {
		AtomicAckETH(b[off:]).Encode(f.AtomicAckData)
		off += AtomicAckETHSize
	}
	if h&HdrImmDt != 0 {
		ImmDt(b[off:]).Encode(f.Imm)
		off += ImmDtSize
	}
	if h&HdrIETH != 0 {
		IETH(b[off:]).Encode(f.InvalidateRKey)
		off += IETHSize
	}
	if h&HdrCNPReserved != 0 {
		clear(b[off : off+CNPReservedSize])
		off += CNPReservedSize
	}
	off += copy(b[off:], f.Payload)
	clear(b[off : off+pad])
	return off + pad
}

// SetCNP turns f into a RoCEv2 congestion notification packet for the
// requester QP destQP (IBTA Annex A17.9.3): opcode 0x81, BECN set, PSN 0,
// no AckReq, 16 reserved zero bytes. Addressing fields are left as they are.
func (f *PacketFields) SetCNP(destQP uint32, pkey uint16) {
	f.BTH = BTHFields{Opcode: OpCNP, PKey: pkey, BECN: true, DestQP: destQP}
	f.Payload = nil
}
