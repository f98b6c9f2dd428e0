package proto

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
)

func TestVXLANEncode(t *testing.T) {
	b := bytes.Repeat([]byte{0xFF}, TunnelHeaderSize)
	PutVXLAN(b, 0x123456)
	// RFC 7348 section 5: flags 0x08, 24 reserved bits, VNI, 8 reserved bits.
	if got, want := hex.EncodeToString(b), "0800000012345600"; got != want {
		t.Fatalf("header %s, want %s", got, want)
	}
	frame := append(b, make([]byte, EthernetHeaderSize)...)
	vni, inner, err := ParseVXLAN(frame)
	if err != nil || vni != 0x123456 || len(inner) != EthernetHeaderSize {
		t.Fatalf("ParseVXLAN = %#x, %d bytes, %v", vni, len(inner), err)
	}
}

func TestParseVXLANErrors(t *testing.T) {
	good := make([]byte, TunnelHeaderSize+EthernetHeaderSize)
	PutVXLAN(good, 7)
	noI := append([]byte(nil), good...)
	noI[0] = 0
	reserved := append([]byte(nil), good...)
	reserved[0], reserved[3], reserved[7] = 0xFF, 0xFF, 0xFF // ignored on receipt
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"header only", good[:TunnelHeaderSize], ErrTruncated},
		{"short inner", good[:len(good)-1], ErrTruncated},
		{"no I flag", noI, ErrMalformed},
		{"reserved bits set", reserved, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ParseVXLAN(tc.in)
			if !errors.Is(err, tc.want) && err != tc.want {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

func TestIBUDP(t *testing.T) {
	b := bytes.Repeat([]byte{0xFF}, TunnelHeaderSize+minIBPacket)
	PutIBUDP(b, IBUDPData, 0xABCDEF)
	if got, want := hex.EncodeToString(b[:TunnelHeaderSize]), "48491000abcdef00"; got != want {
		t.Fatalf("header %s, want %s", got, want)
	}
	typ, vni, pkt, err := ParseIBUDP(b)
	if err != nil || typ != IBUDPData || vni != 0xABCDEF || len(pkt) != minIBPacket {
		t.Fatalf("ParseIBUDP = %d %#x %d bytes %v", typ, vni, len(pkt), err)
	}
	ka := make([]byte, TunnelHeaderSize)
	for _, typ := range []uint8{IBUDPKeepalive, IBUDPXOFF, IBUDPXON} {
		PutIBUDP(ka, typ, 9)
		got, vni, pkt, err := ParseIBUDP(ka)
		if err != nil || got != typ || vni != 9 || pkt != nil {
			t.Fatalf("type %d: ParseIBUDP = %d %d %v %v", typ, got, vni, pkt, err)
		}
		if _, _, _, err := ParseIBUDP(append(ka, 0)); !errors.Is(err, ErrMalformed) {
			t.Fatalf("type %d with a payload: err %v", typ, err)
		}
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"short", b[:TunnelHeaderSize-1], ErrTruncated},
		{"short packet", b[:TunnelHeaderSize+minIBPacket-1], ErrTruncated},
		{"magic", append([]byte{0x48, 0x48}, b[2:]...), ErrMalformed},
		{"version", append([]byte{0x48, 0x49, 0x20}, b[3:]...), ErrMalformed},
		{"type", append([]byte{0x48, 0x49, 0x14}, b[3:]...), ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, _, err := ParseIBUDP(tc.in); !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

func TestKeepaliveFrame(t *testing.T) {
	b := bytes.Repeat([]byte{0xFF}, KeepaliveFrameSize)
	PutKeepaliveFrame(b, [6]byte{2, 0x48, 0, 0, 0, 5}, 42)
	want := "0180c200000e02480000000588b5484e4b410000002a" + hex.EncodeToString(make([]byte, KeepaliveFrameSize-22))
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("keepalive %s\nwant      %s", got, want)
	}
	if !IsKeepaliveFrame(b) {
		t.Fatal("IsKeepaliveFrame = false")
	}
	b[14] = 'X'
	if IsKeepaliveFrame(b) || IsKeepaliveFrame(b[:21]) {
		t.Fatal("IsKeepaliveFrame took a frame that is not one")
	}
}

func TestTunnelParseZeroAlloc(t *testing.T) {
	v := make([]byte, TunnelHeaderSize+KeepaliveFrameSize)
	PutVXLAN(v, 1)
	PutKeepaliveFrame(v[TunnelHeaderSize:], [6]byte{2}, 1)
	ib := make([]byte, TunnelHeaderSize+minIBPacket)
	PutIBUDP(ib, IBUDPData, 1)
	if n := testing.AllocsPerRun(100, func() {
		_, inner, _ := ParseVXLAN(v)
		_ = IsKeepaliveFrame(inner)
		_, _, _, _ = ParseIBUDP(ib)
	}); n != 0 {
		t.Fatalf("%v allocations per parse", n)
	}
}

// FuzzParseTunnel feeds datagrams to both decapsulation parsers. Property:
// no panic, what parses is a view of the input past the header, and its
// header re-encodes to the same bytes once the bits the receiver ignores
// are cleared.
func FuzzParseTunnel(f *testing.F) {
	v := make([]byte, TunnelHeaderSize+KeepaliveFrameSize)
	PutVXLAN(v, 0x10)
	PutKeepaliveFrame(v[TunnelHeaderSize:], [6]byte{2}, 3)
	f.Add(v)                                       // a VXLAN keepalive
	f.Add(v[:TunnelHeaderSize+13])                 // one byte short of an Ethernet header
	f.Add([]byte{0x48, 0x49, 0x11, 0, 0, 0, 1, 0}) // an IB keepalive
	ib := make([]byte, TunnelHeaderSize+minIBPacket)
	PutIBUDP(ib, IBUDPData, 5)
	f.Add(ib)                                         // an IB data datagram
	f.Add([]byte{0x48, 0x49, 0x12, 0, 0, 0, 1, 0, 0}) // an XOFF with a payload
	f.Fuzz(func(t *testing.T, data []byte) {
		if vni, inner, err := ParseVXLAN(data); err == nil {
			if len(inner) != len(data)-TunnelHeaderSize || vni > MaxVNI {
				t.Fatalf("inner %d bytes of %d, vni %#x", len(inner), len(data), vni)
			}
			h := make([]byte, TunnelHeaderSize)
			PutVXLAN(h, vni)
			if h[0] != data[0]&VXLANFlagI|VXLANFlagI || !bytes.Equal(h[4:7], data[4:7]) {
				t.Fatalf("re-encoded %x from %x", h, data[:TunnelHeaderSize])
			}
		}
		if typ, vni, pkt, err := ParseIBUDP(data); err == nil {
			h := make([]byte, TunnelHeaderSize)
			PutIBUDP(h, typ, vni)
			if !bytes.Equal(h[:3], data[:3]) || !bytes.Equal(h[4:7], data[4:7]) {
				t.Fatalf("re-encoded %x from %x", h, data[:TunnelHeaderSize])
			}
			if (typ == IBUDPData) != (pkt != nil) || (pkt != nil && len(pkt) != len(data)-TunnelHeaderSize) {
				t.Fatalf("type %d with %d payload bytes of %d", typ, len(pkt), len(data))
			}
		}
	})
}
