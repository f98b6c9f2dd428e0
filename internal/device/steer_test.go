package device

import "testing"

func TestIsRoCEv2(t *testing.T) {
	eth := func(et uint16) []byte {
		return []byte{2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, byte(et >> 8), byte(et)}
	}
	ipv4 := func(proto byte, dport uint16) []byte {
		ip := make([]byte, 20+8)
		ip[0], ip[9] = 0x45, proto
		ip[22], ip[23] = byte(dport>>8), byte(dport)
		return ip
	}
	ipv6 := func(next byte, dport uint16) []byte {
		ip := make([]byte, 40+8)
		ip[0], ip[6] = 0x60, next
		ip[42], ip[43] = byte(dport>>8), byte(dport)
		return ip
	}
	vlan := append(eth(0x8100), 0, 5, 0x08, 0x00)
	for _, tc := range []struct {
		name string
		f    []byte
		want bool
	}{
		{"IPv4 UDP 4791", append(eth(0x0800), ipv4(17, 4791)...), true},
		{"IPv4 UDP 53", append(eth(0x0800), ipv4(17, 53)...), false},
		{"IPv4 TCP 4791", append(eth(0x0800), ipv4(6, 4791)...), false},
		{"VLAN IPv4 UDP 4791", append(vlan, ipv4(17, 4791)...), true},
		{"IPv6 UDP 4791", append(eth(0x86dd), ipv6(17, 4791)...), true},
		{"ARP", append(eth(0x0806), make([]byte, 28)...), false},
		{"truncated IPv4", append(eth(0x0800), 0x45, 0), false},
		{"bad IHL", append(eth(0x0800), append([]byte{0x41}, ipv4(17, 4791)[1:]...)...), false},
		{"runt", []byte{1, 2, 3}, false},
	} {
		if got := isRoCEv2(tc.f); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
