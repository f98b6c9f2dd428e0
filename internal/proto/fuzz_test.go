package proto

import (
	"bytes"
	"testing"
)

// seedFrames adds canonical frames of every encapsulation and a spread of
// opcodes as fuzz seeds.
func seedFrames(f *testing.F, link LinkType) {
	for _, enc := range encapsulations {
		for _, op := range []Opcode{OpRCSendOnly, OpRCWriteFirst, OpRCReadRequest, OpRCReadResponseOnly,
			OpRCAcknowledge, OpRCCompareSwap, OpRCAtomicAcknowledge, OpUDSendOnlyImm, OpRCSendOnlyInvalidate, OpCNP,
			OpXRCSendOnlyImm, OpXRCWriteFirst, OpXRCReadRequest, OpXRCFetchAdd, OpXRCAcknowledge} {
			p := samplePacket(op, 5)
			enc.set(&p)
			if p.Link != link {
				continue
			}
			buf := make([]byte, p.Len())
			if _, err := p.Encode(buf); err != nil {
				f.Fatal(err)
			}
			f.Add(buf)
		}
	}
}

// checkReencode is the fuzz property: Parse never panics, and a frame that
// parses as a complete transport packet with valid CRCs re-encodes, from its
// parsed fields, to the same bytes — apart from bits the ICRC masks that
// Encode defines as zero (BTH resv6) and trailing Ethernet padding.
func checkReencode(t *testing.T, data []byte, link LinkType) {
	p, err := Parse(data, link)
	if err != nil || !p.HasTransport() || !p.ICRCValid() {
		return
	}
	if link == LinkIB && !p.VCRCValid() {
		return
	}
	if p.IPv4 != nil && (p.IPv4.HeaderLen() != IPv4MinHeaderSize || !p.IPv4.IsChecksumValid()) {
		return
	}
	if p.LRH != nil && (p.LRH[lrhSLLNH]&0x0C != 0 || p.LRH[lrhPktLen]&0xF8 != 0) {
		return // LRH reserved bits: Encode writes them zero
	}
	if p.XRCETH != nil && p.XRCETH[0] != 0 {
		return // XRCETH reserved byte: Encode writes it zero
	}
	for _, b := range p.Pad {
		if b != 0 {
			return // pad content is not a field
		}
	}
	g := fieldsOf(&p)
	out := make([]byte, g.Len())
	if _, err := g.Encode(out); err != nil {
		t.Fatalf("re-encode: %v", err)
	}
	in := append([]byte(nil), data[:min(len(data), len(out))]...)
	if len(in) != len(out) {
		t.Fatalf("re-encoded %d bytes from a %d-byte frame", len(out), len(data))
	}
	bth := cap(data) - cap(p.BTH)
	in[bth+bthResv8a] &^= 0x3F
	// The ICRC masks resv6, so a frame may carry set resv6 bits with a
	// valid ICRC; Encode writes them zero, which leaves the ICRC unchanged.
	if !bytes.Equal(in, out) {
		t.Fatalf("re-encode differs\n in %x\nout %x", in, out)
	}
}

func FuzzParseEthernet(f *testing.F) {
	seedFrames(f, LinkEthernet)
	// A PFC frame, an ARP frame and a runt.
	pfc := make([]byte, 60)
	_, _ = BuildPFC(pfc, [6]byte{2}, &PFCFields{Enable: 8, Time: [8]uint16{3: 0xFFFF}})
	f.Add(pfc)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06, 0, 1})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) { checkReencode(t, data, LinkEthernet) })
}

func FuzzParseIB(f *testing.F) {
	seedFrames(f, LinkIB)
	// A raw-LNH packet and an LRH whose PktLen overruns the frame.
	f.Add([]byte{0xF0, 0x00, 0xFF, 0xFF, 0x00, 0x03, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0x00, 0x02, 0x00, 0x01, 0x07, 0xFF, 0x00, 0x02})
	f.Fuzz(func(t *testing.T, data []byte) { checkReencode(t, data, LinkIB) })
}

func FuzzPSN(f *testing.F) {
	f.Add(uint32(0), uint32(0xFFFFFF), int32(1))
	f.Add(uint32(0x7FFFFF), uint32(0x800000), int32(-0x800000))
	f.Fuzz(func(t *testing.T, a, b uint32, n int32) {
		p, q := PSN(a&PSNMask), PSN(b&PSNMask)
		if int64(p.Diff(q)) != refDiff(a, b) {
			t.Fatalf("Diff(%#x, %#x) = %d, want %d", p, q, p.Diff(q), refDiff(a, b))
		}
		if p.Add(int(n)).Add(-int(n)) != p {
			t.Fatal("Add is not invertible")
		}
	})
}
