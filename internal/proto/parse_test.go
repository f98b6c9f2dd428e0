package proto

import (
	"bytes"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"strings"
	"testing"
)

func encode(t testing.TB, f *PacketFields) []byte {
	t.Helper()
	buf := bytes.Repeat([]byte{0xFF}, f.Len()+16) // 0xFF catches unset bytes
	n, err := f.Encode(buf)
	if err != nil {
		t.Fatalf("Encode(%v): %v", f.BTH.Opcode, err)
	}
	if n != f.Len() {
		t.Fatalf("Encode wrote %d bytes, Len says %d", n, f.Len())
	}
	return buf[:n]
}

// TestRoundTripEveryOpcode builds every opcode on every encapsulation,
// parses it back, checks the fields and both CRCs, and re-encodes the parsed
// fields to the same bytes.
func TestRoundTripEveryOpcode(t *testing.T) {
	for _, enc := range encapsulations {
		for _, op := range validOpcodes() {
			for _, n := range []int{0, 1, 2, 3, 4, 257} {
				if !op.Info().Payload && n > 0 || op == OpCNP && n > 0 {
					continue
				}
				t.Run(enc.name+"/"+op.String()+"/"+itoa(n), func(t *testing.T) {
					f := samplePacket(op, n)
					enc.set(&f)
					frame := encode(t, &f)
					p, err := Parse(frame, f.Link)
					if err != nil {
						t.Fatalf("Parse: %v", err)
					}
					checkParsed(t, &f, &p)
					g := fieldsOf(&p)
					again := encode(t, &g)
					if !bytes.Equal(again, frame) {
						t.Fatalf("re-encode differs:\n got %x\nwant %x", again, frame)
					}
				})
			}
		}
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

func op(f *PacketFields) Opcode { return f.BTH.Opcode }

func checkParsed(t *testing.T, f *PacketFields, p *Packet) {
	t.Helper()
	want := FrameRoCEv2
	switch {
	case f.Link == LinkIB:
		want = FrameIB
	case f.RoCEv1:
		want = FrameRoCEv1
	}
	if p.Type != want {
		t.Errorf("Type = %v, want %v", p.Type, want)
	}
	b := p.BTH
	if b.Opcode() != f.BTH.Opcode || b.DestQP() != f.BTH.DestQP || b.PSN() != f.BTH.PSN ||
		b.PKey() != f.BTH.PKey || b.AckReq() != f.BTH.AckReq || b.SE() != f.BTH.SE {
		t.Errorf("BTH mismatch: %x", []byte(b))
	}
	if b.PadCnt() != padFor(len(f.Payload)) || len(p.Pad) != b.PadCnt() {
		t.Errorf("pad = %d (%d bytes), want %d", b.PadCnt(), len(p.Pad), padFor(len(f.Payload)))
	}
	if !bytes.Equal(p.Payload, f.Payload) {
		t.Errorf("payload = %x, want %x", p.Payload, f.Payload)
	}
	info := f.BTH.Opcode.Info()
	for _, h := range []struct {
		hdr     Header
		present bool
	}{
		{HdrXRCETH, p.XRCETH != nil}, {HdrDETH, p.DETH != nil}, {HdrRETH, p.RETH != nil}, {HdrAtomicETH, p.AtomicETH != nil},
		{HdrAETH, p.AETH != nil}, {HdrAtomicAckETH, p.AtomicAckETH != nil},
		{HdrImmDt, p.ImmDt != nil}, {HdrIETH, p.IETH != nil}, {HdrCNPReserved, op(f) == OpCNP},
	} {
		if info.Has(h.hdr) != h.present {
			t.Errorf("header %b present=%v, opcode says %v", h.hdr, h.present, info.Has(h.hdr))
		}
	}
	if !p.ICRCValid() {
		t.Errorf("ICRC invalid: stored %08x computed %08x", GetICRC(p.ICRC), p.ComputeICRC())
	}
	if got, want := p.ComputeICRC(), refICRC(p); got != want {
		t.Errorf("ICRC %08x, reference %08x", got, want)
	}
	if f.Link == LinkIB {
		if !p.VCRCValid() {
			t.Error("VCRC invalid")
		}
		if p.LRH.PktLen()*4+VCRCSize != uint16(len(p.frame)) {
			t.Errorf("PktLen %d for %d-byte frame", p.LRH.PktLen(), len(p.frame))
		}
	}
	if p.IPv4 != nil && !p.IPv4.IsChecksumValid() {
		t.Error("IPv4 checksum invalid")
	}
}

// TestICRCMaskedFields: switches may change the masked fields without
// breaking the ICRC (IBA 7.8.1, Annex A17.3.3).
func TestICRCMaskedFields(t *testing.T) {
	tests := []struct {
		name   string
		enc    int // index into encapsulations
		mutate func(p *Packet)
	}{
		{"ipv4 ttl", 0, func(p *Packet) { p.IPv4.SetTTL(1) }},
		{"ipv4 ecn ce", 0, func(p *Packet) { p.IPv4.SetECN(ECNCE) }},
		{"ipv4 dscp", 0, func(p *Packet) { p.IPv4[ipv4TOS] = 46 << 2; p.IPv4.UpdateChecksum() }},
		{"ipv4 checksum", 0, func(p *Packet) { p.IPv4[ipv4Checksum] ^= 0x55 }},
		{"udp checksum", 0, func(p *Packet) { p.UDP[udpChecksum] = 0x12 }},
		{"fecn", 0, func(p *Packet) { p.BTH.SetFECN(true) }},
		{"becn", 0, func(p *Packet) { p.BTH.SetBECN(true) }},
		{"bth resv6", 0, func(p *Packet) { p.BTH[bthResv8a] |= 0x3F }},
		{"vlan pcp", 1, func(p *Packet) { p.Eth.SetPCP(6) }},
		{"ipv6 ecn", 2, func(p *Packet) { p.IPv6.SetECN(ECNCE) }},
		{"ipv6 hop limit", 2, func(p *Packet) { p.IPv6.SetHopLimit(3) }},
		{"ipv6 flow label", 2, func(p *Packet) { p.IPv6[3] ^= 0xFF }},
		{"roce-v1 hop limit", 3, func(p *Packet) { p.GRH[grhHopLmt] = 1 }},
		{"ib vl", 4, func(p *Packet) { p.LRH.SetVL(3) }},
		{"ib dlid", 4, func(p *Packet) { p.LRH[lrhDLID+1] ^= 1 }},
		{"ib grh tclass", 5, func(p *Packet) { p.GRH[1] ^= 0xF0 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := samplePacket(OpRCSendOnly, 13)
			encapsulations[tc.enc].set(&f)
			frame := encode(t, &f)
			p, err := Parse(frame, f.Link)
			if err != nil {
				t.Fatal(err)
			}
			before := append([]byte(nil), frame...)
			tc.mutate(&p)
			if bytes.Equal(before, frame) {
				t.Fatal("mutation changed nothing")
			}
			if !p.ICRCValid() {
				t.Errorf("ICRC no longer valid after changing a masked field")
			}
		})
	}
}

// TestICRCDetectsEveryInvariantBitFlip flips every bit of the span the ICRC
// covers, one at a time; flips outside the masked fields must fail it.
func TestICRCDetectsEveryInvariantBitFlip(t *testing.T) {
	for _, enc := range encapsulations {
		t.Run(enc.name, func(t *testing.T) {
			f := samplePacket(OpRCWriteOnlyImm, 21)
			enc.set(&f)
			frame := encode(t, &f)
			p, err := Parse(frame, f.Link)
			if err != nil {
				t.Fatal(err)
			}
			masked := maskedBits(&p)
			for i := p.icrcStart; i < p.icrcEnd+ICRCSize; i++ {
				for bit := range 8 {
					m := byte(1) << bit
					if p.LRH != nil && i == lrhSLLNH && m&3 != 0 {
						continue // LNH says whether a GRH follows: it changes the layout, not a value
					}
					frame[i] ^= m
					valid := p.ICRCValid()
					frame[i] ^= m
					if isMasked := masked[i]&m != 0; valid != isMasked {
						t.Fatalf("flip byte %d bit %d: ICRC valid=%v, masked=%v", i, bit, valid, isMasked)
					}
				}
			}
		})
	}
}

// maskedBits returns, per frame byte, the bits the ICRC ignores.
func maskedBits(p *Packet) []byte {
	m := make([]byte, len(p.frame))
	set := func(off int, bits ...byte) {
		for i, b := range bits {
			m[off+i] |= b
		}
	}
	s := p.icrcStart
	switch {
	case p.IPv4 != nil:
		set(s+ipv4TOS, 0xFF)
		set(s+ipv4TTL, 0xFF)
		set(s+ipv4Checksum, 0xFF, 0xFF)
	case p.LRH != nil:
		set(0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF)
	}
	if v6 := p.IPv6; v6 != nil {
		set(cap(p.frame)-cap(v6), 0x0F, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0xFF)
	}
	if g := p.GRH; g != nil {
		set(cap(p.frame)-cap(g), 0x0F, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0xFF)
	}
	if u := p.UDP; u != nil {
		set(cap(p.frame)-cap(u)+udpChecksum, 0xFF, 0xFF)
	}
	set(cap(p.frame)-cap(p.BTH)+bthResv8a, 0xFF)
	return m
}

func TestICRCSeedMatchesRXE(t *testing.T) {
	// rxe seeds crc32_le with 0xDEBB20E3, the register after eight 0xFF
	// bytes from 0xFFFFFFFF, before the final inversion.
	if got := ^icrcSeed; got != 0xDEBB20E3 {
		t.Fatalf("seed register = %08x, want debb20e3", got)
	}
}

func TestICRCDifferentialRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		f := randomFields(r)
		frame := encode(t, &f)
		p, err := Parse(frame, f.Link)
		if err != nil {
			t.Fatalf("#%d %v: %v", i, f.BTH.Opcode, err)
		}
		if got, want := p.ComputeICRC(), refICRC(&p); got != want {
			t.Fatalf("#%d ICRC %08x, reference %08x", i, got, want)
		}
		if f.Link == LinkIB {
			n := len(frame) - VCRCSize
			if got, want := VCRC(frame[:n]), refVCRC(frame[:n]); got != want {
				t.Fatalf("#%d VCRC %04x, reference %04x", i, got, want)
			}
		}
	}
}

func TestVCRCCheckValue(t *testing.T) {
	// The catalogue check value of CRC-16 with poly 0x100B reflected,
	// init 0xFFFF, xorout 0xFFFF over "123456789" (computed by the
	// definition in refVCRC; the table version must agree).
	in := []byte("123456789 and some more bytes to run the eight-byte loop")
	for n := range len(in) + 1 {
		if got, want := VCRC(in[:n]), refVCRC(in[:n]); got != want {
			t.Fatalf("VCRC of %d bytes = %04x, reference %04x", n, got, want)
		}
		if got, want := crcUpdateSmall(0x12345678, in[:n]), crc32.Update(0x12345678, crc32.IEEETable, in[:n]); got != want {
			t.Fatalf("crcUpdateSmall of %d bytes = %08x, crc32 %08x", n, got, want)
		}
	}
}

func TestVCRCTracksVL(t *testing.T) {
	f := samplePacket(OpUDSendOnly, 256)
	f.Link = LinkIB
	frame := encode(t, &f)
	p, _ := Parse(frame, LinkIB)
	p.LRH.SetVL(7)
	if p.VCRCValid() {
		t.Fatal("VCRC still valid after a VL change")
	}
	if !p.ICRCValid() {
		t.Fatal("ICRC broken by a VL change")
	}
	PutVCRC(p.VCRC, VCRC(frame[:len(frame)-VCRCSize]))
	if !p.VCRCValid() {
		t.Fatal("VCRC invalid after recomputing")
	}
}

func TestParseTruncatedNeverPanics(t *testing.T) {
	for _, enc := range encapsulations {
		for _, op := range validOpcodes() {
			f := samplePacket(op, 33)
			enc.set(&f)
			frame := encode(t, &f)
			for n := range len(frame) {
				p, err := Parse(frame[:n], f.Link)
				if err == nil && p.HasTransport() {
					t.Fatalf("%s %v: %d of %d bytes parsed as a complete packet", enc.name, op, n, len(frame))
				}
			}
		}
	}
}

func TestParseErrors(t *testing.T) {
	v4 := samplePacket(OpRCSendOnly, 8)
	good := encode(t, &v4)
	v6f := samplePacket(OpRCSendOnly, 8)
	v6f.IPv6 = true
	v6 := encode(t, &v6f)
	ib := samplePacket(OpRCSendOnly, 8)
	ib.Link = LinkIB
	goodIB := encode(t, &ib)
	mod := func(b []byte, f func([]byte)) []byte { c := append([]byte(nil), b...); f(c); return c }
	tests := []struct {
		name  string
		frame []byte
		link  LinkType
		want  error
		typ   FrameType
	}{
		{"empty", nil, LinkEthernet, ErrTruncated, FrameOther},
		{"short ethernet", good[:10], LinkEthernet, ErrTruncated, FrameOther},
		{"ipv4 version 5", mod(good, func(b []byte) { b[14] = 0x55 }), LinkEthernet, ErrMalformed, FrameOther},
		{"ipv4 ihl 4", mod(good, func(b []byte) { b[14] = 0x44 }), LinkEthernet, ErrMalformed, FrameOther},
		{"ipv4 total length past frame", mod(good, func(b []byte) { b[16] = 0xFF }), LinkEthernet, ErrTruncated, FrameRoCEv2},
		{"ipv6 cut short", v6[:len(v6)-5], LinkEthernet, ErrTruncated, FrameRoCEv2},
		{"ipv4 cut before udp", good[:36], LinkEthernet, ErrTruncated, FrameOther},
		{"udp length past ip", mod(good, func(b []byte) { b[38] = 0xFF }), LinkEthernet, ErrMalformed, FrameRoCEv2},
		{"unknown opcode", mod(good, func(b []byte) { b[42] = 0x1F }), LinkEthernet, ErrUnknownOpcode, FrameRoCEv2},
		{"pad longer than payload", mod(good, func(b []byte) { b[42] = byte(OpRCAcknowledge); b[43] |= 0x30 }), LinkEthernet, ErrMalformed, FrameRoCEv2},
		{"ack with payload", mod(good, func(b []byte) { b[42] = byte(OpRCAcknowledge) }), LinkEthernet, ErrMalformed, FrameRoCEv2},
		{"ib short", goodIB[:7], LinkIB, ErrTruncated, FrameOther},
		{"ib pktlen too big", mod(goodIB, func(b []byte) { b[5]++ }), LinkIB, ErrTruncated, FrameOther},
		{"ib pktlen too small", mod(goodIB, func(b []byte) { b[5]-- }), LinkIB, ErrMalformed, FrameOther},
		{"ib grh without room", mod(goodIB, func(b []byte) { b[1] |= LNHIBAGlobal }), LinkIB, ErrTruncated, FrameOther},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.frame, tc.link)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if p.Type != tc.typ {
				t.Fatalf("Type = %v, want %v", p.Type, tc.typ)
			}
		})
	}
}

func TestParseOtherFrames(t *testing.T) {
	arp := make([]byte, 42)
	Ethernet(arp).Encode(&EthernetFields{Dst: [6]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, EtherType: EtherTypeARP})
	udp := samplePacket(OpRCSendOnly, 8)
	udp.UDP.DstPort = 53
	plainUDP := encode(t, &udp)
	ethPadded := encode(t, func() *PacketFields { f := samplePacket(OpRCAcknowledge, 0); return &f }())
	ethPadded = append(ethPadded, make([]byte, 8)...) // trailing Ethernet padding
	for _, tc := range []struct {
		name  string
		frame []byte
		typ   FrameType
	}{
		{"arp", arp, FrameOther},
		{"udp 53", plainUDP, FrameOther},
		{"padded ack", ethPadded, FrameRoCEv2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.frame, LinkEthernet)
			if err != nil || p.Type != tc.typ {
				t.Fatalf("Parse = %v, %v; want %v", p.Type, err, tc.typ)
			}
			if tc.typ == FrameRoCEv2 && !p.ICRCValid() {
				t.Fatal("ICRC invalid on a padded frame")
			}
		})
	}
}

func TestPFC(t *testing.T) {
	buf := bytes.Repeat([]byte{0xFF}, 64)
	n, err := BuildPFC(buf, [6]byte{2, 0, 0, 0, 0, 9}, &PFCFields{Enable: 1 << 3, Time: [8]uint16{3: 0xFFFF}})
	if err != nil || n != EthernetMinFrameSize {
		t.Fatalf("BuildPFC = %d, %v", n, err)
	}
	want := "0180c2000001020000000009" + "8808" + "0101" + "0008" + "000000000000ffff0000000000000000"
	want += strings.Repeat("00", EthernetMinFrameSize-len(want)/2)
	if got := hexs(buf[:n]); got != want {
		t.Fatalf("PFC frame\n got %s\nwant %s", got, want)
	}
	p, err := Parse(buf[:n], LinkEthernet)
	if err != nil || p.Type != FrameMACControl || !p.MACControl.IsPFC() {
		t.Fatalf("Parse: %v %v", p.Type, err)
	}
	if p.MACControl.PFCEnable() != 8 || p.MACControl.PFCTime(3) != 0xFFFF || p.MACControl.PFCTime(2) != 0 {
		t.Fatal("PFC fields wrong")
	}
	pause := make([]byte, 60)
	Ethernet(pause).Encode(&EthernetFields{Dst: PFCDestMAC, EtherType: EtherTypeMACControl})
	MACControl(pause[14:]).EncodePause(100)
	p, err = Parse(pause, LinkEthernet)
	if err != nil || !p.MACControl.IsPause() || p.MACControl.PauseTime() != 100 {
		t.Fatalf("PAUSE parse: %v", err)
	}
}

func hexs(b []byte) string {
	const h = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, x := range b {
		out = append(out, h[x>>4], h[x&15])
	}
	return string(out)
}

func TestCNP(t *testing.T) {
	f := samplePacket(OpRCSendOnly, 0)
	f.SetCNP(0xD2, 0xFFFF)
	frame := encode(t, &f)
	p, err := Parse(frame, LinkEthernet)
	if err != nil {
		t.Fatal(err)
	}
	// The BTH and body of the IBTA example: 81 00 ff ff 40 00 00 d2 00...
	bth := hexs(frame[42 : 42+BTHSize+CNPReservedSize])
	if want := "8100ffff400000d200000000" + "00000000000000000000000000000000"; bth != want {
		t.Fatalf("CNP BTH+body = %s, want %s", bth, want)
	}
	if !p.ICRCValid() || p.BTH.AckReq() || !p.BTH.BECN() || len(p.Payload) != 0 {
		t.Fatal("CNP fields wrong")
	}
	if len(frame) != 14+20+8+32 {
		t.Fatalf("CNP frame is %d bytes, want UDP payload of 32", len(frame))
	}
}

func TestParseAllocs(t *testing.T) {
	frames := map[string][]byte{}
	var links = map[string]LinkType{}
	for _, enc := range encapsulations {
		f := samplePacket(OpRCWriteOnlyImm, 100)
		enc.set(&f)
		frames[enc.name] = encode(t, &f)
		links[enc.name] = f.Link
	}
	for name, frame := range frames {
		link := links[name]
		allocs := testing.AllocsPerRun(100, func() {
			p, err := Parse(frame, link)
			if err != nil || !p.ICRCValid() {
				t.Fatal("parse failed")
			}
		})
		if allocs != 0 {
			t.Errorf("%s: Parse+ICRCValid allocates %.1f times per call", name, allocs)
		}
	}
	f := samplePacket(OpRCReadResponseOnly, 64)
	buf := make([]byte, 256)
	if a := testing.AllocsPerRun(100, func() { _, _ = f.Encode(buf) }); a != 0 {
		t.Errorf("Encode allocates %.1f times per call", a)
	}
}

func TestStdlibCRCMatchesReference(t *testing.T) {
	data := []byte("The quick brown fox jumps over the lazy dog")
	if crc32.ChecksumIEEE(data) != refCRC32(data) || refCRC32(data) != 0x414FA339 {
		t.Fatalf("reference CRC-32 disagrees: %08x", refCRC32(data))
	}
}

func TestEncodeErrors(t *testing.T) {
	f := samplePacket(OpRCSendOnly, 10)
	if _, err := f.Encode(make([]byte, 5)); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("short buffer: %v", err)
	}
	f.BTH.Opcode = 0x1F
	if _, err := f.Encode(make([]byte, 200)); !errors.Is(err, ErrUnknownOpcode) {
		t.Errorf("unknown opcode: %v", err)
	}
	g := samplePacket(OpRCSendOnly, 0)
	g.Link = LinkIB
	g.Payload = make([]byte, 8192)
	if _, err := g.Encode(make([]byte, g.Len())); !errors.Is(err, ErrMalformed) {
		t.Errorf("IB packet over PktLen: %v", err)
	}
}
