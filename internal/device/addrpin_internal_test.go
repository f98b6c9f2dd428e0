package device

import (
	"errors"
	"net/netip"
	"testing"
)

// testPins pins 10.42.0.3, 10.99.0.0/16 and fd00::/64 to the MAC
// 02:48:4e:00:00:03.
func testPins() *addrPins {
	c := VNICConfig{MAC: [6]byte{0x02, 0x48, 0x4e, 0, 0, 3}, AllowedIPs: []netip.Prefix{
		netip.MustParsePrefix("10.42.0.3/32"), netip.MustParsePrefix("10.99.0.0/16"),
		netip.MustParsePrefix("fd00::/64")}}
	return newAddrPins(&c)
}

func TestParseAllowedIP(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"10.42.0.1", "10.42.0.1/32"},
		{"10.42.0.77/24", "10.42.0.0/24"},
		{"::ffff:10.42.0.1", "10.42.0.1/32"},
		{"::ffff:10.42.0.0/120", "10.42.0.0/24"},
		{"fd00::1", "fd00::1/128"},
		{"fd00::1/64", "fd00::/64"},
		{"0.0.0.0/0", "0.0.0.0/0"},
	} {
		p, err := ParseAllowedIP(c.in)
		if err != nil || p.String() != c.want {
			t.Errorf("%q: %v, %v; want %s", c.in, p, err, c.want)
		}
	}
	for _, in := range []string{"", "10.42.0", "10.42.0.1/33", "fe80::1%eth0", "fe80::1%eth0/64", "a.example", "10.42.0.1/"} {
		if p, err := ParseAllowedIP(in); !errors.Is(err, ErrAllowedIP) {
			t.Errorf("%q: %v, %v; want ErrAllowedIP", in, p, err)
		}
	}
}

func TestLinkLocalOfPins(t *testing.T) {
	if got, want := netip.AddrFrom16(testPins().linkLocal), netip.MustParseAddr("fe80::48:4eff:fe00:3"); got != want {
		t.Errorf("link-local %v; want %v", got, want)
	}
}

// FuzzParseAllowedIP: no panic, and what parses prints as a prefix that
// parses to itself, masked and not IPv4-mapped.
func FuzzParseAllowedIP(f *testing.F) {
	for _, s := range []string{"10.42.0.1", "10.42.0.0/24", "::ffff:10.42.0.1/128", "fd00::/64", "fe80::1%x", "1.2.3.4/99", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseAllowedIP(s)
		if err != nil {
			if !errors.Is(err, ErrAllowedIP) {
				t.Fatalf("%q: %v is not ErrAllowedIP", s, err)
			}
			return
		}
		if p != p.Masked() || (p.Addr().Is4In6() && p.Bits() >= 96) || p.Addr().Zone() != "" {
			t.Fatalf("%q: %v", s, p)
		}
		if q, err := ParseAllowedIP(p.String()); err != nil || q != p {
			t.Fatalf("%q: %v prints as %q, which parses to %v, %v", s, p, p.String(), q, err)
		}
	})
}

// FuzzPinnedFrame: frameAllowed reads a guest's frame of any bytes
// (14 to L2MaxFrame, as l2Transmit passes) without a panic, and what it
// lets through has an IPv4, ARP or IPv6 source that is pinned, the
// vNIC's link-local address or unspecified.
func FuzzPinnedFrame(f *testing.F) {
	p := testPins()
	eth := []byte{0x02, 0x48, 0x4e, 0, 0, 2, 0x02, 0x48, 0x4e, 0, 0, 3}
	ip4 := append(append([]byte{}, eth...), 0x08, 0, 0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 42, 0, 3, 10, 42, 0, 2)
	arp := append(append([]byte{}, eth...), 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 2, 0x02, 0x48, 0x4e, 0, 0, 3, 10, 42, 0, 3)
	arp = append(arp, make([]byte, 10)...)
	ip6 := append(append([]byte{}, eth...), 0x86, 0xdd, 0x60, 0, 0, 0, 0, 24, 58, 255)
	ip6 = append(ip6, p.linkLocal[:]...)
	ip6 = append(ip6, make([]byte, 16)...)
	ip6 = append(ip6, 136, 0, 0, 0, 0x60, 0, 0, 0)
	ip6 = append(ip6, p.linkLocal[:]...)
	tagged := append(append(append([]byte{}, eth...), 0x81, 0, 0, 5), ip4[12:]...)
	for _, s := range [][]byte{ip4, arp, ip6, tagged, ip4[:20], ip6[:60]} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) < 14 || len(frame) > L2MaxFrame {
			return
		}
		typ, off := l2Type(frame)
		if !p.frameAllowed(frame, typ, off) {
			return
		}
		l3 := frame[off:]
		switch typ {
		case 0x0800:
			if src := [4]byte(l3[12:16]); !p.allows4(src) {
				t.Fatalf("IPv4 from %v let through", netip.AddrFrom4(src))
			}
		case 0x0806:
			if spa := [4]byte(l3[14:18]); !p.allows4(spa) || [6]byte(l3[8:14]) != p.mac {
				t.Fatalf("ARP from %v, %x let through", netip.AddrFrom4(spa), l3[8:14])
			}
		case 0x86dd:
			if src := [16]byte(l3[8:24]); !p.allows6(src) {
				t.Fatalf("IPv6 from %v let through", netip.AddrFrom16(src))
			}
		}
	})
}
