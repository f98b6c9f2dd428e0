package fabric

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/proto"
)

// shortDir returns a temporary directory with a path short enough for
// UNIX socket names (t.TempDir's can pass 108 bytes).
func shortDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "hf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// checkGoroutines fails t if goroutines started after base are still
// running once the test's cleanups have run.
func checkGoroutines(t testing.TB) {
	t.Helper()
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(15 * time.Second)
		for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > base {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Errorf("goroutine leak: %d running, %d before\n%s", n, base, buf)
		}
	})
}

// startFabric starts a fabric from cfg in a fresh run directory and
// closes it (checking for goroutine leaks) when the test ends.
func startFabric(t testing.TB, cfg Config) *Fabric {
	t.Helper()
	checkGoroutines(t)
	return startUnchecked(t, cfg)
}

// startUnchecked is startFabric without the leak check, for tests with
// several fabrics whose sessions come and go: they check once, at the
// end.
func startUnchecked(t testing.TB, cfg Config) *Fabric {
	t.Helper()
	if cfg.RunDir == "" {
		cfg.RunDir = shortDir(t)
	}
	f, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := f.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// nic is a test peer on a port: an emulated NIC that sends and receives
// raw frames.
type nic struct {
	t    testing.TB
	c    *net.UnixConn
	mac  [6]byte
	name string
}

func macN(n byte) [6]byte { return [6]byte{0x52, 0x54, 0, 0, 0, n} }

// connect dials port num of sw as a NIC with MAC macN(id).
func connect(t testing.TB, sw *Switch, num int, id byte) *nic {
	t.Helper()
	return connectLink(t, sw, num, id, proto.HelloLinkEthernet)
}

func connectLink(t testing.TB, sw *Switch, num int, id byte, link proto.HelloLink) *nic {
	t.Helper()
	n := &nic{t: t, mac: macN(id), name: "nic" + string('0'+rune(id))}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, ans, err := DialPort(ctx, sw.SocketPath(num), &proto.HelloFields{
		Version: proto.HelloVersion, LinkLayer: link, Role: proto.HelloRoleNIC,
		MaxFrame: uint16(min(4200, sw.ports[num-1].cfg.maxFrame)), MAC: n.mac, PortNum: 1, Name: n.name,
	})
	if err != nil {
		t.Fatalf("connect port %d: %v", num, err)
	}
	if ans.PortNum() != uint8(num) {
		t.Errorf("answer PortNum = %d, want %d", ans.PortNum(), num)
	}
	n.c = c
	t.Cleanup(func() { c.Close() })
	waitFor(t, "port up", func() bool { return sw.ports[num-1].isUp() })
	return n
}

func (n *nic) send(frame []byte) {
	n.t.Helper()
	if _, err := n.c.Write(frame); err != nil {
		n.t.Fatalf("%s send: %v", n.name, err)
	}
}

// recv returns the next frame, or nil after d.
func (n *nic) recv(d time.Duration) []byte {
	n.t.Helper()
	buf := make([]byte, 1<<16)
	n.c.SetReadDeadline(time.Now().Add(d))
	defer n.c.SetReadDeadline(time.Time{})
	k, err := n.c.Read(buf)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil
		}
		n.t.Fatalf("%s recv: %v", n.name, err)
	}
	return buf[:k]
}

// recvData returns the next frame that is not MAC Control, or nil.
func (n *nic) recvData(d time.Duration) []byte {
	n.t.Helper()
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return nil
		}
		f := n.recv(left)
		if f == nil || !isMACControl(f) {
			return f
		}
	}
}

// expectFrame waits for a data frame equal to want.
func (n *nic) expectFrame(want []byte) {
	n.t.Helper()
	got := n.recvData(2 * time.Second)
	if got == nil {
		n.t.Fatalf("%s: no frame, want %x", n.name, want[:min(len(want), 32)])
	}
	if !bytes.Equal(got, want) {
		n.t.Fatalf("%s: got frame %x, want %x", n.name, got[:min(len(got), 32)], want[:min(len(want), 32)])
	}
}

// expectNothing checks that no data frame arrives within d.
func (n *nic) expectNothing(d time.Duration) {
	n.t.Helper()
	if got := n.recvData(d); got != nil {
		n.t.Fatalf("%s: unexpected frame %x", n.name, got[:min(len(got), 32)])
	}
}

func isMACControl(f []byte) bool {
	return len(f) >= 14 && binary.BigEndian.Uint16(f[12:]) == proto.EtherTypeMACControl
}

var bcast = [6]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}

// ethFrame builds an Ethernet frame of size bytes (at least 60) with an
// optional 802.1Q tag (vlan < 0: untagged) and a payload marker.
func ethFrame(dst, src [6]byte, vlan int, pcp uint8, size int, marker byte) []byte {
	f := proto.EthernetFields{Dst: dst, Src: src, EtherType: 0x88B5} // local experimental
	if vlan >= 0 {
		f.VLAN = true
		f.VLANID = uint16(vlan)
		f.PCP = pcp
	}
	size = max(size, 60)
	b := make([]byte, size)
	proto.Ethernet(b).Encode(&f)
	for i := f.Size(); i < size; i++ {
		b[i] = marker
	}
	return b
}

// roceFrame builds a RoCEv2 SEND-only frame over IPv4 with the given TOS
// (DSCP<<2 | ECN) and payload size.
func roceFrame(t testing.TB, dst, src [6]byte, tos uint8, payload int, psn uint32) []byte {
	t.Helper()
	pf := proto.PacketFields{
		Eth: proto.EthernetFields{Dst: dst, Src: src},
		IP4: proto.IPv4Fields{TOS: tos, TTL: 64, Flags: 2, Src: [4]byte{10, 42, 0, 1}, Dst: [4]byte{10, 42, 0, 2}},
		UDP: proto.UDPFields{SrcPort: 49152},
		BTH: proto.BTHFields{Opcode: proto.OpRCSendOnly, PKey: 0xFFFF, DestQP: 0x11, PSN: proto.PSN(psn)},
	}
	pf.Payload = bytes.Repeat([]byte{0xA5}, payload)
	buf := make([]byte, pf.Len())
	n, err := pf.Encode(buf)
	if err != nil {
		t.Fatalf("encode RoCEv2: %v", err)
	}
	return buf[:n]
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func portStatus(sw *Switch, num int) PortStatus { return sw.ports[num-1].status() }

func hasFDB(sw *Switch, mac [6]byte, port int) bool {
	m := net.HardwareAddr(mac[:]).String()
	for _, e := range sw.Status().FDB {
		if strings.EqualFold(e.MAC, m) && e.Port == port {
			return true
		}
	}
	return false
}

// torndown says whether p's last session has been torn down in full: the
// link is down, its frames and FDB entries are gone and the port takes a
// new peer. isUp turns false at the start of a teardown, so a test that
// then checks the rest or reconnects waits for this instead.
func torndown(p *port) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sess == nil && !p.up.Load()
}
