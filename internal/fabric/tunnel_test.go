package fabric

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/testutil"
)

// freeUDPPort returns a loopback UDP port nobody has bound.
func freeUDPPort(t testing.TB) int {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

func loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

func vxlanPort(num int, local, remote string, vni int) PortConfig {
	return PortConfig{Num: num, Kind: KindVXLAN, Local: local, Remote: remote, VNI: vni}
}

// waitLong is waitFor with room for a keepalive timeout.
func waitLong(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * tunnelDeadAfter)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestVXLANTwoFabrics joins two fabrics by a VXLAN link on loopback:
// learning and forwarding across as on a cable, the link state in
// status, and the link going down when the far side stops and up when
// it is back.
func TestVXLANTwoFabrics(t *testing.T) {
	pa, pb := freeUDPPort(t), freeUDPPort(t)
	cfgA := Config{Switches: []SwitchConfig{{Name: "tor1", Ports: 4, Port: []PortConfig{vxlanPort(4, loopback(pa), loopback(pb), 42)}}}}
	cfgB := Config{Switches: []SwitchConfig{{Name: "tor2", Ports: 4, Port: []PortConfig{vxlanPort(4, loopback(pb), loopback(pa), 42)}}}}
	checkGoroutines(t)
	f1 := startUnchecked(t, cfgA)
	f2 := startUnchecked(t, cfgB)
	tor1, tor2 := f1.Switch("tor1"), f2.Switch("tor2")
	waitLong(t, "tunnel up", func() bool { return tor1.ports[3].isUp() && tor2.ports[3].isUp() })
	st := portStatus(tor1, 4)
	if st.Kind != KindVXLAN || st.Tunnel == nil || st.Tunnel.Link != "up" || st.Tunnel.VNI != 42 ||
		st.Tunnel.Encap != EncapVXLAN || st.Tunnel.Remote != loopback(pb) || st.Peer.Role != "switch" {
		t.Fatalf("tor1 port 4: %+v tunnel %+v", st, st.Tunnel)
	}
	checkAcross(t, tor1, tor2)
	st = portStatus(tor2, 4)
	if st.Tunnel.RxDatagrams < 3 || st.Tunnel.TxDatagrams < 1 || st.Tunnel.KeepalivesRx < 1 || st.Tunnel.UnderlayDrops != 0 {
		t.Errorf("tor2 tunnel counters %+v", st.Tunnel)
	}
	for r, n := range st.Tunnel.Bad {
		if n != 0 {
			t.Errorf("tor2: %d datagrams dropped as %s", n, r)
		}
	}

	// The far side stops: silence takes the link down.
	f2.Close()
	waitLong(t, "link down", func() bool { return !tor1.ports[3].isUp() })
	if st := portStatus(tor1, 4); st.Tunnel.Link != "down" || st.State != "down" {
		t.Fatalf("after silence: state %s tunnel %s", st.State, st.Tunnel.Link)
	}
	f2b := startUnchecked(t, cfgB)
	tor2 = f2b.Switch("tor2")
	waitLong(t, "link back up", func() bool { return tor1.ports[3].isUp() && tor2.ports[3].isUp() })
	checkAcross(t, tor1, tor2)
}

// remote is a test's own end of a tunnel: a UDP socket bound where the
// switch expects its remote.
type remote struct {
	t testing.TB
	c *net.UDPConn
}

func newRemote(t testing.TB, local int, sw int) *remote {
	t.Helper()
	c, err := net.DialUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: local}, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: sw})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &remote{t: t, c: c}
}

func (r *remote) send(b []byte) {
	r.t.Helper()
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// recv returns the next datagram that is not a keepalive, or nil after d.
func (r *remote) recv(d time.Duration) []byte {
	buf := make([]byte, 1<<16)
	deadline := time.Now().Add(d)
	for {
		r.c.SetReadDeadline(deadline)
		n, err := r.c.Read(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return nil
			}
			if errors.Is(err, syscall.ECONNREFUSED) {
				continue
			}
			r.t.Fatal(err)
		}
		b := buf[:n]
		if n > proto.TunnelHeaderSize && proto.IsKeepaliveFrame(b[proto.TunnelHeaderSize:]) {
			continue
		}
		if n == proto.TunnelHeaderSize && b[2]&0x0F == proto.IBUDPKeepalive {
			continue
		}
		return append([]byte(nil), b...)
	}
}

func vxlanDatagram(vni uint32, inner []byte) []byte {
	b := make([]byte, proto.TunnelHeaderSize, proto.TunnelHeaderSize+len(inner))
	proto.PutVXLAN(b, vni)
	return append(b, inner...)
}

// TestVXLANUntrusted: a remote's datagrams are checked (length, flags,
// VNI, size) and counted by reason; a datagram from another source never
// reaches the port; a valid one brings the link up and is forwarded, and
// the port's frames leave as VXLAN with the configured VNI.
func TestVXLANUntrusted(t *testing.T) {
	ps, pr := freeUDPPort(t), freeUDPPort(t)
	f := startFabric(t, Config{Switches: []SwitchConfig{{Name: "tor1", Ports: 2, MaxFrame: 1500,
		Port: []PortConfig{vxlanPort(2, loopback(ps), loopback(pr), 7)}}}})
	sw := f.Switch("tor1")
	n := connect(t, sw, 1, 1)
	r := newRemote(t, pr, ps)
	far := macN(9)
	good := ethFrame(n.mac, far, -1, 0, 100, 1)
	noI := vxlanDatagram(7, good)
	noI[0] = 0
	// Another source: a socket on another port of the same host.
	stranger := newRemote(t, freeUDPPort(t), ps)
	stranger.send(vxlanDatagram(7, good))

	r.send(vxlanDatagram(7, good)[:proto.TunnelHeaderSize+10])     // short
	r.send(noI)                                                    // no I flag
	r.send(vxlanDatagram(8, good))                                 // another VNI
	r.send(vxlanDatagram(7, ethFrame(n.mac, far, -1, 0, 1501, 2))) // over max-frame
	r.send(vxlanDatagram(7, ethFrame(n.mac, far, -1, 0, 3000, 3))) // over the read buffer
	waitFor(t, "bad datagrams counted", func() bool {
		b := portStatus(sw, 2).Tunnel.Bad
		return b[TunnelBadShort] == 1 && b[TunnelBadHeader] == 1 && b[TunnelBadVNI] == 1 && b[TunnelBadOversize] == 2
	})
	if st := portStatus(sw, 2); st.State != "down" || st.Tunnel.Link != "down" || st.Tunnel.LastSeen != -1 {
		t.Fatalf("bad datagrams brought the link up: %s %+v", st.State, st.Tunnel)
	}
	n.expectNothing(50 * time.Millisecond)

	r.send(vxlanDatagram(7, good))
	n.expectFrame(good)
	if st := portStatus(sw, 2); st.State != "up" || st.Tunnel.Link != "up" || st.Tunnel.RxDatagrams != 6 {
		t.Fatalf("after a valid datagram: %s %+v", st.State, st.Tunnel)
	}
	back := ethFrame(far, n.mac, -1, 0, 200, 4)
	n.send(back)
	got := r.recv(2 * time.Second)
	if want := vxlanDatagram(7, back); !bytes.Equal(got, want) {
		t.Fatalf("remote got %x\nwant %x", got, want)
	}
}

// TestVXLANBacklogPause: when the switch cannot take what arrives (its
// NIC does not read), the datagrams wait in the socket; past a quarter
// of the receive buffer the tunnel sends its peer a PFC XOFF of every
// priority, inside VXLAN, and an XON once the backlog drains.
func TestVXLANBacklogPause(t *testing.T) {
	ps, pr := freeUDPPort(t), freeUDPPort(t)
	f := startFabric(t, Config{Switches: []SwitchConfig{{Name: "tor1", Ports: 2, Queues: QueueConfig{Frames: 64},
		Port: []PortConfig{vxlanPort(2, loopback(ps), loopback(pr), 7)}}}})
	sw := f.Switch("tor1")
	n := connect(t, sw, 1, 1)
	setSocketBuffers(n.c, 64<<10) // the NIC reads nothing for now
	r := newRemote(t, pr, ps)
	_ = r.c.SetWriteBuffer(4 << 20)
	far := macN(9)
	// Lossless class 3 (PCP 3), towards the NIC.
	dg := vxlanDatagram(7, ethFrame(n.mac, far, 0, 3, 1400, 1))
	tun := sw.ports[1].tun
	var pfc []byte
	for sent := 0; pfc == nil; sent++ {
		if sent > 200000 {
			t.Fatalf("no pause after %d datagrams: %+v", sent, portStatus(sw, 2).Tunnel)
		}
		r.send(dg)
		if sent%64 == 63 {
			pfc = r.pfcWaiting()
		}
	}
	inner := pfc[proto.TunnelHeaderSize:]
	mc := proto.MACControl(inner[proto.EthernetHeaderSize:])
	if !mc.IsPFC() || mc.PFCEnable() != 0xFF || mc.PFCTime(3) == 0 || mc.PFCTime(0) == 0 {
		t.Fatalf("pause %x: want a PFC XOFF of every priority", inner)
	}
	if st := portStatus(sw, 2).Tunnel; !st.Paused || st.PausesSent == 0 || st.PauseAt != tun.rcvbuf/tunnelPauseFraction {
		t.Fatalf("tunnel %+v", st)
	}
	// The NIC reads everything: the backlog drains and an XON follows.
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1<<16)
		for {
			n.c.SetReadDeadline(time.Now().Add(time.Second))
			if _, err := n.c.Read(buf); err != nil {
				return
			}
		}
	}()
	for {
		d := r.recv(5 * time.Second)
		if d == nil {
			t.Fatalf("no XON: %+v", portStatus(sw, 2).Tunnel)
		}
		mc := proto.MACControl(d[proto.TunnelHeaderSize+proto.EthernetHeaderSize:])
		if mc.IsPFC() && mc.PFCTime(3) == 0 && mc.PFCEnable()&(1<<3) != 0 {
			break
		}
	}
	<-done
	if st := portStatus(sw, 2).Tunnel; st.Paused {
		t.Fatalf("still paused: %+v", st)
	}
}

// pfcWaiting returns a VXLAN datagram waiting on the socket that
// carries a PFC frame of every priority (the tunnel's pause, not the
// port's own XOFF of one class), or nil.
func (r *remote) pfcWaiting() []byte {
	buf := make([]byte, 1<<16)
	for {
		r.c.SetReadDeadline(time.Now().Add(time.Millisecond))
		n, _, err := r.c.ReadFrom(buf)
		if err != nil {
			return nil
		}
		if n > proto.TunnelHeaderSize+proto.EthernetHeaderSize+3 && isMACControl(buf[proto.TunnelHeaderSize:n]) &&
			buf[proto.TunnelHeaderSize+proto.EthernetHeaderSize+3] == 0xFF {
			return append([]byte(nil), buf[:n]...)
		}
	}
}

// TestIBUDPFlowControl: on an IB link the tunnel's XOFF and XON are
// IB-over-UDP datagrams; an XOFF from the peer is obeyed and counted.
func TestIBUDPFlowControl(t *testing.T) {
	ps, pr := freeUDPPort(t), freeUDPPort(t)
	pc := vxlanPort(2, loopback(ps), loopback(pr), 5)
	pc.Link = LinkIB
	f := startFabric(t, Config{Switches: []SwitchConfig{{Name: "tor1", Ports: 2, Port: []PortConfig{pc}}}})
	sw := f.Switch("tor1")
	r := newRemote(t, pr, ps)
	h := make([]byte, proto.TunnelHeaderSize)
	proto.PutIBUDP(h, proto.IBUDPKeepalive, 5)
	r.send(h)
	waitFor(t, "IB tunnel up", func() bool { return sw.ports[1].isUp() })
	st := portStatus(sw, 2)
	if st.Tunnel.Encap != EncapIBUDP || st.Link != LinkIB || st.Tunnel.KeepalivesRx != 1 {
		t.Fatalf("status %+v", st.Tunnel)
	}
	// The switch's own keepalive is an IB-over-UDP keepalive.
	r.c.SetReadDeadline(time.Now().Add(3 * tunnelKeepalive))
	buf := make([]byte, 64)
	k, err := r.c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if typ, vni, _, err := proto.ParseIBUDP(buf[:k]); err != nil || typ != proto.IBUDPKeepalive || vni != 5 {
		t.Fatalf("keepalive %x: %d %d %v", buf[:k], typ, vni, err)
	}
	tun := sw.ports[1].tun
	proto.PutIBUDP(h, proto.IBUDPXOFF, 5)
	r.send(h)
	waitFor(t, "XOFF obeyed", func() bool { return tun.peerStop.Load() != 0 })
	proto.PutIBUDP(h, proto.IBUDPXON, 5)
	r.send(h)
	waitFor(t, "XON obeyed", func() bool { return tun.peerStop.Load() == 0 })
	if st := portStatus(sw, 2).Tunnel; st.PausedByPeer != 1 {
		t.Fatalf("paused_by_peer %d", st.PausedByPeer)
	}
}

func TestVXLANConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		pc   PortConfig
		want string
	}{
		{"no vni", PortConfig{Num: 1, Kind: KindVXLAN, Remote: "10.0.0.2"}, "vni 0"},
		{"vni too big", PortConfig{Num: 1, Kind: KindVXLAN, Remote: "10.0.0.2", VNI: 1 << 24}, "vni 16777216"},
		{"no remote", PortConfig{Num: 1, Kind: KindVXLAN, VNI: 1}, "needs remote"},
		{"bad port", PortConfig{Num: 1, Kind: KindVXLAN, Remote: "10.0.0.2:99999", VNI: 1}, "1 to 65535"},
		{"no host", PortConfig{Num: 1, Kind: KindVXLAN, Remote: ":4789", VNI: 1}, "no host"},
		{"dial", PortConfig{Num: 1, Kind: KindVXLAN, Remote: "h", VNI: 1, Dial: "/x"}, "does not dial"},
		{"vni on seqpacket", PortConfig{Num: 1, VNI: 3}, "for kind vxlan"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Config{RunDir: shortDir(t), Switches: []SwitchConfig{{Name: "s", Ports: 2, Port: []PortConfig{tc.pc}}}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
	// Two links between one pair of addresses.
	_, err := New(Config{RunDir: shortDir(t), Switches: []SwitchConfig{{Name: "s", Ports: 2, Port: []PortConfig{
		vxlanPort(1, "", "10.0.0.2", 1), vxlanPort(2, "", "10.0.0.2:4789", 2)}}}})
	if err == nil || !strings.Contains(err.Error(), "one link per pair") {
		t.Fatalf("err %v", err)
	}
	// Defaults: the ports of each encapsulation.
	ib := vxlanPort(2, "", "[fd00::2]", 1)
	ib.Link = LinkIB
	st, err := (&Config{RunDir: "/x", Switches: []SwitchConfig{{Name: "s", Ports: 2, Port: []PortConfig{
		vxlanPort(1, "192.0.2.1", "host-b", 1), ib}}}}).resolve()
	if err != nil {
		t.Fatal(err)
	}
	p1, p2 := st[0].ports[0], st[0].ports[1]
	if p1.tunnel.local != "192.0.2.1:4789" || p1.tunnel.remote != "host-b:4789" || p2.tunnel.remote != "[fd00::2]:4792" ||
		p2.tunnel.local != ":4792" || p1.speed != DefaultTunnelSpeed || !p1.trustPause {
		t.Fatalf("resolved %+v %+v", p1, p2)
	}
}

// TestIBUDPTwoFabrics joins two fabrics by an IB-over-UDP link, on
// loopback and between two network namespaces joined by a veth pair: a
// directed-route SMP from a CA on tor1 crosses the tunnel to tor2,
// whose SMA answers back across it (NodeInfo of tor2, reached through
// its port 4).
func TestIBUDPTwoFabrics(t *testing.T) {
	t.Run("loopback", func(t *testing.T) {
		pa, pb := freeUDPPort(t), freeUDPPort(t)
		ibAcross(t, [2]string{loopback(pa), loopback(pb)}, [2]func(*net.Dialer, string, string) (net.Conn, error){})
	})
	t.Run("netns", func(t *testing.T) {
		nsp := testutil.NewNetnsPair(t)
		ibAcross(t, nsp.Addr, [2]func(*net.Dialer, string, string) (net.Conn, error){testutil.DialIn(nsp.NS[0]), testutil.DialIn(nsp.NS[1])})
	})
}

// ibAcross runs TestIBUDPTwoFabrics between tor1 at addr[0] and tor2 at
// addr[1], opening their sockets with dial (nil: in this namespace).
func ibAcross(t *testing.T, addr [2]string, dial [2]func(*net.Dialer, string, string) (net.Conn, error)) {
	port := func(local, remote string) PortConfig {
		pc := vxlanPort(4, local, remote, 9)
		pc.Link = LinkIB
		return pc
	}
	checkGoroutines(t)
	f1 := startUnchecked(t, Config{DialTunnel: dial[0], Switches: []SwitchConfig{{Name: "tor1", Ports: 4, Port: []PortConfig{{Num: 1, Link: LinkIB}, port(addr[0], addr[1])}}}})
	f2 := startUnchecked(t, Config{DialTunnel: dial[1], Switches: []SwitchConfig{{Name: "tor2", Ports: 4, Port: []PortConfig{port(addr[1], addr[0])}}}})
	tor1, tor2 := f1.Switch("tor1"), f2.Switch("tor2")
	waitLong(t, "IB tunnel up", func() bool { return tor1.ports[3].isUp() && tor2.ports[3].isUp() })
	ca := connectLink(t, tor1, 1, 1, proto.HelloLinkInfiniBand)
	near := proto.NodeInfo(smAt(t, ca, []byte{1}, proto.MADMethodGet, proto.SMPAttrNodeInfo, 0, nil))
	far := proto.NodeInfo(smAt(t, ca, []byte{1, 4}, proto.MADMethodGet, proto.SMPAttrNodeInfo, 0, nil))
	if near.NodeGUID() != tor1.cfg.nodeGUID || far.NodeGUID() != tor2.cfg.nodeGUID || far.LocalPortNum() != 4 {
		t.Fatalf("NodeInfo: near %#x, far %#x port %d; want tor1 %#x, tor2 %#x port 4",
			near.NodeGUID(), far.NodeGUID(), far.LocalPortNum(), tor1.cfg.nodeGUID, tor2.cfg.nodeGUID)
	}
	for _, sw := range []*Switch{tor1, tor2} {
		st := portStatus(sw, 4).Tunnel
		if st.Encap != EncapIBUDP || st.RxDatagrams < 2 || st.Bad[TunnelBadHeader]+st.Bad[TunnelBadShort] != 0 {
			t.Errorf("%s tunnel %+v", sw.Name(), st)
		}
	}
}

// TestVXLANLossless sends 32 MiB (24,000 frames of 1400 bytes) of lossless-class frames from a NIC on
// tor1 to a NIC on tor2, across a VXLAN link on loopback, while tor2's
// NIC reads nothing: tor2's queues, its relay and then its socket fill,
// the tunnel pauses tor1 (PFC XOFF of every priority, renewed), tor1's
// queue towards the tunnel fills and holds its NIC back. Then tor2's
// NIC reads: every frame arrives, in order, and no datagram was dropped.
func TestVXLANLossless(t *testing.T) {
	const frames, size = 24000, 1400
	pa, pb := freeUDPPort(t), freeUDPPort(t)
	checkGoroutines(t)
	f1 := startUnchecked(t, Config{Switches: []SwitchConfig{{Name: "tor1", Ports: 4, Port: []PortConfig{vxlanPort(4, loopback(pa), loopback(pb), 42)}}}})
	f2 := startUnchecked(t, Config{Switches: []SwitchConfig{{Name: "tor2", Ports: 4, Port: []PortConfig{vxlanPort(4, loopback(pb), loopback(pa), 42)}}}})
	tor1, tor2 := f1.Switch("tor1"), f2.Switch("tor2")
	waitLong(t, "tunnel up", func() bool { return tor1.ports[3].isUp() && tor2.ports[3].isUp() })
	a := connect(t, tor1, 1, 1)
	b := connect(t, tor2, 1, 2)
	setSocketBuffers(b.c, 64<<10)
	// tor2 learns b's MAC, so a's frames are unicast to port 1.
	b.send(ethFrame(a.mac, b.mac, 0, 3, 60, 0))
	a.expectFrame(ethFrame(a.mac, b.mac, 0, 3, 60, 0))
	if !hasFDB(tor2, b.mac, 1) {
		t.Fatal("tor2 did not learn b")
	}
	sent := make(chan error, 1)
	go func() {
		for i := range frames {
			fr := ethFrame(b.mac, a.mac, 0, 3, size, 0)
			binary.BigEndian.PutUint32(fr[18:], uint32(i))
			if _, err := a.c.Write(fr); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	// tor2's NIC reads only once tor1 holds a full lossless queue
	// towards the tunnel: the pause is in force and renewed, where a
	// single XOFF would lapse after 3.4 ms and let tor1 overrun tor2's
	// socket.
	deadline := time.Now().Add(3 * tunnelDeadAfter)
	for !(portStatus(tor2, 4).Tunnel.Paused && portStatus(tor1, 4).QueueBytes[3] > int64(DefaultQueueBytes)-2*size) {
		if time.Now().After(deadline) {
			t.Fatalf("tor1 does not hold the frames:\ntor1 %+v\n%+v\ntor2 %+v\n%+v",
				portStatus(tor1, 4), portStatus(tor1, 4).Tunnel, portStatus(tor2, 4), portStatus(tor2, 4).Tunnel)
		}
		time.Sleep(5 * time.Millisecond)
	}
	buf := make([]byte, 1<<16)
	for i := 0; i < frames; {
		b.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := b.c.Read(buf)
		if err != nil {
			t.Fatalf("after %d frames: %v\ntor2 tunnel %+v", i, err, portStatus(tor2, 4).Tunnel)
		}
		if isMACControl(buf[:n]) {
			continue
		}
		if got := binary.BigEndian.Uint32(buf[18:]); n != size || got != uint32(i) {
			t.Fatalf("frame %d: got %d bytes, number %d\ntor1 %+v\n%+v\ntor2 %+v\n%+v", i, n, got,
				portStatus(tor1, 4), portStatus(tor1, 4).Tunnel, portStatus(tor2, 4), portStatus(tor2, 4).Tunnel)
		}
		i++
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	st1, st2 := portStatus(tor1, 4), portStatus(tor2, 4)
	t.Logf("tor2 tunnel: %d datagrams, %d pauses sent, backlog pause at %d B of %d; tor1 port 4: %d PFC frames received",
		st2.Tunnel.RxDatagrams, st2.Tunnel.PausesSent, st2.Tunnel.PauseAt, st2.Tunnel.RecvBuffer, st1.PFCRecv)
	if st1.Tunnel.UnderlayDrops+st2.Tunnel.UnderlayDrops != 0 || st1.PFCRecv == 0 || st2.Classes[3].QueueFull != 0 {
		t.Fatalf("underlay drops %d/%d, tor1 PFC received %d, tor2 lossless tail drops %d",
			st1.Tunnel.UnderlayDrops, st2.Tunnel.UnderlayDrops, st1.PFCRecv, st2.Classes[3].QueueFull)
	}
}

// BenchmarkInterSwitch measures forwarding from a NIC on tor1 to a NIC
// on tor2, two fabrics joined either by a vxlan port on loopback or,
// as the reference, by a dialling seqpacket port (the link between two
// fabrics on one host).
func BenchmarkInterSwitch(b *testing.B) {
	for _, link := range []string{"vxlan", "seqpacket"} {
		for _, size := range []int{64, 1500, 4200} {
			b.Run(fmt.Sprintf("link=%s/size=%d", link, size), func(b *testing.B) {
				cfg1 := Config{NoShm: true, Switches: []SwitchConfig{{Name: "tor1", Ports: 4}}}
				cfg2 := Config{NoShm: true, Switches: []SwitchConfig{{Name: "tor2", Ports: 4}}}
				if link == "vxlan" {
					pa, pb := freeUDPPort(b), freeUDPPort(b)
					cfg1.Switches[0].Port = []PortConfig{vxlanPort(4, loopback(pa), loopback(pb), 1)}
					cfg2.Switches[0].Port = []PortConfig{vxlanPort(4, loopback(pb), loopback(pa), 1)}
				}
				f1 := startUnchecked(b, cfg1)
				tor1 := f1.Switch("tor1")
				if link != "vxlan" {
					cfg2.Switches[0].Port = []PortConfig{{Num: 4, Dial: tor1.SocketPath(4)}}
				}
				tor2 := startUnchecked(b, cfg2).Switch("tor2")
				waitLong(b, "link up", func() bool { return tor1.ports[3].isUp() && tor2.ports[3].isUp() })
				gen, sink := connect(b, tor1, 1, 1), connect(b, tor2, 1, 2)
				gen.mac, sink.mac = benchSrc, benchDst
				hi := ethFrame(bcast, benchDst, -1, 0, 60, 0)
				sink.send(hi)
				gen.expectFrame(hi)
				go io.Copy(io.Discard, gen.c)
				r := offer(context.Background(), gen.c, sink.c, size, time.Second)
				b.ReportMetric(r.FPS, "frames/s")
				b.ReportMetric(r.Gbps, "Gbit/s")
				b.ReportMetric(float64(r.Lost), "lost")
			})
		}
	}
}
