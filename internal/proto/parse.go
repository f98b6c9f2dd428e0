package proto

// LinkType is the link layer a frame arrived on. A frame alone does not say
// whether it starts with an Ethernet header or an IB LRH, so the caller (a
// port, or a capture's link type) tells Parse.
type LinkType uint8

// Link layers.
const (
	LinkEthernet LinkType = iota
	LinkIB
)

// String returns "ethernet" or "ib".
func (l LinkType) String() string {
	if l == LinkIB {
		return "ib"
	}
	return "ethernet"
}

// FrameType classifies a parsed frame.
type FrameType uint8

// Frame types.
const (
	FrameOther      FrameType = iota // an Ethernet frame HiNIC does not interpret
	FrameRoCEv2                      // Ethernet / IPv4 or IPv6 / UDP 4791 / BTH ...
	FrameRoCEv1                      // Ethernet / GRH (EtherType 0x8915) / BTH ...
	FrameIB                          // LRH / [GRH] / BTH ... / ICRC / VCRC
	FrameIBRaw                       // LRH with LNH raw or IPv6-raw / ... / VCRC
	FrameMACControl                  // 802.3x PAUSE or 802.1Qbb PFC
)

// String returns the frame type's short name as `hinic proto decode` prints
// it ("roce-v2", "roce-v1", "ib", "ib-raw", "mac-control", "other").
func (t FrameType) String() string {
	switch t {
	case FrameRoCEv2:
		return "roce-v2"
	case FrameRoCEv1:
		return "roce-v1"
	case FrameIB:
		return "ib"
	case FrameIBRaw:
		return "ib-raw"
	case FrameMACControl:
		return "mac-control"
	}
	return "other"
}

// Packet holds views of the headers of one frame, as Parse found them. A
// header that is absent is nil. Every view shares the frame's buffer.
type Packet struct {
	Type FrameType

	Eth  Ethernet
	IPv4 IPv4
	IPv6 IPv6
	UDP  UDP
	LRH  LRH
	GRH  GRH

	BTH          BTH
	XRCETH       XRCETH
	DETH         DETH
	RETH         RETH
	AtomicETH    AtomicETH
	AETH         AETH
	AtomicAckETH AtomicAckETH
	ImmDt        ImmDt
	IETH         IETH

	// Payload is the message payload, without pad (for a raw IB packet:
	// everything between LRH and VCRC).
	Payload []byte
	// Pad is the 0-3 pad bytes between payload and ICRC.
	Pad  []byte
	ICRC []byte
	VCRC []byte

	// MACControl is the MAC Control PDU (opcode onwards) of a PAUSE or PFC
	// frame.
	MACControl MACControl

	// icrcStart..icrcEnd is the span of frame the ICRC covers (IP header or
	// LRH through pad).
	icrcStart, icrcEnd int
	frame              []byte
}

// Parse classifies frame, which arrived on a link of type link, and returns
// views of its headers. It validates every length once, so the views may be
// used without further checks. It does not allocate and never panics.
//
// Frames that are not RDMA traffic (ARP, plain IP, LLDP, ...) parse without
// error as FrameOther. Errors are ErrTruncated, ErrMalformed and
// ErrUnknownOpcode; on error the Packet still holds the headers parsed
// before the fault (for example the BTH of an unknown opcode).
//
// Parse does not check the ICRC or VCRC: call ICRCValid and VCRCValid.
func Parse(frame []byte, link LinkType) (Packet, error) {
	var p Packet
	p.frame = frame
	var err error
	if link == LinkIB {
		err = p.parseIB(frame)
	} else {
		err = p.parseEthernet(frame)
	}
	return p, err
}

func (p *Packet) parseEthernet(frame []byte) error {
	eth, err := ParseEthernet(frame)
	if err != nil {
		return err
	}
	p.Eth = eth
	l3 := len(eth)
	switch eth.EtherType() {
	case EtherTypeIPv4:
		ip, err := ParseIPv4(frame[l3:])
		if ip == nil {
			return err
		}
		p.IPv4 = ip
		if ip.Protocol() != IPProtocolUDP || ip.FragmentOffset() != 0 || ip.Flags()&1 != 0 {
			return err
		}
		if err != nil {
			return p.classifyTruncated(l3 + len(ip))
		}
		return p.parseUDP(l3, l3+len(ip), l3+int(ip.TotalLength()))
	case EtherTypeIPv6:
		ip, err := ParseIPv6(frame[l3:])
		if ip == nil {
			return err
		}
		p.IPv6 = ip
		if ip.NextHeader() != IPProtocolUDP {
			return err
		}
		if err != nil {
			return p.classifyTruncated(l3 + IPv6HeaderSize)
		}
		return p.parseUDP(l3, l3+IPv6HeaderSize, l3+IPv6HeaderSize+int(ip.PayloadLength()))
	case EtherTypeRoCEv1:
		if len(frame) < l3+GRHSize {
			return ErrTruncated
		}
		grh := GRH(frame[l3 : l3+GRHSize])
		p.GRH = grh
		end := l3 + GRHSize + int(grh.PayLen())
		if grh.IPVer() != 6 || grh.NxtHdr() != GRHNextHeaderIBA {
			return ErrMalformed
		}
		if len(frame) < end {
			return ErrTruncated
		}
		p.Type = FrameRoCEv1
		p.icrcStart = l3
		return p.parseTransport(l3+GRHSize, end)
	case EtherTypeMACControl:
		if len(frame) < l3+2 {
			return ErrTruncated
		}
		mc := MACControl(frame[l3:])
		if err := mc.validate(); err != nil {
			return err
		}
		p.MACControl = mc
		p.Type = FrameMACControl
	}
	return nil
}

// classifyTruncated handles an IP packet whose capture ends early: it
// records the UDP header and, for RoCEv2, the type and a complete BTH if the
// bytes are there, so that tools can say what was cut; it never sets the
// payload or ICRC views. It always returns ErrTruncated.
func (p *Packet) classifyTruncated(udp int) error {
	f := p.frame
	if len(f)-udp < UDPHeaderSize {
		return ErrTruncated
	}
	p.UDP = UDP(f[udp : udp+UDPHeaderSize])
	if p.UDP.DstPort() == RoCEv2Port {
		p.Type = FrameRoCEv2
		if bth := udp + UDPHeaderSize; len(f)-bth >= BTHSize {
			p.BTH = BTH(f[bth : bth+BTHSize])
		}
	}
	return ErrTruncated
}

// parseUDP looks at the UDP datagram that spans frame[udp:end]; ip is where
// the IP header starts.
func (p *Packet) parseUDP(ip, udp, end int) error {
	f := p.frame
	if end-udp < UDPHeaderSize {
		return ErrTruncated
	}
	u := UDP(f[udp : udp+UDPHeaderSize])
	p.UDP = u
	if u.DstPort() != RoCEv2Port {
		return nil
	}
	p.Type = FrameRoCEv2
	ul := int(u.Length())
	if ul < UDPHeaderSize || ul > end-udp {
		return ErrMalformed
	}
	p.icrcStart = ip
	return p.parseTransport(udp+UDPHeaderSize, udp+ul)
}

func (p *Packet) parseIB(frame []byte) error {
	if len(frame) < LRHSize {
		return ErrTruncated
	}
	lrh := LRH(frame[:LRHSize])
	p.LRH = lrh
	end := int(lrh.PktLen()) * 4 // through the ICRC
	if end+VCRCSize != len(frame) {
		if end+VCRCSize > len(frame) {
			return ErrTruncated
		}
		return ErrMalformed
	}
	if end < LRHSize {
		return ErrMalformed
	}
	p.VCRC = frame[end : end+VCRCSize]
	switch lrh.LNH() {
	case LNHRaw, LNHIPv6Raw:
		p.Type = FrameIBRaw
		p.Payload = frame[LRHSize:end]
		return nil
	case LNHIBAGlobal:
		if end < LRHSize+GRHSize {
			return ErrTruncated
		}
		grh := GRH(frame[LRHSize : LRHSize+GRHSize])
		p.GRH = grh
		if grh.IPVer() != 6 || grh.NxtHdr() != GRHNextHeaderIBA || int(grh.PayLen()) != end-LRHSize-GRHSize {
			return ErrMalformed
		}
		p.Type = FrameIB
		return p.parseTransport(LRHSize+GRHSize, end)
	}
	p.Type = FrameIB
	return p.parseTransport(LRHSize, end)
}

// parseTransport parses frame[start:end], which holds BTH, extension
// headers, payload, pad and ICRC.
func (p *Packet) parseTransport(start, end int) error {
	f := p.frame
	if end-start < BTHSize {
		return ErrTruncated
	}
	bth := BTH(f[start : start+BTHSize])
	p.BTH = bth
	info := bth.Opcode().Info()
	if !info.Valid {
		return ErrUnknownOpcode
	}
	off := start + BTHSize
	if end-off < info.HeaderLen+ICRCSize {
		return ErrTruncated
	}
	h := info.Headers
	take := func(n int) []byte { b := f[off : off+n]; off += n; return b }
	if h&HdrXRCETH != 0 {
		p.XRCETH = XRCETH(take(XRCETHSize))
	}
	if h&HdrDETH != 0 {
		p.DETH = DETH(take(DETHSize))
	}
	if h&HdrRETH != 0 {
		p.RETH = RETH(take(RETHSize))
	}
	if h&HdrAtomicETH != 0 {
		p.AtomicETH = AtomicETH(take(AtomicETHSize))
	}
	if h&HdrAETH != 0 {
		p.AETH = AETH(take(AETHSize))
	}
	if h&HdrAtomicAckETH != 0 {
		p.AtomicAckETH = AtomicAckETH(take(AtomicAckETHSize))
	}
	if h&HdrImmDt != 0 {
		p.ImmDt = ImmDt(take(ImmDtSize))
	}
	if h&HdrIETH != 0 {
		p.IETH = IETH(take(IETHSize))
	}
	if h&HdrCNPReserved != 0 {
		off += CNPReservedSize // reserved: ignored on receipt
	}
	icrc := end - ICRCSize
	pad := bth.PadCnt()
	if icrc-off < pad || (!info.Payload && icrc != off) {
		return ErrMalformed
	}
	p.Payload = f[off : icrc-pad]
	p.Pad = f[icrc-pad : icrc]
	p.ICRC = f[icrc:end]
	p.icrcEnd = icrc
	return nil
}

// Opcode returns the BTH opcode, or 0 when the frame has no BTH.
func (p *Packet) Opcode() Opcode {
	if p.BTH == nil {
		return 0
	}
	return p.BTH.Opcode()
}

// HasTransport reports whether the frame carries an IBA transport packet
// (RoCEv2, RoCEv1 or native IB with a BTH) that parsed completely.
func (p *Packet) HasTransport() bool { return p.ICRC != nil }

// ComputeICRC computes the ICRC the frame should carry. It returns 0 when
// the frame has no complete transport packet.
func (p *Packet) ComputeICRC() uint32 {
	if !p.HasTransport() {
		return 0
	}
	span := p.frame[p.icrcStart:p.icrcEnd]
	switch p.Type {
	case FrameRoCEv2:
		return ICRCRoCEv2(span)
	case FrameRoCEv1:
		// RoCEv1 is an IB global packet without its LRH: the same rule
		// with the GRH in front (IBTA Annex A16.8).
		return icrcAfterLRH(span, true)
	}
	return ICRCIB(span)
}

// ICRCValid reports whether the frame's ICRC is correct.
func (p *Packet) ICRCValid() bool {
	return p.HasTransport() && GetICRC(p.ICRC) == p.ComputeICRC()
}

// VCRCValid reports whether a native IB frame's VCRC is correct.
func (p *Packet) VCRCValid() bool {
	if p.VCRC == nil {
		return false
	}
	n := len(p.frame) - VCRCSize
	return GetVCRC(p.frame[n:]) == VCRC(p.frame[:n])
}

// TransportBytes returns the span from the BTH through the ICRC (nil when
// there is no transport packet): what a RoCEv2 to IB gateway would carry
// unchanged.
func (p *Packet) TransportBytes() []byte {
	if !p.HasTransport() {
		return nil
	}
	start := cap(p.frame) - cap(p.BTH)
	return p.frame[start : p.icrcEnd+ICRCSize]
}
