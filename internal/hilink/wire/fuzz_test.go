package wire

import (
	"bytes"
	"testing"
)

// FuzzParse: Parse never panics, and a frame it accepts re-encodes from
// its fields and payload to the same bytes; a hello payload likewise.
func FuzzParse(f *testing.F) {
	// A write of 8 bytes, the last of its operation.
	f.Add(Append(nil, &Fields{Type: TypeWrite, Flags: FlagLast, SrcGPU: 1, DstGPU: 2, Tag: 9, Address: 2 << 40}, []byte("abcdefgh")))
	// A read request of 1 MiB and its error response.
	f.Add(Append(nil, &Fields{Type: TypeReadReq, SrcGPU: 2, DstGPU: 1, Tag: 10, Length: 1 << 20, Address: 1 << 40}, nil))
	f.Add(Append(nil, &Fields{Type: TypeReadResp, Flags: FlagLast, Status: StatusBadAddress, SrcGPU: 1, DstGPU: 2, Tag: 10}, nil))
	// A credit return, a hello with two GPUs, a runt and a header of ones.
	f.Add(Append(nil, &Fields{Type: TypeCredit, Credits: 64}, nil))
	f.Add(AppendHelloFrame(nil, 0, 64, &HelloFields{MaxFrame: 65560, Role: RoleGPU, GPUs: []uint16{0, 1}, Name: "vm/gpu"}))
	f.Add([]byte{0x13, 0x80})
	f.Add(bytes.Repeat([]byte{0xFF}, HeaderSize+4))
	f.Fuzz(func(t *testing.T, msg []byte) {
		h, err := Parse(msg)
		if err != nil {
			return
		}
		fields := h.Fields()
		out := Append(nil, &fields, h.Payload())
		if !bytes.Equal(out, msg) {
			t.Fatalf("re-encoded %x\nfrom      %x", out, msg)
		}
		if h.Type() != TypeHello {
			return
		}
		hh, err := ParseHello(h.Payload())
		if err != nil {
			return
		}
		hf := hh.Fields()
		if p := AppendHello(nil, &hf); !bytes.Equal(p, h.Payload()) {
			t.Fatalf("hello re-encoded %x\nfrom            %x", p, h.Payload())
		}
	})
}
