package integration

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
)

// newPinnedTestbed is newTestbed with each vNIC's own IPv4 address
// pinned (allow-ip=10.42.0.N), as `hinic deploy rack` pins them.
func newPinnedTestbed(t *testing.T, n int) *testbed {
	t.Helper()
	return newTestbedConfig(t, n, func(_ int, c *device.VNICConfig) {
		c.AllowedIPs = []netip.Prefix{netip.PrefixFrom(c.IPv4[0], 32)}
	})
}

// linkLocal is the IPv6 link-local address Linux gives a netdev with
// MAC mac (EUI-64, addr_gen_mode 0).
func linkLocal(mac [6]byte) [16]byte {
	return [16]byte{0: 0xfe, 1: 0x80, 8: mac[0] ^ 2, 9: mac[1], 10: mac[2], 11: 0xff, 12: 0xfe, 13: mac[3],
		14: mac[4], 15: mac[5]}
}

// TestPinnedSetAddr: guest C, whose vNIC has its own address pinned,
// gives its device guest A's IPv4 address with SET_ADDR, then connects
// an RC QP to guest B's QP that is connected to A and WRITEs into B's
// MR. Before, SET_ADDR took the address: C's RoCEv2 packets left from
// A's IP, B's remote-address check (fromPeer) took them as A's and the
// WRITE landed. Now SET_ADDR fails with EACCES and is counted, C's GID
// stays its own, B drops C's WRITE as from a foreign address, and A's
// WRITE with the same PSN lands. C's own address is still accepted.
func TestPinnedSetAddr(t *testing.T) {
	tb := newPinnedTestbed(t, 3)
	ctx := testCtx(t)
	a, b := connectPair(t, tb, false)
	gc := tb.guests[2]
	ipA, ipC := tb.cfgs[0].IPv4[0].As4(), tb.cfgs[2].IPv4[0].As4()
	wantStatus(t, setAddr(t, gc, [6]byte{}, 0, 1, ipA), device.StEACCES)
	wantStatus(t, setAddr(t, gc, [6]byte{}, 0, 2, ipC, ipA), device.StEACCES)
	if err := setAddr(t, gc, [6]byte{}, 0, 1, ipC); err != nil {
		t.Fatalf("SET_ADDR with C's own pinned address: %v", err)
	}
	if st := tb.srv.Status().VNICs[2]; st.Counters.SetAddrRefused != 2 || st.Counters.Spoofed() != 2 ||
		!slices.Equal(st.AllowedIPs, []string{"10.42.0.3/32"}) {
		t.Errorf("status: set_addr_refused %d, spoofed %d, allowed %q; want 2, 2, [10.42.0.3/32]",
			st.Counters.SetAddrRefused, st.Counters.Spoofed(), st.AllowedIPs)
	}

	c := newRCEnd(t, gc, tb.cfgs[2].MAC, false)
	if want := netip.AddrFrom4(ipC).As16(); c.gid != want {
		t.Fatalf("C's GID 1 is %x; want its own %x", c.gid, want)
	}
	c.connect(t, b)
	before := read(t, b.g, b.buf, 64)
	fill(t, gc, c.buf, 64, 0xe1)
	c.qp.PostSend(device.SendWQE{WRID: 1, Opcode: uint8(rdma.WRRDMAWrite), SendFlags: uint16(rdma.SendSignaled),
		RemoteAddr: b.buf, RKey: b.rkey}, []device.SGE{{Addr: c.buf, Length: 64, LKey: c.lkey}}, nil)
	for tb.srv.Status().VNICs[1].Engine.RxAddrMismatch == 0 {
		if !bytes.Equal(read(t, b.g, b.buf, 64), before) {
			t.Fatal("guest C's WRITE landed in guest B's MR")
		}
		if ctx.Err() != nil {
			t.Fatal("guest C's WRITE was neither taken nor counted as from a foreign address")
		}
		time.Sleep(time.Millisecond)
	}
	want := fill(t, a.g, a.buf, 64, 7)
	a.qp.PostSend(device.SendWQE{WRID: 2, Opcode: uint8(rdma.WRRDMAWrite), SendFlags: uint16(rdma.SendSignaled),
		RemoteAddr: b.buf, RKey: b.rkey}, []device.SGE{{Addr: a.buf, Length: 64, LKey: a.lkey}}, nil)
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCRDMAWrite, 2)
	if got := read(t, b.g, b.buf, 64); !bytes.Equal(got, want) {
		t.Fatalf("A's WRITE: B holds %x", got)
	}
}

// Frame builders for TestPinnedL2Source: just the fields the backend
// and the switch read, checksums zero.
func ethFrame(dst, src [6]byte, typ uint16, payload []byte) []byte {
	f := append(append(dst[:], src[:]...), byte(typ>>8), byte(typ))
	f = append(f, payload...)
	for len(f) < 60 {
		f = append(f, 0)
	}
	return f
}

func ipv4Hdr(src, dst [4]byte, payload []byte) []byte {
	h := make([]byte, 20, 20+len(payload))
	h[0], h[8], h[9] = 0x45, 64, 17 // IPv4, IHL 5, TTL 64, UDP
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(payload)))
	copy(h[12:], src[:])
	copy(h[16:], dst[:])
	return append(h, payload...)
}

func ipv6Hdr(src, dst [16]byte, next byte, payload []byte) []byte {
	h := make([]byte, 40, 40+len(payload))
	h[0], h[6], h[7] = 0x60, next, 255
	binary.BigEndian.PutUint16(h[4:], uint16(len(payload)))
	copy(h[8:], src[:])
	copy(h[24:], dst[:])
	return append(h, payload...)
}

func arpPkt(op uint16, sha [6]byte, spa [4]byte, tha [6]byte, tpa [4]byte) []byte {
	p := []byte{0, 1, 0x08, 0, 6, 4, byte(op >> 8), byte(op)}
	p = append(append(append(append(p, sha[:]...), spa[:]...), tha[:]...), tpa[:]...)
	return p
}

// icmp6ND is a Neighbor Solicitation (135) or Advertisement (136) for
// target (RFC 4861 4.3, 4.4).
func icmp6ND(typ byte, target [16]byte) []byte {
	m := []byte{typ, 0, 0, 0, 0x60, 0, 0, 0}
	return append(m, target[:]...)
}

// TestPinnedL2Source: guest C, whose vNIC has its own address pinned,
// queues frames on its L2 TX ring with its own MAC but guest A's
// addresses: an RC WRITE to guest B's QP (connected to A) with A's IPv4
// source and the PSN B expects, the same VLAN-tagged, an ARP reply
// claiming A's IPv4, an ARP with A's MAC as sender, IPv6 from A's
// link-local address, a Neighbor Advertisement for A's, and an IPv4
// header cut short. Then honest frames: UDP from C's address, ARP for
// C's, IPv6 from C's link-local, a duplicate-address probe from ::.
// Before, every frame reached the switch and the WRITE landed in B's
// MR. Now the backend drops and counts the forged ones: B receives the
// honest ones, in order, its engine no RoCEv2 packet, and A's WRITE
// with that PSN lands.
func TestPinnedL2Source(t *testing.T) {
	tb := newPinnedTestbed(t, 3)
	ctx := testCtx(t)
	a, b := connectPair(t, tb, false)
	lc, err := tb.guests[2].NewL2()
	if err != nil {
		t.Fatal(err)
	}
	lb, err := tb.guests[1].NewL2()
	if err != nil {
		t.Fatal(err)
	}
	macA, macB, macC := tb.cfgs[0].MAC, tb.cfgs[1].MAC, tb.cfgs[2].MAC
	ipA, ipB, ipC := tb.cfgs[0].IPv4[0].As4(), tb.cfgs[1].IPv4[0].As4(), tb.cfgs[2].IPv4[0].As4()
	evil := bytes.Repeat([]byte{0xe1}, 64)
	rf := proto.PacketFields{Link: proto.LinkEthernet,
		Eth:  proto.EthernetFields{Dst: macB, Src: macC},
		IP4:  proto.IPv4Fields{TTL: 64, Flags: 0b010, Src: ipA, Dst: ipB},
		UDP:  proto.UDPFields{SrcPort: 0xc000},
		BTH:  proto.BTHFields{Opcode: proto.OpRCWriteOnly, PKey: 0xffff, DestQP: b.qp.QPN, PSN: 100},
		RETH: proto.RETHFields{VA: b.buf, RKey: b.rkey, DMALength: uint32(len(evil))}, Payload: evil}
	write := make([]byte, rf.Len())
	if _, err := rf.Encode(write); err != nil {
		t.Fatal(err)
	}
	// The same behind an 802.1Q tag.
	tagged := append(append(append([]byte{}, write[:12]...), 0x81, 0x00, 0x00, 0x05), write[12:]...)
	udp := []byte{0x30, 0x39, 0x30, 0x39, 0, 12, 0, 0, 'h', 'i', '!', '!'}
	var zero6 [6]byte
	bad := [][]byte{
		write,
		tagged,
		ethFrame(macB, macC, proto.EtherTypeARP, arpPkt(2, macC, ipA, macB, ipB)),
		ethFrame(macB, macC, proto.EtherTypeARP, arpPkt(2, macA, ipC, macB, ipB)),
		ethFrame(macB, macC, proto.EtherTypeIPv6, ipv6Hdr(linkLocal(macA), linkLocal(macB), 17, udp)),
		ethFrame(macB, macC, proto.EtherTypeIPv6, ipv6Hdr(linkLocal(macC), linkLocal(macB), 58,
			icmp6ND(136, linkLocal(macA)))),
		append(append(append([]byte{}, macB[:]...), macC[:]...), 0x08, 0x00, 0x45, 0, 0, 20),
	}
	honest := [][]byte{
		ethFrame(macB, macC, proto.EtherTypeIPv4, ipv4Hdr(ipC, ipB, udp)),
		ethFrame(macB, macC, proto.EtherTypeARP, arpPkt(1, macC, ipC, zero6, ipB)),
		ethFrame(macB, macC, proto.EtherTypeIPv6, ipv6Hdr(linkLocal(macC), linkLocal(macB), 17, udp)),
		ethFrame(macB, macC, proto.EtherTypeIPv6, ipv6Hdr([16]byte{}, linkLocal(macB), 58,
			icmp6ND(135, linkLocal(macC)))),
		ethFrame(macB, macC, proto.EtherTypeIPv6, ipv6Hdr(linkLocal(macC), linkLocal(macB), 58,
			icmp6ND(136, linkLocal(macC)))),
	}
	for _, f := range append(append([][]byte{}, bad...), honest...) {
		if err := lc.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	// The switch keeps one port's frames in order, and B's backend
	// counts a RoCEv2 frame before it passes a later one to the netdev:
	// once B has the honest frames, a forged frame that got out has
	// been counted.
	for i, want := range honest {
		got, err := lb.Recv(ctx)
		if err != nil {
			t.Fatalf("B's frame %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("B's frame %d is %x; want the honest %x", i, got, want)
		}
	}
	if n := tb.srv.Status().VNICs[1].Counters.RoCERx; n != 0 {
		t.Errorf("B's backend got %d RoCEv2 frames from guest C", n)
	}
	if got := tb.srv.Status().VNICs[2].Counters; got.L2TxIPSpoofed != uint64(len(bad)) || got.L2TxSpoofed != 0 {
		t.Errorf("C's vNIC counted %d frames with an unpinned address and %d with a foreign MAC; want %d and 0",
			got.L2TxIPSpoofed, got.L2TxSpoofed, len(bad))
	}
	want := fill(t, a.g, a.buf, 64, 7)
	a.qp.PostSend(device.SendWQE{WRID: 1, Opcode: uint8(rdma.WRRDMAWrite), SendFlags: uint16(rdma.SendSignaled),
		RemoteAddr: b.buf, RKey: b.rkey}, []device.SGE{{Addr: a.buf, Length: 64, LKey: a.lkey}}, nil)
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCRDMAWrite, 1)
	if got := read(t, b.g, b.buf, 64); !bytes.Equal(got, want) {
		t.Fatalf("A's WRITE: B holds %x", got)
	}
}

// TestUnpinnedAddresses: a vNIC without allowed addresses keeps the
// behaviour from before port security: SET_ADDR takes any address, and
// frames with any IPv4 source leave.
func TestUnpinnedAddresses(t *testing.T) {
	tb := newTestbed(t, 2)
	ctx := testCtx(t)
	if err := setAddr(t, tb.guests[0], [6]byte{}, 0, 1, [4]byte{192, 0, 2, 7}); err != nil {
		t.Fatalf("SET_ADDR on a vNIC without pins: %v", err)
	}
	la, err := tb.guests[0].NewL2()
	if err != nil {
		t.Fatal(err)
	}
	lb, err := tb.guests[1].NewL2()
	if err != nil {
		t.Fatal(err)
	}
	f := ethFrame(tb.cfgs[1].MAC, tb.cfgs[0].MAC, proto.EtherTypeIPv4, ipv4Hdr([4]byte{198, 51, 100, 1},
		tb.cfgs[1].IPv4[0].As4(), []byte{0x30, 0x39, 0x30, 0x39, 0, 8, 0, 0}))
	if err := la.Send(f); err != nil {
		t.Fatal(err)
	}
	if got, err := lb.Recv(ctx); err != nil || !bytes.Equal(got, f) {
		t.Fatalf("B got %x, %v; want %x", got, err, f)
	}
}

// TestAllowedIPsRefuseOwnIP: a vNIC whose ip= is not among its pinned
// addresses does not start: its own GID would be refused.
func TestAllowedIPsRefuseOwnIP(t *testing.T) {
	dir := t.TempDir()
	c := vnicConfig(dir, 1, "")
	c.AllowedIPs = []netip.Prefix{netip.MustParsePrefix("10.42.1.0/24"), netip.MustParsePrefix("::ffff:10.42.0.9/128")}
	srv, err := device.Start(testCtx(t), device.Config{VNICs: []device.VNICConfig{c}})
	if err == nil {
		srv.Close()
		t.Fatal("a vNIC whose ip= is not pinned started")
	}
	if !strings.Contains(err.Error(), "10.42.0.1 is not among the allowed addresses") {
		t.Fatalf("Start = %v; want it to name the address", err)
	}
	c.AllowedIPs = append(c.AllowedIPs, netip.MustParsePrefix("::ffff:10.42.0.0/120"))
	srv, err = device.Start(testCtx(t), device.Config{VNICs: []device.VNICConfig{c}})
	if err != nil {
		t.Fatalf("Start with ip= pinned as an IPv4-mapped prefix: %v", err)
	}
	defer srv.Close()
	if got := srv.Status().VNICs[0].AllowedIPs; !slices.Equal(got, []string{"10.42.1.0/24", "10.42.0.9/32", "10.42.0.0/24"}) {
		t.Errorf("allowed %q", got)
	}
}
