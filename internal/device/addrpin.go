package device

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/PacketFive/hinic/internal/proto"
)

// ErrAllowedIP is the error of ParseAllowedIP.
var ErrAllowedIP = errors.New("want an IPv4 or IPv6 address or prefix, such as 10.42.0.1, 10.42.0.0/24 or fd00::/64")

// ParseAllowedIP parses one address the host pins to a vNIC
// (VNICConfig.AllowedIPs, the --vnic key allow-ip=): an IPv4 or IPv6
// address, which is a prefix of its full length, or a prefix in CIDR
// form. Host bits of a prefix are cleared. An IPv4-mapped IPv6 address
// or prefix (::ffff:10.42.0.1, the RoCEv2 GID of 10.42.0.1) is the IPv4
// one. Zones are refused: a pin holds on every link.
func ParseAllowedIP(s string) (netip.Prefix, error) {
	var p netip.Prefix
	var err error
	if strings.Contains(s, "/") {
		p, err = netip.ParsePrefix(s)
	} else {
		var a netip.Addr
		if a, err = netip.ParseAddr(s); err == nil {
			if a.Zone() != "" {
				return netip.Prefix{}, fmt.Errorf("%q: a zone: %w", s, ErrAllowedIP)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
	}
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q: %w", s, ErrAllowedIP)
	}
	return unmapPrefix(p), nil
}

// unmapPrefix turns an IPv4-mapped IPv6 prefix of at least 96 bits into
// the IPv4 one and clears host bits.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked()
}

// addrPins is the port security of a vNIC with allowed addresses: the
// IPv4 and IPv6 sources its guest may use in SET_ADDR and in the frames
// of its L2 TX ring. Read-only once built, so safe for concurrent use.
type addrPins struct {
	prefixes  []netip.Prefix
	mac       [6]byte
	linkLocal [16]byte // fe80::/64 with the EUI-64 of mac, always allowed
}

// newAddrPins returns the pins of a configuration, nil when it has none
// (every address is allowed).
func newAddrPins(c *VNICConfig) *addrPins {
	if len(c.AllowedIPs) == 0 {
		return nil
	}
	p := &addrPins{prefixes: c.AllowedIPs, mac: c.MAC}
	p.linkLocal[0], p.linkLocal[1] = 0xfe, 0x80
	g := eui64(c.MAC)
	for i := range 8 {
		p.linkLocal[8+i] = byte(g >> (56 - 8*i))
	}
	return p
}

// allows reports whether a is a pinned address.
func (p *addrPins) allows(a netip.Addr) bool {
	a = a.Unmap()
	for _, q := range p.prefixes {
		if q.Contains(a) {
			return true
		}
	}
	return false
}

// allowsSource reports whether an IPv6 address may be a source: pinned,
// the vNIC's own link-local address, or unspecified (duplicate address
// detection sends its solicitations from ::, RFC 4862 5.4.2; no peer's
// path has it).
func (p *addrPins) allows6(b [16]byte) bool {
	return b == p.linkLocal || b == [16]byte{} || p.allows(netip.AddrFrom16(b))
}

// allows4 is allows6 for IPv4: 0.0.0.0 is the source of DHCP requests
// and of ARP probes (RFC 5227 2.1.1).
func (p *addrPins) allows4(b [4]byte) bool {
	return b == [4]byte{} || p.allows(netip.AddrFrom4(b))
}

// Offsets within the headers the frame check reads.
const (
	arpLen           = 28 // Ethernet/IPv4 ARP (RFC 826)
	arpSHA           = 8
	arpSPA           = 14
	ipv4MinLen       = 20
	ipv4Src          = 12
	ipv6Len          = 40
	ipv6NextHdr      = 6
	ipv6Src          = 8
	ipProtoICMPv6    = 58
	icmp6NeighborAdv = 136
	ndTarget         = 8 // the target address of an NS or NA (RFC 4861 4.3, 4.4)
)

// frameAllowed reports whether the L3 source of a frame the guest
// queued is pinned. typ and off are its EtherType and the offset of its
// payload, past any VLAN tags. Checked are:
//
//   - IPv4: the source address;
//   - ARP (Ethernet/IPv4): the sender's protocol address, and the
//     sender's hardware address is the vNIC's MAC (a neighbour cache
//     would otherwise learn another's);
//   - IPv6: the source address, and in a Neighbor Advertisement that
//     follows the fixed header the target address (the address the
//     advertisement claims; RFC 4861 4.4), which must be pinned or the
//     vNIC's link-local address.
//
// A frame of those types too short to hold the field is refused. Other
// EtherTypes pass: the RDMA engines of the peers (fromPeer) and their
// neighbour tables take addresses only from IPv4, IPv6 and ARP.
func (p *addrPins) frameAllowed(f []byte, typ uint16, off int) bool {
	l3 := f[off:]
	switch typ {
	case proto.EtherTypeIPv4:
		if len(l3) < ipv4MinLen {
			return false
		}
		return p.allows4([4]byte(l3[ipv4Src:]))
	case proto.EtherTypeARP:
		if len(l3) < arpLen {
			return false
		}
		// htype 1 (Ethernet), ptype IPv4, hlen 6, plen 4.
		if l3[0] != 0 || l3[1] != 1 || l3[2] != 0x08 || l3[3] != 0 || l3[4] != 6 || l3[5] != 4 {
			return false
		}
		return [6]byte(l3[arpSHA:]) == p.mac && p.allows4([4]byte(l3[arpSPA:]))
	case proto.EtherTypeIPv6:
		if len(l3) < ipv6Len {
			return false
		}
		if !p.allows6([16]byte(l3[ipv6Src:])) {
			return false
		}
		if l3[ipv6NextHdr] == ipProtoICMPv6 && len(l3) > ipv6Len && l3[ipv6Len] == icmp6NeighborAdv {
			icmp := l3[ipv6Len:]
			if len(icmp) < ndTarget+16 {
				return false
			}
			t := [16]byte(icmp[ndTarget:])
			return t == p.linkLocal || p.allows(netip.AddrFrom16(t))
		}
		return true
	}
	return true
}
