package hilink

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"

	"github.com/PacketFive/hinic/internal/hilink/wire"
)

// startSwitch starts a switch in a short run directory (UNIX socket
// paths are short) and closes it, checking for leaked goroutines, when
// the test ends.
func startSwitch(t testing.TB, cfg Config) *Switch {
	t.Helper()
	before := runtime.NumGoroutine()
	dir, err := os.MkdirTemp("", "hl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg.RunDir = dir
	sw, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sw.Close()
		if _, err := os.Stat(sw.ControlSocket()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("control socket left: %v", err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			t.Errorf("%d goroutines left after Close (%d before)", n, before)
		}
	})
	return sw
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// dial opens port num of sw for the GPUs; the endpoint closes with the
// test (before the switch: cleanups run last in, first out).
func dial(t testing.TB, sw *Switch, num int, credits int, gpus ...uint16) *Endpoint {
	t.Helper()
	e, err := Dial(ctxT(t), EndpointConfig{Path: PortPath(sw.cfg.RunDir, num), GPUs: gpus, Credits: credits, Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// write builds a write of size payload bytes from src to dst whose tag
// is seq and whose payload starts with seq too.
func write(src, dst uint16, seq uint32, size int) []byte {
	p := make([]byte, size)
	binary.BigEndian.PutUint32(p, seq)
	return wire.Append(nil, &wire.Fields{Type: wire.TypeWrite, Flags: wire.FlagLast, SrcGPU: src, DstGPU: dst,
		Tag: seq, Address: 1 << 40}, p)
}

func portStatus(sw *Switch, num int) PortStatus { return sw.Status().Ports[num] }

// waitFor polls cond for up to 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestForwardEveryType(t *testing.T) {
	sw := startSwitch(t, Config{})
	a := dial(t, sw, 0, 8, 0, 1)
	b := dial(t, sw, 5, 8, 4)
	if a.Port() != 0 || b.Port() != 5 || a.MaxFrame() != DefaultMaxFrame {
		t.Fatalf("port %d %d, max frame %d", a.Port(), b.Port(), a.MaxFrame())
	}
	ctx := ctxT(t)
	frames := [][]byte{
		write(1, 4, 7, 4096),
		wire.Append(nil, &wire.Fields{Type: wire.TypeReadReq, SrcGPU: 0, DstGPU: 4, Tag: 8, Length: 1 << 20, Address: 5 << 40}, nil),
	}
	for _, f := range frames {
		if err := a.Send(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range frames {
		got, err := b.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Credits is the link's: compare the rest.
		wire.Header(got).SetCredits(0)
		wire.Header(want).SetCredits(0)
		if string(got) != string(want) {
			t.Errorf("frame %d: got %x, want %x", i, got[:wire.HeaderSize], want[:wire.HeaderSize])
		}
	}
	back := wire.Append(nil, &wire.Fields{Type: wire.TypeReadResp, Flags: wire.FlagLast, SrcGPU: 4, DstGPU: 0, Tag: 8,
		Address: 5 << 40}, make([]byte, 100))
	resp := wire.Append(nil, &wire.Fields{Type: wire.TypeWriteResp, SrcGPU: 4, DstGPU: 1, Tag: 7, Length: 4096}, nil)
	for _, f := range [][]byte{back, resp} {
		if err := b.Send(ctx, f); err != nil {
			t.Fatal(err)
		}
		got, err := a.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h := wire.Header(got); h.Type() != wire.Header(f).Type() || h.DstGPU() != wire.Header(f).DstGPU() {
			t.Errorf("got %v to %d", h.Type(), h.DstGPU())
		}
	}
	// Between two GPUs behind one port the frame comes back out of it.
	if err := a.Send(ctx, write(0, 1, 9, 64)); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Recv(ctx); err != nil || wire.Header(got).Tag() != 9 {
		t.Errorf("loop back: %v", err)
	}
	// A batch is counted after its write returns, maybe after the
	// receiver has it.
	waitFor(t, "port 0's frames counted", func() bool { return portStatus(sw, 0).Counters.TxFrames == 3 })
	st := portStatus(sw, 0)
	if st.State != "up" || st.Peer != "test" || len(st.GPUs) != 2 || st.Counters.RxFrames != 3 || st.Counters.TxFrames != 3 {
		t.Errorf("port 0: %+v", st)
	}
	if st := portStatus(sw, 5); st.Counters.RxBytes != uint64(len(back)+len(resp)) || st.Counters.DropsTotal() != 0 {
		t.Errorf("port 5: %+v", st)
	}
}

// TestIncast: four senders to one slow receiver with a small grant. No
// frame is lost, and each source's frames arrive in the order sent.
func TestIncast(t *testing.T) {
	const senders, perSender = 4, 3000
	sw := startSwitch(t, Config{Credits: 16})
	rx := dial(t, sw, 7, 4, 7)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for s := range senders {
		e := dial(t, sw, s, 0, uint16(s))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perSender {
				if err := e.Send(ctx, write(uint16(s), 7, uint32(i), 64+i%2000)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	next := make([]uint32, senders)
	for n := range senders * perSender {
		f, err := rx.Recv(ctx)
		if err != nil {
			t.Fatalf("after %d frames: %v", n, err)
		}
		h := wire.Header(f)
		src := h.SrcGPU()
		if int(src) >= senders || h.DstGPU() != 7 || h.Tag() != next[src] ||
			binary.BigEndian.Uint32(h.Payload()) != next[src] || len(h.Payload()) != 64+int(next[src])%2000 {
			t.Fatalf("frame %d: from %d tag %d len %d, want tag %d", n, src, h.Tag(), len(h.Payload()), next[src])
		}
		next[src]++
		if n%500 == 0 {
			time.Sleep(2 * time.Millisecond) // slow
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	waitFor(t, "the receiver port's frames counted", func() bool {
		return portStatus(sw, 7).Counters.TxFrames == senders*perSender
	})
	st := sw.Status()
	for _, p := range st.Ports {
		if p.Counters.DropsTotal() != 0 {
			t.Errorf("port %d dropped: %v", p.Num, p.Counters.Drops)
		}
	}
	if p := st.Ports[7]; p.Counters.TxFrames != senders*perSender || p.Counters.CreditStalls == 0 {
		t.Errorf("receiver port: tx %d, stalls %d", p.Counters.TxFrames, p.Counters.CreditStalls)
	}
	waitFor(t, "every credit back", func() bool {
		for _, p := range sw.Status().Ports[:senders] {
			if p.Held != 0 {
				return false
			}
		}
		return true
	})
}

// TestStoppedReceiverStallsOnlyItsSenders: a receiver that stops reading
// stops the sender to it once its credits are spent; traffic between
// two other ports goes on; when the receiver reads again everything it
// was sent arrives, in order.
func TestStoppedReceiverStallsOnlyItsSenders(t *testing.T) {
	const credits, grant = 8, 2
	sw := startSwitch(t, Config{Credits: credits})
	a := dial(t, sw, 0, 0, 0)
	b := dial(t, sw, 1, grant, 1) // does not read until the end
	c := dial(t, sw, 2, 0, 2)
	d := dial(t, sw, 3, 0, 3)
	ctx := ctxT(t)
	sent := 0
	for {
		sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err := a.Send(sctx, write(0, 1, uint32(sent), 1000))
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if sent++; sent > credits+grant {
			t.Fatalf("sent %d frames to a receiver that does not read, credits %d + %d", sent, credits, grant)
		}
	}
	if sent != credits+grant {
		t.Errorf("sent %d before stalling, want %d", sent, credits+grant)
	}
	waitFor(t, "the sender's frames queued at the receiver's port", func() bool {
		st := portStatus(sw, 1)
		return st.Queued == credits && st.TxCredits == 0 && st.Counters.CreditStalls > 0
	})
	// Meanwhile C to D is not held up.
	const others = 1000
	go func() {
		for i := range others {
			if c.Send(ctx, write(2, 3, uint32(i), 1000)) != nil {
				return
			}
		}
	}()
	for i := range others {
		f, err := d.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if wire.Header(f).Tag() != uint32(i) {
			t.Fatalf("C to D frame %d has tag %d", i, wire.Header(f).Tag())
		}
	}
	for i := range sent {
		f, err := b.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if wire.Header(f).Tag() != uint32(i) {
			t.Fatalf("A to B frame %d has tag %d", i, wire.Header(f).Tag())
		}
	}
	// The sender has its credits back.
	if err := a.Send(ctx, write(0, 1, uint32(sent), 10)); err != nil {
		t.Fatal(err)
	}
	if f, err := b.Recv(ctx); err != nil || wire.Header(f).Tag() != uint32(sent) {
		t.Fatalf("after the stall: %v", err)
	}
}

// rawDial connects to port num and sends msg as the first message.
func rawDial(t *testing.T, sw *Switch, num int, msg []byte) *net.UnixConn {
	t.Helper()
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: PortPath(sw.cfg.RunDir, num), Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	return c
}

// answer reads the switch's hello answer and returns its status.
func answer(t *testing.T, c *net.UnixConn) uint8 {
	t.Helper()
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	h, err := wire.Parse(buf[:n])
	if err != nil || h.Type() != wire.TypeHello {
		t.Fatalf("answer %x: %v", buf[:n], err)
	}
	if _, err := wire.ParseHello(h.Payload()); err != nil {
		t.Fatalf("answer's hello: %v", err)
	}
	if h.Status() != wire.StatusOK && h.Credits() != 0 {
		t.Errorf("a refusal grants %d credits", h.Credits())
	}
	return h.Status()
}

func helloMsg(credits uint16, role uint8, gpus ...uint16) []byte {
	return wire.AppendHelloFrame(nil, 0, credits, &wire.HelloFields{MaxFrame: DefaultMaxFrame, Role: role, GPUs: gpus, Name: "raw"})
}

func TestHelloRefused(t *testing.T) {
	sw := startSwitch(t, Config{Ports: 4})
	dial(t, sw, 0, 0, 5, 6)
	v2 := helloMsg(8, wire.RoleGPU, 1)
	v2[0] = 0x21
	notHello := wire.Append(nil, &wire.Fields{Type: wire.TypeCredit, Credits: 1}, nil)
	badPayload := helloMsg(8, wire.RoleGPU, 1)
	badPayload[wire.HeaderSize] = 'X'
	for _, tc := range []struct {
		name   string
		port   int
		msg    []byte
		status uint8
	}{
		{"version 2", 1, v2, wire.StatusVersion},
		{"not a hello", 1, notHello, wire.StatusMalformed},
		{"bad payload", 1, badPayload, wire.StatusMalformed},
		{"no credits", 1, helloMsg(0, wire.RoleGPU, 1), wire.StatusMalformed},
		{"no GPU", 1, helloMsg(8, wire.RoleGPU), wire.StatusMalformed},
		{"switch role", 1, helloMsg(8, wire.RoleSwitch, 1), wire.StatusMalformed},
		{"runt", 1, []byte{1, 2, 3}, wire.StatusMalformed},
		{"GPU on another port", 1, helloMsg(8, wire.RoleGPU, 1, 6), wire.StatusGPUInUse},
		{"port busy", 0, helloMsg(8, wire.RoleGPU, 2), wire.StatusPortBusy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := rawDial(t, sw, tc.port, tc.msg)
			if st := answer(t, c); st != tc.status {
				t.Errorf("status %d, want %d", st, tc.status)
			}
			if _, err := c.Read(make([]byte, 64)); err == nil {
				t.Error("the connection stays open after a refusal")
			}
		})
	}
	if n := portStatus(sw, 1).Counters.Rejected; n != 8 {
		t.Errorf("port 1 rejected %d", n)
	}
	// GPU 1 was never attached: a later hello for it is fine.
	dial(t, sw, 1, 0, 1)
	if _, err := Dial(ctxT(t), EndpointConfig{Path: PortPath(sw.cfg.RunDir, 2), GPUs: []uint16{5}}); !errors.Is(err, ErrRefused) {
		t.Errorf("duplicate GPU: %v", err)
	}
}

// TestSilentPeerClosed: a peer that sends no hello is closed, and the
// port takes the next one.
func TestSilentPeerClosed(t *testing.T) {
	defer func(d time.Duration) { helloTimeout = d }(helloTimeout)
	helloTimeout = 50 * time.Millisecond
	sw := startSwitch(t, Config{Ports: 1})
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: PortPath(sw.cfg.RunDir, 0), Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(make([]byte, 64))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("a silent peer is not closed")
	}
	if n > 0 {
		t.Fatalf("the switch sent %d bytes to a silent peer", n)
	}
	waitFor(t, "the refusal counted", func() bool { return portStatus(sw, 0).Counters.Rejected == 1 })
	dial(t, sw, 0, 0, 0)
}

// TestBadFramesCounted: what cannot be forwarded is counted and dropped,
// its credit comes back, and the port stays up.
func TestBadFramesCounted(t *testing.T) {
	sw := startSwitch(t, Config{Ports: 2, Credits: 16, MaxFrame: 4096})
	b := dial(t, sw, 1, 0, 1)
	c := rawDial(t, sw, 0, helloMsg(64, wire.RoleGPU, 0))
	if st := answer(t, c); st != wire.StatusOK {
		t.Fatalf("status %d", st)
	}
	hello2 := helloMsg(1, wire.RoleGPU, 0)
	bad := [][]byte{
		{1, 2, 3},                        // malformed
		write(0, 1, 0, 5000),             // oversize
		write(0, 9, 0, 10),               // no route
		write(3, 1, 0, 10),               // bad source
		hello2,                           // unexpected
		append(write(0, 1, 0, 10), 0xEE), // malformed: length
	}
	for _, m := range bad {
		if _, err := c.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Write(write(0, 1, 42, 10)); err != nil {
		t.Fatal(err)
	}
	if f, err := b.Recv(ctxT(t)); err != nil || wire.Header(f).Tag() != 42 {
		t.Fatalf("good frame after bad ones: %v", err)
	}
	want := map[string]uint64{"malformed": 2, "oversize": 1, "no-route": 1, "bad-source": 1, "unexpected": 1}
	waitFor(t, "the credits of the dropped frames", func() bool { return portStatus(sw, 0).Counters.CreditsOut == 7 })
	st := portStatus(sw, 0)
	for k, v := range want {
		if st.Counters.Drops[k] != v {
			t.Errorf("drops[%s] = %d, want %d (%v)", k, st.Counters.Drops[k], v, st.Counters.Drops)
		}
	}
	if st.State != "up" || st.Held != 0 {
		t.Errorf("port 0: %+v", st)
	}
	// The switch returned the credits in credit frames, and the write
	// to nobody came back as its own answer: unreachable.
	var got, bounced int
	buf := make([]byte, 64)
	for got < 7 || bounced == 0 {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		h, err := wire.Parse(buf[:n])
		switch {
		case err == nil && h.Type() == wire.TypeWriteResp:
			if f := h.Fields(); f.Status != wire.StatusUnreachable || f.SrcGPU != 9 || f.DstGPU != 0 || f.Length != 10 {
				t.Fatalf("bounced write: %+v", f)
			}
			bounced++
		case err != nil || h.Type() != wire.TypeCredit:
			t.Fatalf("%x: %v", buf[:n], err)
		}
		got += int(h.Credits())
	}
	if bounced != 1 {
		t.Errorf("%d bounced answers", bounced)
	}
}

// TestCreditOverrun: a peer that sends beyond its credits is dropped.
func TestCreditOverrun(t *testing.T) {
	const credits = 4
	sw := startSwitch(t, Config{Ports: 2, Credits: credits})
	dial(t, sw, 1, 1, 1) // takes one frame, never reads it
	c := rawDial(t, sw, 0, helloMsg(64, wire.RoleGPU, 0))
	if st := answer(t, c); st != wire.StatusOK {
		t.Fatalf("status %d", st)
	}
	// The receiver's one credit frees at most one slot: credits+1 frames
	// are allowed, the one after is an overrun.
	for i := range credits + 2 {
		if _, err := c.Write(write(0, 1, uint32(i), 100)); err != nil {
			break
		}
	}
	waitFor(t, "the port dropped", func() bool { return portStatus(sw, 0).State == "down" })
	if st := portStatus(sw, 0); st.Counters.Drops["overrun"] != 1 {
		t.Errorf("drops %v", st.Counters.Drops)
	}
	// Its GPU id is free again.
	dial(t, sw, 0, 0, 0)
}

func TestCreditOverflow(t *testing.T) {
	sw := startSwitch(t, Config{Ports: 1})
	c := rawDial(t, sw, 0, helloMsg(4, wire.RoleGPU, 0))
	if st := answer(t, c); st != wire.StatusOK {
		t.Fatalf("status %d", st)
	}
	if _, err := c.Write(wire.Append(nil, &wire.Fields{Type: wire.TypeCredit, Credits: 1}, nil)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the port dropped", func() bool { return portStatus(sw, 0).State == "down" })
	if st := portStatus(sw, 0); st.Counters.Drops["credit-overflow"] != 1 || st.Counters.CreditsIn != 0 {
		t.Errorf("counters %+v", st.Counters)
	}
}

// TestPeerGone: frames queued to a port whose peer leaves are dropped
// (link-down) and their credits go back to the sender; the GPU id is
// then unknown. Each write that was dropped comes back to its sender as
// a write response with status unreachable, so no requester waits for
// an answer that will never come.
func TestPeerGone(t *testing.T) {
	const credits = 4
	sw := startSwitch(t, Config{Ports: 2, Credits: credits})
	a := dial(t, sw, 0, 0, 0)
	b := dial(t, sw, 1, 1, 1)
	ctx := ctxT(t)
	for i := range credits + 1 {
		if err := a.Send(ctx, write(0, 1, uint32(i), 10)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "frames queued", func() bool { return portStatus(sw, 1).Queued == credits })
	b.Close()
	waitFor(t, "port 1 down", func() bool { return portStatus(sw, 1).State == "down" })
	if st := portStatus(sw, 1); st.Counters.Drops["link-down"] != credits {
		t.Errorf("port 1 drops %v", st.Counters.Drops)
	}
	waitFor(t, "credits back", func() bool { return portStatus(sw, 0).Held == 0 })
	for i := range credits {
		if err := a.Send(ctx, write(0, 1, uint32(i), 10)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "no-route drops", func() bool { return portStatus(sw, 0).Counters.Drops["no-route"] == credits })
	// Tags 1..credits were queued when b left, 0..credits-1 had no route.
	want := map[uint32]int{}
	for i := range credits {
		want[uint32(i+1)]++
		want[uint32(i)]++
	}
	for range 2 * credits {
		f, err := a.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		h := wire.Header(f)
		if h.Type() != wire.TypeWriteResp || h.Status() != wire.StatusUnreachable || h.SrcGPU() != 1 || h.DstGPU() != 0 {
			t.Fatalf("answer %+v", h.Fields())
		}
		want[h.Tag()]--
	}
	for tag, n := range want {
		if n != 0 {
			t.Errorf("tag %d: %d answers missing", tag, n)
		}
	}
}

// TestReadBounced: a read request to a GPU no port has comes back as a
// last read response with status unreachable and no payload.
func TestReadBounced(t *testing.T) {
	sw := startSwitch(t, Config{Ports: 1})
	a := dial(t, sw, 0, 0, 3)
	ctx := ctxT(t)
	req := wire.Append(nil, &wire.Fields{Type: wire.TypeReadReq, SrcGPU: 3, DstGPU: 5, Tag: 77, Length: 4096,
		Address: 0x60000001000}, nil)
	if err := a.Send(ctx, req); err != nil {
		t.Fatal(err)
	}
	f, err := a.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := wire.Fields{Type: wire.TypeReadResp, Flags: wire.FlagLast, Status: wire.StatusUnreachable,
		SrcGPU: 5, DstGPU: 3, Tag: 77, Address: 0x60000001000}
	got := wire.Header(f).Fields()
	got.Credits = 0
	if len(f) != wire.HeaderSize || got != want {
		t.Fatalf("answer %+v (%d octets), want %+v", got, len(f), want)
	}
	if st := portStatus(sw, 0); st.Counters.Drops["no-route"] != 1 {
		t.Errorf("drops %v", st.Counters.Drops)
	}
}

func TestConfig(t *testing.T) {
	for _, c := range []Config{
		{},
		{RunDir: "/x", Ports: MaxPorts + 1},
		{RunDir: "/x", Credits: -1},
		{RunDir: "/x", Credits: MaxCredits + 1},
		{RunDir: "/x", MaxFrame: 10},
		{RunDir: "/x", MaxFrame: wire.MaxMaxFrame + 1},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	sw, err := New(Config{RunDir: "/x"})
	if err != nil {
		t.Fatal(err)
	}
	if c := sw.Config(); c.Ports != 8 || c.Credits != DefaultCredits || c.MaxFrame != DefaultMaxFrame {
		t.Errorf("defaults %+v", c)
	}
	if st := sw.Status(); len(st.Ports) != 8 || st.Ports[7].Path != "/x/hilink-port7.sock" {
		t.Errorf("status %+v", st)
	}
}

// TestCapture: with Config.Pcap every port writes what it receives and
// sends, credit frames included, to a private pcap of HiLink's link type.
func TestCapture(t *testing.T) {
	dir := t.TempDir()
	sw := startSwitch(t, Config{Ports: 2, Pcap: dir})
	a := dial(t, sw, 0, 0, 0)
	b := dial(t, sw, 1, 0, 1)
	ctx := ctxT(t)
	if err := a.Send(ctx, write(0, 1, 77, 300)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Recv(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the credits back", func() bool {
		return portStatus(sw, 0).Counters.CreditsOut == 1 && portStatus(sw, 1).Counters.CreditsIn == 1
	})
	a.Close()
	b.Close()
	sw.Close()
	read := func(port int) []wire.Header {
		path := filepath.Join(dir, "hilink-port"+strconv.Itoa(port)+".pcap")
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v", path, err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r, err := pcapgo.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		if r.LinkType() != LinkTypeHiLink {
			t.Errorf("link type %d", r.LinkType())
		}
		var hs []wire.Header
		for {
			data, _, err := r.ReadPacketData()
			if err == io.EOF {
				return hs
			}
			if err != nil {
				t.Fatal(err)
			}
			h, err := wire.Parse(data)
			if err != nil {
				t.Fatalf("captured %x: %v", data, err)
			}
			hs = append(hs, h)
		}
	}
	// Port 0: the write in, its credit out. Port 1: the write out, and
	// the receiver's credit for it in.
	p0, p1 := read(0), read(1)
	if len(p0) != 2 || p0[0].Tag() != 77 || p0[1].Type() != wire.TypeCredit || p0[1].Credits() != 1 {
		t.Errorf("port 0 captured %d messages", len(p0))
	}
	if len(p1) != 2 || p1[0].Tag() != 77 || p1[1].Type() != wire.TypeCredit {
		t.Errorf("port 1 captured %d messages", len(p1))
	}
}

// TestAllToAll: four ports each send to the three others at once, the
// frames of each destination interleaved; every pair's frames arrive,
// in order, and the switch drops none.
func TestAllToAll(t *testing.T) {
	const ports, perPair = 4, 400
	sw := startSwitch(t, Config{Ports: ports, Credits: 8})
	ctx := ctxT(t)
	eps := make([]*Endpoint, ports)
	for i := range eps {
		eps[i] = dial(t, sw, i, 4, uint16(i))
	}
	errc := make(chan error, 2*ports)
	for i, e := range eps {
		go func() {
			for n := range perPair * (ports - 1) {
				dst := (i + 1 + n%(ports-1)) % ports
				if err := e.Send(ctx, write(uint16(i), uint16(dst), uint32(n/(ports-1)), 200)); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
		go func() {
			next := make([]uint32, ports)
			for range perPair * (ports - 1) {
				f, err := e.Recv(ctx)
				if err != nil {
					errc <- err
					return
				}
				h := wire.Header(f)
				if h.DstGPU() != uint16(i) || int(h.SrcGPU()) >= ports || h.Tag() != next[h.SrcGPU()] {
					errc <- errors.New("frame " + strconv.Itoa(int(h.Tag())) + " from " + strconv.Itoa(int(h.SrcGPU())) +
						" to " + strconv.Itoa(i) + " out of order")
					return
				}
				next[h.SrcGPU()]++
			}
			errc <- nil
		}()
	}
	for range 2 * ports {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	// The transmit side counts a batch after its write returns, which
	// may be after the receiver has it.
	waitFor(t, "every frame counted", func() bool {
		for _, p := range sw.Status().Ports {
			if p.Counters.TxFrames != perPair*(ports-1) {
				return false
			}
		}
		return true
	})
	for _, p := range sw.Status().Ports {
		if p.Counters.DropsTotal() != 0 {
			t.Errorf("port %d: drops %v", p.Num, p.Counters.Drops)
		}
	}
}

// TestLargestFrame: a frame of the largest size a hello may state goes
// through both ends' sockets.
func TestLargestFrame(t *testing.T) {
	sw := startSwitch(t, Config{Ports: 2, MaxFrame: wire.MaxMaxFrame})
	ctx := ctxT(t)
	cfg := func(num int, gpu uint16) EndpointConfig {
		return EndpointConfig{Path: PortPath(sw.cfg.RunDir, num), GPUs: []uint16{gpu}, Credits: 4, MaxFrame: wire.MaxMaxFrame}
	}
	a, err := Dial(ctx, cfg(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Dial(ctx, cfg(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	frame := write(0, 1, 5, wire.MaxMaxFrame-wire.HeaderSize)
	for range 3 {
		if err := a.Send(ctx, frame); err != nil {
			t.Fatal(err)
		}
		got, err := b.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != wire.MaxMaxFrame || wire.Header(got).Tag() != 5 {
			t.Fatalf("got %d bytes", len(got))
		}
	}
}
