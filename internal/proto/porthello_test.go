package proto

import (
	"errors"
	"strings"
	"testing"
)

func TestHelloRoundTrip(t *testing.T) {
	for _, f := range []HelloFields{
		{Version: HelloVersion, LinkLayer: HelloLinkEthernet, Role: HelloRoleNIC, MaxFrame: 9018, MAC: [6]byte{2, 0, 0, 0, 0, 1},
			PortNum: 1, PortGUID: 0x0200_00ff_fe00_0001, NodeGUID: 0x0200_00ff_fe00_0000, Name: "host1/hicain0"},
		{Version: 1, LinkLayer: HelloLinkInfiniBand, Role: HelloRoleSwitch, Status: HelloPortBusy, PortNum: 7, Name: ""},
		{LinkLayer: HelloLinkEthernet, Name: strings.Repeat("x", 100)},
		{LinkLayer: HelloLinkEthernet, Role: HelloRoleNIC, Name: "host1/hinic0", Features: HelloFeatureShm},
		{LinkLayer: HelloLinkEthernet, Name: strings.Repeat("y", 100), Features: 0x8000_0001},
	} {
		b := AppendHello([]byte{0xAA}, &f)[1:]
		h, err := ParseHello(b)
		if err != nil {
			t.Fatal(err)
		}
		got := h.Fields()
		want := f
		if len(want.Name) > HelloMaxName {
			want.Name = want.Name[:HelloMaxName]
		}
		if got != want {
			t.Errorf("got %+v\nwant %+v", got, want)
		}
	}
}

func TestHelloErrors(t *testing.T) {
	good := AppendHello(nil, &HelloFields{LinkLayer: HelloLinkEthernet, Name: "ab"})
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"short", good[:10], ErrTruncated},
		{"magic", mod(func(b []byte) []byte { b[0] = 'X'; return b }), ErrMalformed},
		{"name longer than message", mod(func(b []byte) []byte { b[helloNameLenOff] = 3; return b }), ErrMalformed},
		{"name over limit", mod(func(b []byte) []byte { b[helloNameLenOff] = 65; return b }), ErrMalformed},
		{"trailing bytes", mod(func(b []byte) []byte { return append(b, 0) }), ErrMalformed},
		{"empty features", mod(func(b []byte) []byte { return append(b, 0, 0, 0, 0) }), ErrMalformed},
		{"features and more", mod(func(b []byte) []byte { return append(b, 0, 0, 0, 1, 0) }), ErrMalformed},
	} {
		if _, err := ParseHello(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if HelloStatusText(HelloPortBusy) != "port busy" || HelloStatusText(99) != "unknown status" {
		t.Error("status text")
	}
}

func FuzzParseHello(f *testing.F) {
	f.Add(AppendHello(nil, &HelloFields{LinkLayer: HelloLinkEthernet, Name: "host"}))
	f.Add(AppendHello(nil, &HelloFields{LinkLayer: HelloLinkEthernet, Name: "host", Features: HelloFeatureShm}))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHello(b)
		if err != nil {
			return
		}
		fl := h.Fields()
		if string(h.Name()) == fl.Name { // names that are valid UTF-8 re-encode exactly
			if again := AppendHello(nil, &fl); string(again) != string(b) {
				t.Fatalf("re-encode differs:\n%x\n%x", again, b)
			}
		}
	})
}
