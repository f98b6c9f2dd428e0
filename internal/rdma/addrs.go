package rdma

import (
	"fmt"
	"net/netip"
)

// addrTable is a RoCE port's GID table with the addresses it came from:
// index 0 the link-local GID of the MAC, then ::ffff:a.b.c.d for each IPv4
// address, then the IPv6 addresses. An InfiniBand port's table holds its
// one port GID. A table is never changed once published; SetIPv4 builds a
// new one.
type addrTable struct {
	gids [][16]byte
	ipv4 [][4]byte // the IPv4 addresses of the table (destination check)
	ipv6 []netip.Addr
}

func newAddrTable(mac [6]byte, v4, v6 []netip.Addr) (*addrTable, error) {
	t := &addrTable{gids: [][16]byte{linkLocalGID(mac)}}
	for _, a := range v4 {
		if !a.Is4() {
			return nil, fmt.Errorf("IPv4 address %v is not IPv4: %w", a, ErrInvalid)
		}
		t.ipv4 = append(t.ipv4, a.As4())
		t.gids = append(t.gids, a.As16()) // ::ffff:a.b.c.d
	}
	for _, a := range v6 {
		if !a.Is6() || a.Is4In6() {
			return nil, fmt.Errorf("IPv6 address %v is not IPv6: %w", a, ErrInvalid)
		}
		t.ipv6 = append(t.ipv6, a)
		t.gids = append(t.gids, a.As16())
	}
	return t, nil
}

// gidTable returns the current GID table; the caller must not change it.
func (d *Device) gidTable() [][16]byte { return d.addrs.Load().gids }

// SetIPv4 replaces the IPv4 addresses of a RoCE port, and with them the
// GID table entries from index 1 (the link-local GID stays at 0, the IPv6
// GIDs follow the IPv4 ones), while QPs and other resources exist: what a
// NIC does when the host adds or removes an address. Work posted after
// the call uses the new table; a QP or address handle whose path was
// built from the old table keeps its source GID, and one whose SGID index
// no longer exists fails at its next modify or post. Frames to an address
// no longer ours are dropped from then on.
func (d *Device) SetIPv4(ips []netip.Addr) error {
	if d.ib() {
		return fmt.Errorf("rdma: set IPv4 addresses: an InfiniBand port has no IP GIDs: %w", ErrInvalid)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	t, err := newAddrTable(d.cfg.MAC, ips, d.addrs.Load().ipv6)
	if err != nil {
		return fmt.Errorf("rdma: set IPv4 addresses: %w", err)
	}
	d.addrs.Store(t)
	return nil
}
