package proto

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/testutil"
)

// TestXRCOpcodeTable checks that every XRC opcode is its RC twin at base
// 0xA0 (IBA 9.2.1 table 38) with the same operation, and that exactly the
// requests carry an XRCETH (IBA 9.3.9).
func TestXRCOpcodeTable(t *testing.T) {
	n := 0
	for rc := Opcode(0); rc < 0x20; rc++ {
		if rc == OpRCAtomicWrite {
			continue // RC only (see the opcode table)
		}
		ri := rc.Info()
		xi := (rc + XRCBase).Info()
		if ri.Valid != xi.Valid {
			t.Errorf("%v valid=%v but %v valid=%v", rc, ri.Valid, rc+XRCBase, xi.Valid)
			continue
		}
		if !ri.Valid {
			continue
		}
		n++
		if xi.Transport != TransportXRC || xi.Name != "X"+ri.Name {
			t.Errorf("%#x: transport %v name %q, want XRC and X%s", uint8(rc+XRCBase), xi.Transport, xi.Name, ri.Name)
		}
		if xi.Kind != ri.Kind || xi.Position != ri.Position || xi.Payload != ri.Payload {
			t.Errorf("%v differs from %v in kind, position or payload", rc+XRCBase, rc)
		}
		req := ri.Kind == KindSend || ri.Kind == KindWrite || ri.Kind == KindReadRequest || ri.Kind == KindAtomic
		wantLen := ri.HeaderLen
		if req {
			wantLen += XRCETHSize
		}
		if xi.Has(HdrXRCETH) != req || xi.HeaderLen != wantLen || ri.Has(HdrXRCETH) {
			t.Errorf("%v: XRCETH=%v headers %d bytes; want XRCETH=%v, %d bytes", rc+XRCBase, xi.Has(HdrXRCETH), xi.HeaderLen, req, wantLen)
		}
	}
	if n != 23 {
		t.Errorf("%d RC/XRC opcode pairs, want 23", n)
	}
}

// TestXRCETHGolden checks an XRC SEND ONLY with immediate byte for byte:
// the XRCETH follows the BTH, its reserved byte is zero even over a
// buffer of 0xFF, and the SRQ number keeps only 24 bits.
func TestXRCETHGolden(t *testing.T) {
	f := samplePacket(OpXRCSendOnlyImm, 4)
	f.XRCSRQ = 0xFF123456 // the top byte must not reach the wire
	frame := encode(t, &f)
	p, err := Parse(frame, LinkEthernet)
	if err != nil || !p.ICRCValid() {
		t.Fatalf("parse: %v (ICRC valid %v)", err, p.ICRCValid())
	}
	bth := cap(frame) - cap(p.BTH)
	//	BTH a5 80 ffff 00 000011 80 fffffe
	//	XRCETH 00 123456 | ImmDt a1b2c3d4 | payload 01080f16
	want := "a580ffff0000001180fffffe" + "00123456" + "a1b2c3d4" + "01080f16"
	if got := hex.EncodeToString(frame[bth : bth+BTHSize+XRCETHSize+ImmDtSize+4]); got != want {
		t.Errorf("transport bytes\n got %s\nwant %s", got, want)
	}
	if p.XRCETH == nil || p.XRCETH.XRCSRQ() != 0x123456 {
		t.Fatalf("XRCETH = %x", []byte(p.XRCETH))
	}
	if p.ImmDt.Value() != 0xA1B2C3D4 || !bytes.Equal(p.Payload, f.Payload) {
		t.Errorf("ImmDt %x payload %x", p.ImmDt.Value(), p.Payload)
	}
	h := XRCETH(bytes.Repeat([]byte{0xFF}, XRCETHSize))
	h.Encode(0xABCDEF)
	if !bytes.Equal(h, []byte{0, 0xAB, 0xCD, 0xEF}) {
		t.Errorf("Encode over 0xFF = %x", []byte(h))
	}
	// A receiver ignores the reserved byte.
	if XRCETH([]byte{0x5A, 0, 0, 7}).XRCSRQ() != 7 {
		t.Error("reserved byte leaks into XRCSRQ")
	}
	// ACKs of the XRC service carry no XRCETH.
	a := samplePacket(OpXRCAcknowledge, 0)
	p, err = Parse(encode(t, &a), LinkEthernet)
	if err != nil || p.XRCETH != nil || p.AETH == nil {
		t.Errorf("XRC ACK: err %v XRCETH %x AETH %x", err, []byte(p.XRCETH), []byte(p.AETH))
	}
	// A request cut inside its XRCETH is truncated.
	cut := encode(t, &f)
	ipEnd := len(cut) - (BTHSize + XRCETHSize + ImmDtSize + 4 + ICRCSize) + BTHSize + 2
	if _, err := Parse(cut[:ipEnd], LinkEthernet); err == nil {
		t.Error("frame cut inside the XRCETH parsed")
	}
}

func TestXRCParseAllocs(t *testing.T) {
	for _, enc := range encapsulations {
		f := samplePacket(OpXRCWriteOnlyImm, 100)
		enc.set(&f)
		frame := encode(t, &f)
		allocs := testing.AllocsPerRun(100, func() {
			p, err := Parse(frame, f.Link)
			if err != nil || !p.ICRCValid() || p.XRCETH.XRCSRQ() != f.XRCSRQ {
				t.Fatal("parse failed")
			}
		})
		if allocs != 0 {
			t.Errorf("%s: XRC Parse allocates %.1f times per call", enc.name, allocs)
		}
	}
}

// TestTsharkXRCFrames has tshark read every XRC opcode. Wireshark 4.0
// names the XRC opcodes but has no XRCETH dissector: it shows what follows
// the BTH as "Unknown/Vendor Specific Data". The test checks the opcode
// tshark reads and its XRC name, and that the bytes it reports after the
// BTH start with our XRCETH (requests) or our AETH (responses).
func TestTsharkXRCFrames(t *testing.T) {
	tshark := testutil.Tshark(t)
	var frames [][]byte
	var ops []Opcode
	var after [][]byte
	for op := Opcode(OpXRCSendFirst); op <= OpXRCSendOnlyInvalidate; op++ {
		if !op.Valid() {
			continue
		}
		f := samplePacket(op, 24)
		f.XRCSRQ = 0x345678 + uint32(op)
		fr := encode(t, &f)
		p, err := Parse(fr, LinkEthernet)
		if err != nil {
			t.Fatal(err)
		}
		bth := cap(fr) - cap(p.BTH)
		frames = append(frames, fr)
		ops = append(ops, op)
		after = append(after, fr[bth+BTHSize:])
	}
	path := filepath.Join(t.TempDir(), "xrc.pcap")
	testutil.WritePcap(t, path, 1, frames)
	verbose := testutil.RunTshark(t, tshark, append(append([]string{}, testutil.TsharkArgs...), "-r", path, "-V")...)
	if strings.Contains(verbose, "Malformed") {
		t.Fatalf("tshark reports a malformed frame:\n%s", excerpt(verbose, "Malformed"))
	}
	if n := strings.Count(verbose, "Opcode: Extended Reliable Connection (XRC) - "); n != len(frames) {
		t.Errorf("tshark names %d opcodes as XRC, want %d", n, len(frames))
	}
	out := testutil.RunTshark(t, tshark, append(append([]string{}, testutil.TsharkArgs...), "-r", path, "-T", "fields",
		"-e", "infiniband.bth.opcode", "-e", "infiniband.bth.destqp", "-e", "infiniband.vendor")...)
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if len(rows) != len(frames) {
		t.Fatalf("tshark printed %d rows for %d frames", len(rows), len(frames))
	}
	for i, row := range rows {
		col := strings.Split(row, "\t")
		op := ops[i]
		if len(col) < 3 || col[0] != fmt.Sprint(uint8(op)) || col[1] != "0x000011" {
			t.Errorf("%v: tshark read %q", op, row)
			continue
		}
		// The field repeats per header tshark could not place; the
		// last value is the whole rest of the packet.
		vals := strings.Split(col[2], ",")
		got := vals[len(vals)-1]
		if want := hex.EncodeToString(after[i]); got != want {
			t.Errorf("%v: bytes after the BTH\n got %s\nwant %s", op, got, want)
		}
		if op.Info().Has(HdrXRCETH) {
			srq := fmt.Sprintf("00%06x", 0x345678+uint32(op))
			if !strings.HasPrefix(got, srq) {
				t.Errorf("%v: tshark's data %s does not start with XRCETH %s", op, got, srq)
			}
		}
	}
}

// FuzzXRCETH checks the XRCETH view on any four bytes: the SRQ number has
// 24 bits and re-encodes to the same bytes apart from the reserved byte.
func FuzzXRCETH(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1})
	f.Add([]byte{0xFF, 0xFF, 0xFF, 0xFF})
	f.Add([]byte{0x80, 0x12, 0x34, 0x56})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < XRCETHSize {
			return
		}
		h := XRCETH(data[:XRCETHSize])
		n := h.XRCSRQ()
		if n > 0xFFFFFF {
			t.Fatalf("XRCSRQ %#x has more than 24 bits", n)
		}
		out := make(XRCETH, XRCETHSize)
		out.Encode(n)
		if out[0] != 0 || !bytes.Equal(out[1:], data[1:XRCETHSize]) {
			t.Fatalf("re-encode %x from %x", []byte(out), data[:XRCETHSize])
		}
	})
}
