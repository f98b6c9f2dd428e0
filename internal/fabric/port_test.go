package fabric

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/proto"
)

// rawHello sends msg as the first message on port num and returns the
// answer (nil if the switch closed without one).
func rawHello(t *testing.T, path string, msg []byte) proto.Hello {
	t.Helper()
	c, err := net.Dial("unixpacket", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(7 * time.Second))
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	if err != nil || n == 0 {
		return nil
	}
	h, err := proto.ParseHello(buf[:n])
	if err != nil {
		t.Fatalf("answer does not parse: %v", err)
	}
	// After a refusal the switch closes the connection.
	if h.Status() != proto.HelloOK {
		if n, err := c.Read(buf); n != 0 || err == nil {
			t.Errorf("connection still open after status %d", h.Status())
		}
	}
	return h
}

func TestHello(t *testing.T) {
	f := startFabric(t, Config{Ports: 3, Switches: []SwitchConfig{{
		Name: "sw0", Port: []PortConfig{{Num: 2, Link: "ib"}},
	}}, NewIB: fakeIBFactory})
	sw := f.Switch("sw0")
	good := proto.HelloFields{Version: 1, LinkLayer: proto.HelloLinkEthernet, Role: proto.HelloRoleNIC, MaxFrame: 4200, Name: "host1/hicain0"}
	enc := func(h proto.HelloFields) []byte { return proto.AppendHello(nil, &h) }

	tests := []struct {
		name string
		port int
		msg  []byte
		want uint16
	}{
		{"ok", 1, enc(good), proto.HelloOK},
		{"garbage", 1, []byte("hello, switch"), proto.HelloMalformed},
		{"empty name, bad length", 1, append(enc(good), 0), proto.HelloMalformed},
		{"too long for a hello", 1, make([]byte, 200), proto.HelloMalformed},
		{"version 2", 1, enc(proto.HelloFields{Version: 2, LinkLayer: 1, Role: 1}), proto.HelloBadVersion},
		{"role 0", 1, enc(proto.HelloFields{Version: 1, LinkLayer: 1, Role: 0}), proto.HelloMalformed},
		{"ib hello on ethernet port", 1, enc(proto.HelloFields{Version: 1, LinkLayer: 2, Role: 1}), proto.HelloWrongLinkLayer},
		{"ethernet hello on ib port", 2, enc(good), proto.HelloWrongLinkLayer},
		{"frame too big", 1, enc(proto.HelloFields{Version: 1, LinkLayer: 1, Role: 1, MaxFrame: 65000}), proto.HelloFrameTooBig},
		{"switch role ok", 3, enc(proto.HelloFields{Version: 1, LinkLayer: 1, Role: 2, Name: "tor2/port9"}), proto.HelloOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawHello(t, sw.SocketPath(tt.port), tt.msg)
			if h == nil {
				t.Fatal("no answer")
			}
			if h.Status() != tt.want {
				t.Fatalf("status %d (%s), want %d", h.Status(), proto.HelloStatusText(h.Status()), tt.want)
			}
			if h.Role() != proto.HelloRoleSwitch || h.PortNum() != uint8(tt.port) || h.Version() != 1 {
				t.Errorf("answer role %d port %d version %d", h.Role(), h.PortNum(), h.Version())
			}
			// The peer of an accepted hello closes; wait for the port to
			// be free again.
			waitFor(t, "port free", func() bool { return torndown(sw.ports[tt.port-1]) })
		})
	}

	t.Run("busy", func(t *testing.T) {
		n1 := connect(t, sw, 1, 1)
		_ = n1
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, ans, err := DialPort(ctx, sw.SocketPath(1), &good)
		if !errors.Is(err, ErrPortBusy) {
			t.Fatalf("second peer: err %v, want ErrPortBusy", err)
		}
		if ans == nil || ans.Status() != proto.HelloPortBusy {
			t.Fatalf("answer %v", ans)
		}
		// The first peer still works.
		n2 := connect(t, sw, 3, 2)
		n1.send(ethFrame(bcast, n1.mac, -1, 0, 60, 1))
		n2.expectFrame(ethFrame(bcast, n1.mac, -1, 0, 60, 1))
	})

	t.Run("silent peer times out", func(t *testing.T) {
		if testing.Short() {
			t.Skip("waits for the hello timeout")
		}
		c, err := net.Dial("unixpacket", sw.SocketPath(2))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(helloTimeout + 3*time.Second))
		n, err := c.Read(make([]byte, 100))
		if n != 0 || (err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && err.Error() != "EOF") {
			t.Logf("read after timeout: %d %v", n, err)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("switch did not close a connection that never said hello")
		}
	})
}

func TestSocketsModeAndCleanup(t *testing.T) {
	f := startFabric(t, Config{Ports: 2})
	sw := f.Switches()[0]
	for _, path := range []string{sw.SocketPath(1), sw.SocketPath(2), f.ControlSocket()} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o660 {
			t.Errorf("%s: mode %v, want socket 0660", path, fi.Mode())
		}
	}
	n := connect(t, sw, 1, 1)
	_ = n
	f.Close()
	f.Close() // idempotent
	for _, path := range []string{sw.SocketPath(1), sw.SocketPath(2), f.ControlSocket()} {
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("%s still exists after Close (%v)", path, err)
		}
	}
}

func TestStaleSocketReplaced(t *testing.T) {
	dir := shortDir(t)
	// A socket file left by a killed fabric: bound, never listened on.
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: dir + "/sw0-port1.sock", Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	f := startFabric(t, Config{RunDir: dir, Ports: 1})
	connect(t, f.Switches()[0], 1, 1)

	// A live one is not stolen.
	if _, err := New(Config{RunDir: dir, Ports: 1}); err != nil {
		t.Fatal(err)
	}
	f2, _ := New(Config{RunDir: dir, Ports: 1})
	if err := f2.Start(); err == nil {
		f2.Close()
		t.Fatal("second fabric started on the same run dir")
	}
}

func TestReconnect(t *testing.T) {
	f := startFabric(t, Config{Ports: 2})
	sw := f.Switches()[0]
	b := connect(t, sw, 2, 2)
	for i := range 3 {
		a := connect(t, sw, 1, 1)
		a.send(ethFrame(bcast, a.mac, -1, 0, 60, byte(i)))
		b.expectFrame(ethFrame(bcast, a.mac, -1, 0, 60, byte(i)))
		if !hasFDB(sw, a.mac, 1) {
			t.Fatalf("round %d: %v not learnt on port 1", i, a.mac)
		}
		a.c.Close()
		waitFor(t, "port 1 down", func() bool { return torndown(sw.ports[0]) })
		if hasFDB(sw, a.mac, 1) {
			t.Fatalf("round %d: FDB entry survived link down", i)
		}
	}
	if st := portStatus(sw, 1); st.Sessions != 3 || st.State != "down" {
		t.Errorf("port 1: sessions %d state %s", st.Sessions, st.State)
	}
}

func TestMalformedInput(t *testing.T) {
	f := startFabric(t, Config{Ports: 2, Switches: []SwitchConfig{{MaxFrame: 1500}}})
	sw := f.Switches()[0]
	a, b := connect(t, sw, 1, 1), connect(t, sw, 2, 2)

	badIP := ethFrame(b.mac, a.mac, -1, 0, 100, 0)
	badIP[12], badIP[13] = 0x08, 0x00 // IPv4 with a garbage header
	badIP[14] = 0x4F                  // IHL 15 words > frame
	frames := [][]byte{
		{1, 2, 3},                                                // runt
		make([]byte, 13),                                         // shorter than a header
		ethFrame(bcast, a.mac, 5, 0, 60, 0)[:15],                 // tag cut
		ethFrame(bcast, a.mac, -1, 0, 1501, 0),                   // oversize
		ethFrame(bcast, a.mac, -1, 0, 9000, 0),                   // far oversize
		ethFrame(bcast, [6]byte{1, 2, 3, 4, 5, 6}, -1, 0, 60, 0), // group source
		ethFrame(bcast, a.mac, 4095, 0, 60, 0),                   // reserved VID
		badIP,
	}
	for _, fr := range frames {
		a.send(fr)
	}
	// Still forwarding.
	good := ethFrame(bcast, a.mac, -1, 0, 60, 7)
	a.send(good)
	b.expectFrame(good)
	st := portStatus(sw, 1)
	if st.RxFrames != uint64(len(frames)+1) {
		t.Errorf("rx %d, want %d", st.RxFrames, len(frames)+1)
	}
	if got := st.Drops["malformed"] + st.Drops["oversize"] + st.Drops["vlan"]; got != uint64(len(frames)) {
		t.Errorf("drops %v, want %d in all", st.Drops, len(frames))
	}
	if st.Drops["oversize"] != 2 {
		t.Errorf("oversize drops %d, want 2", st.Drops["oversize"])
	}
}
