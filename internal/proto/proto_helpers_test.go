package proto

import (
	"encoding/binary"
	"math/rand/v2"
)

// fieldsOf rebuilds the PacketFields a parsed packet was encoded from. It is
// the inverse of PacketFields.Encode for canonical frames.
func fieldsOf(p *Packet) PacketFields {
	var f PacketFields
	if p.LRH != nil {
		f.Link = LinkIB
		f.LRH = LRHFields{VL: p.LRH.VL(), LVer: p.LRH.LVer(), SL: p.LRH.SL(), DLID: p.LRH.DLID(), SLID: p.LRH.SLID()}
		f.Global = p.GRH != nil
	} else {
		e := p.Eth
		copy(f.Eth.Dst[:], e.Dst())
		copy(f.Eth.Src[:], e.Src())
		if e.HasVLAN() {
			f.Eth.VLAN, f.Eth.PCP, f.Eth.DEI, f.Eth.VLANID = true, e.PCP(), e.DEI(), e.VLANID()
		}
		switch {
		case p.Type == FrameRoCEv1:
			f.RoCEv1 = true
		case p.IPv6 != nil:
			f.IPv6 = true
			ip := p.IPv6
			f.IP6 = IPv6Fields{TrafficClass: ip.TrafficClass(), FlowLabel: ip.FlowLabel(), HopLimit: ip.HopLimit()}
			copy(f.IP6.Src[:], ip.Src())
			copy(f.IP6.Dst[:], ip.Dst())
		default:
			ip := p.IPv4
			f.IP4 = IPv4Fields{TOS: ip.TOS(), ID: ip.ID(), Flags: ip.Flags(), FragOffset: ip.FragmentOffset(), TTL: ip.TTL()}
			copy(f.IP4.Src[:], ip.Src())
			copy(f.IP4.Dst[:], ip.Dst())
		}
		if p.UDP != nil {
			f.UDP = UDPFields{SrcPort: p.UDP.SrcPort(), DstPort: p.UDP.DstPort(), Checksum: p.UDP.Checksum()}
		}
	}
	if p.GRH != nil {
		g := p.GRH
		f.GRH = GRHFields{TClass: g.TClass(), FlowLabel: g.FlowLabel(), HopLmt: g.HopLmt()}
		copy(f.GRH.SGID[:], g.SGID())
		copy(f.GRH.DGID[:], g.DGID())
	}
	b := p.BTH
	f.BTH = BTHFields{Opcode: b.Opcode(), SE: b.SE(), MigReq: b.MigReq(), TVer: b.TVer(), PKey: b.PKey(),
		FECN: b.FECN(), BECN: b.BECN(), DestQP: b.DestQP(), AckReq: b.AckReq(), PSN: b.PSN()}
	if p.XRCETH != nil {
		f.XRCSRQ = p.XRCETH.XRCSRQ()
	}
	if p.DETH != nil {
		f.DETH = DETHFields{QKey: p.DETH.QKey(), SrcQP: p.DETH.SrcQP()}
	}
	if p.RETH != nil {
		f.RETH = RETHFields{VA: p.RETH.VA(), RKey: p.RETH.RKey(), DMALength: p.RETH.DMALength()}
	}
	if p.AtomicETH != nil {
		a := p.AtomicETH
		f.AtomicETH = AtomicETHFields{VA: a.VA(), RKey: a.RKey(), SwapData: a.SwapData(), CompareData: a.CompareData()}
	}
	if p.AETH != nil {
		f.AETH = AETHFields{Syndrome: p.AETH.Syndrome(), MSN: p.AETH.MSN()}
	}
	if p.AtomicAckETH != nil {
		f.AtomicAckData = p.AtomicAckETH.OrigRemoteData()
	}
	if p.ImmDt != nil {
		f.Imm = p.ImmDt.Value()
	}
	if p.IETH != nil {
		f.InvalidateRKey = p.IETH.RKey()
	}
	f.Payload = p.Payload
	return f
}

// encapsulations are the five ways a transport packet travels.
var encapsulations = []struct {
	name string
	set  func(*PacketFields)
}{
	{"roce-v2-ipv4", func(f *PacketFields) {}},
	{"roce-v2-ipv4-vlan", func(f *PacketFields) { f.Eth.VLAN, f.Eth.VLANID, f.Eth.PCP = true, 42, 3 }},
	{"roce-v2-ipv6", func(f *PacketFields) { f.IPv6 = true }},
	{"roce-v1", func(f *PacketFields) { f.RoCEv1 = true }},
	{"ib-local", func(f *PacketFields) { f.Link = LinkIB }},
	{"ib-global", func(f *PacketFields) { f.Link, f.Global = LinkIB, true }},
}

// samplePacket returns realistic fields for op with a payload of n bytes.
func samplePacket(op Opcode, n int) PacketFields {
	payload := make([]byte, n)
	for i := range payload {
		payload[i] = byte(i*7 + 1)
	}
	f := PacketFields{
		Eth: EthernetFields{Dst: [6]byte{2, 0, 0, 0, 0, 2}, Src: [6]byte{2, 0, 0, 0, 0, 1}},
		IP4: IPv4Fields{TOS: 26<<2 | ECNECT0, ID: 0x1234, Flags: 2, TTL: 64, Src: [4]byte{10, 42, 0, 1}, Dst: [4]byte{10, 42, 0, 2}},
		IP6: IPv6Fields{TrafficClass: 26<<2 | ECNECT0, FlowLabel: 0xABCDE, HopLimit: 64,
			Src: [16]byte{0xfe, 0x80, 15: 1}, Dst: [16]byte{0xfe, 0x80, 15: 2}},
		UDP: UDPFields{SrcPort: 0xC123},
		LRH: LRHFields{VL: 0, SL: 0, DLID: 5, SLID: 4},
		GRH: GRHFields{TClass: 0x20, FlowLabel: 0x12345, HopLmt: 255,
			SGID: [16]byte{0xfe, 0x80, 8: 0x02, 15: 1}, DGID: [16]byte{0xfe, 0x80, 8: 0x02, 15: 2}},
		BTH:            BTHFields{Opcode: op, SE: true, PKey: PKeyDefault, DestQP: 0x000011, AckReq: true, PSN: 0xFFFFFE},
		XRCSRQ:         0x00ABCD,
		DETH:           DETHFields{QKey: 0x11111111, SrcQP: 0x000022},
		RETH:           RETHFields{VA: 0x00007F00DEADB000, RKey: 0x1234, DMALength: 4096},
		AtomicETH:      AtomicETHFields{VA: 0x7F0000001000, RKey: 0x4321, SwapData: 0x0102030405060708, CompareData: 0x1112131415161718},
		AETH:           AETHFields{Syndrome: MakeSyndrome(AckTypeACK, AETHCreditInvalid), MSN: 0x000777},
		AtomicAckData:  0xCAFEBABE00000001,
		Imm:            0xA1B2C3D4,
		InvalidateRKey: 0x5555,
	}
	if op.Info().Payload {
		f.Payload = payload
	}
	if op == OpCNP {
		f.SetCNP(0xD2, PKeyDefault)
	}
	return f
}

// validOpcodes lists every opcode of the table.
func validOpcodes() []Opcode {
	var ops []Opcode
	for i := range 256 {
		if Opcode(i).Valid() {
			ops = append(ops, Opcode(i))
		}
	}
	return ops
}

// refCRC32 is a bit-at-a-time IEEE CRC-32 written from the definition,
// independent of hash/crc32.
func refCRC32(data []byte) uint32 {
	c := uint32(0xFFFFFFFF)
	for _, x := range data {
		c ^= uint32(x)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ 0xEDB88320
			} else {
				c >>= 1
			}
		}
	}
	return ^c
}

// refICRC computes the ICRC the slow way: copy the covered span, mask it
// byte by byte from the rules, prefix eight 0xFF and run refCRC32.
func refICRC(p *Packet) uint32 {
	span := append([]byte(nil), p.frame[p.icrcStart:p.icrcEnd]...)
	bth := cap(p.frame) - cap(p.BTH) - p.icrcStart
	switch p.Type {
	case FrameRoCEv2:
		if span[0]>>4 == 4 {
			span[1], span[8], span[10], span[11] = 0xFF, 0xFF, 0xFF, 0xFF
		} else {
			span[0] |= 0x0F
			span[1], span[2], span[3], span[7] = 0xFF, 0xFF, 0xFF, 0xFF
		}
		span[bth-2], span[bth-1] = 0xFF, 0xFF // UDP checksum
	case FrameIB:
		for i := range LRHSize {
			span[i] = 0xFF
		}
		span = span[LRHSize:]
		bth -= LRHSize
		if p.GRH != nil {
			span[0] |= 0x0F
			span[1], span[2], span[3], span[7] = 0xFF, 0xFF, 0xFF, 0xFF
		}
	case FrameRoCEv1:
		span[0] |= 0x0F
		span[1], span[2], span[3], span[7] = 0xFF, 0xFF, 0xFF, 0xFF
	}
	span[bth+4] = 0xFF
	return refCRC32(append([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, span...))
}

// refVCRC is a bit-at-a-time CRC-16 (poly 0x100B reflected, init 0xFFFF,
// final inversion) written from the definition.
func refVCRC(data []byte) uint16 {
	c := uint16(0xFFFF)
	for _, x := range data {
		c ^= uint16(x)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ 0xD008
			} else {
				c >>= 1
			}
		}
	}
	return ^c
}

func randomFields(r *rand.Rand) PacketFields {
	ops := validOpcodes()
	op := ops[r.IntN(len(ops))]
	f := samplePacket(op, r.IntN(300))
	encapsulations[r.IntN(len(encapsulations))].set(&f)
	f.BTH.DestQP = r.Uint32() & QPNMask
	f.BTH.PSN = PSN(r.Uint32() & PSNMask)
	f.BTH.PKey = uint16(r.Uint32())
	f.BTH.AckReq = r.IntN(2) == 0
	f.IP4.TTL = uint8(r.Uint32())
	f.LRH.DLID = uint16(r.Uint32())
	f.LRH.SL = uint8(r.IntN(16))
	f.LRH.VL = uint8(r.IntN(16))
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], r.Uint64())
	copy(f.GRH.DGID[8:], b[:])
	for i := range f.Payload {
		f.Payload[i] = byte(r.Uint32())
	}
	return f
}
