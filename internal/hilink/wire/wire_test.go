package wire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func TestEncodeFields(t *testing.T) {
	f := Fields{Type: TypeReadResp, Flags: FlagLast, Status: StatusBadAddress, Credits: 0xBEEF,
		SrcGPU: 0x0102, DstGPU: 0x0304, Tag: 0x05060708, Length: 0x090A0B0C, Address: 0x1112131415161718}
	b := bytes.Repeat([]byte{0xFF}, HeaderSize)
	Header(b).Encode(&f)
	// Version 1 | type 6, L | status 6, credits, src, dst, tag, length, address.
	want := "16" + "86" + "beef" + "0102" + "0304" + "05060708" + "090a0b0c" + "1112131415161718"
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("encoded %s\nwant    %s", got, want)
	}
	if got := Header(b).Fields(); got != f {
		t.Errorf("fields %+v, want %+v", got, f)
	}
	if h := Header(b); h.Version() != Version || !h.Last() || h.Type().String() != "read-resp" {
		t.Errorf("accessors: version %d last %v type %s", h.Version(), h.Last(), h.Type())
	}
	Header(b).SetCredits(7)
	if Header(b).Credits() != 7 || b[1] != 0x86 || b[4] != 1 {
		t.Errorf("SetCredits wrote %x", b)
	}
}

func TestParse(t *testing.T) {
	frame := func(f Fields, payload int) []byte {
		b := bytes.Repeat([]byte{0xFF}, HeaderSize+payload)
		Header(b).Encode(&f)
		return b
	}
	ok := []struct {
		name string
		msg  []byte
	}{
		{"write", frame(Fields{Type: TypeWrite, Flags: FlagLast, SrcGPU: 1, DstGPU: 2, Length: 8, Address: 1 << 40}, 8)},
		{"write not last", frame(Fields{Type: TypeWrite, Length: 1}, 1)},
		{"read-req", frame(Fields{Type: TypeReadReq, Length: 1 << 30}, 0)},
		{"read-resp error", frame(Fields{Type: TypeReadResp, Flags: FlagLast, Status: StatusNoAccess}, 0)},
		{"write-resp", frame(Fields{Type: TypeWriteResp, Length: 99}, 0)},
		{"credit", frame(Fields{Type: TypeCredit, Credits: 5}, 0)},
		{"hello", AppendHelloFrame(nil, 0, 64, &HelloFields{MaxFrame: 4096, Role: RoleGPU, GPUs: []uint16{3}})},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			h, err := Parse(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			if len(h.Payload()) != len(tc.msg)-HeaderSize {
				t.Errorf("payload %d", len(h.Payload()))
			}
		})
	}
	bad := []struct {
		name string
		msg  []byte
		err  error
	}{
		{"empty", nil, ErrTruncated},
		{"short", make([]byte, HeaderSize-1), ErrTruncated},
		{"version 0", make([]byte, HeaderSize), ErrVersion},
		{"version 2", append([]byte{0x23}, make([]byte, HeaderSize-1)...), ErrVersion},
		{"type 0", append([]byte{0x10}, make([]byte, HeaderSize-1)...), ErrType},
		{"type 7", append([]byte{0x17}, make([]byte, HeaderSize-1)...), ErrType},
		{"reserved flag", frame(Fields{Type: TypeWrite, Flags: 1, Length: 1}, 1), ErrMalformed},
		{"last on read-req", frame(Fields{Type: TypeReadReq, Flags: FlagLast, Length: 1}, 0), ErrMalformed},
		{"length short", frame(Fields{Type: TypeWrite, Length: 3}, 4), ErrMalformed},
		{"length long", frame(Fields{Type: TypeWrite, Length: 5}, 4), ErrMalformed},
		{"empty write", frame(Fields{Type: TypeWrite}, 0), ErrMalformed},
		{"empty read", frame(Fields{Type: TypeReadReq}, 0), ErrMalformed},
		{"payload on read-req", frame(Fields{Type: TypeReadReq, Length: 4}, 4), ErrMalformed},
		{"credit with tag", frame(Fields{Type: TypeCredit, Tag: 1}, 0), ErrMalformed},
		{"credit with gpu", frame(Fields{Type: TypeCredit, DstGPU: 1}, 0), ErrMalformed},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse(tc.msg); !errors.Is(err, tc.err) {
				t.Errorf("err %v, want %v", err, tc.err)
			}
		})
	}
}

func TestHello(t *testing.T) {
	f := HelloFields{MaxFrame: 0x1018, Role: RoleGPU, PortNum: 0, GPUs: []uint16{0, 7}, Name: "vm-a/gpu"}
	b := bytes.Repeat([]byte{0xFF}, 64)
	b = AppendHelloFrame(b[:0], StatusOK, 32, &f)
	want := "11000020" + "00000000" + "00000000" + "00000018" + "0000000000000000" + // header
		"484c4e4b" + "00001018" + "01" + "02" + "00" + "08" + "0000" + "0007" + hex.EncodeToString([]byte("vm-a/gpu"))
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("hello %s\nwant  %s", got, want)
	}
	h, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	hh, err := ParseHello(h.Payload())
	if err != nil {
		t.Fatal(err)
	}
	got := hh.Fields()
	if got.MaxFrame != f.MaxFrame || got.Role != f.Role || got.Name != f.Name || len(got.GPUs) != 2 || got.GPUs[1] != 7 {
		t.Errorf("fields %+v", got)
	}
	long := HelloFields{MaxFrame: 4096, Role: RoleSwitch, Name: strings.Repeat("x", 100), GPUs: make([]uint16, 20)}
	for i := range long.GPUs {
		long.GPUs[i] = uint16(i)
	}
	if hh, err := ParseHello(AppendHello(nil, &long)); err != nil || hh.NumGPUs() != MaxHelloGPUs || len(hh.Name()) != MaxNameLen {
		t.Errorf("cut hello: %v", err)
	}

	good := AppendHello(nil, &f)
	mut := func(i int, v byte) []byte { c := bytes.Clone(good); c[i] = v; return c }
	for name, p := range map[string][]byte{
		"short":         good[:HelloFixedSize-1],
		"magic":         mut(0, 'X'),
		"role 0":        mut(hOffRole, 0),
		"role 3":        mut(hOffRole, 3),
		"max frame":     mut(hOffMaxFrame+2, 0),
		"max frame big": mut(hOffMaxFrame+1, 0x20),
		"gpus past":     mut(hOffNumGPUs, 3),
		"too many":      mut(hOffNumGPUs, MaxHelloGPUs+1),
		"name long":     mut(hOffNameLen, 9),
		"trailing":      append(bytes.Clone(good), 0),
		"duplicate id":  mut(hOffGPUs+3, 0),
		"bad utf8":      mut(len(good)-1, 0xFF),
	} {
		if _, err := ParseHello(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParseDoesNotAllocate(t *testing.T) {
	msg := Append(nil, &Fields{Type: TypeWrite, SrcGPU: 1, DstGPU: 2, Address: 1 << 40}, make([]byte, 4096))
	hello := AppendHello(nil, &HelloFields{MaxFrame: 4096, Role: RoleGPU, GPUs: []uint16{1, 2, 3}, Name: "a"})
	var sink uint64
	if n := testing.AllocsPerRun(100, func() {
		h, err := Parse(msg)
		if err != nil {
			t.Fatal(err)
		}
		hh, err := ParseHello(hello)
		if err != nil {
			t.Fatal(err)
		}
		sink += h.Address() + uint64(h.DstGPU()) + uint64(len(h.Payload())) + uint64(hh.GPU(2)) + uint64(len(hh.Name()))
	}); n != 0 {
		t.Errorf("%v allocations per parse", n)
	}
	_ = sink
}

func BenchmarkParse(b *testing.B) {
	msg := Append(nil, &Fields{Type: TypeWrite, SrcGPU: 1, DstGPU: 2}, make([]byte, 4096))
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if _, err := Parse(msg); err != nil {
			b.Fatal(err)
		}
	}
}
