package integration

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/device/guestsim"
	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/rdma"
)

// testbed is a HiSwitch, one `device serve` with n vNICs on its ports,
// and n simulated guests that finished the handshake.
type testbed struct {
	fab    *fabric.Fabric
	srv    *device.Server
	guests []*guestsim.Guest
	cfgs   []device.VNICConfig
	dir    string
}

const testRAM = 64 << 20

func vnicConfig(dir string, i int, port string) device.VNICConfig {
	return device.VNICConfig{
		Name:       fmt.Sprintf("vm%d/hicain0", i),
		Socket:     filepath.Join(dir, fmt.Sprintf("ivshmem%d.sock", i)),
		RAMPath:    filepath.Join(dir, fmt.Sprintf("vm%d.ram", i)),
		RAMSize:    testRAM,
		Machine:    device.MachineQ35,
		FabricPort: port,
		MAC:        [6]byte{0x02, 0x48, 0x4e, 0, 0, byte(i)},
		IPv4:       []netip.Addr{netip.AddrFrom4([4]byte{10, 42, 0, byte(i)})},
	}
}

func newTestbed(t testing.TB, n int) *testbed {
	t.Helper()
	return newTestbedConfig(t, n, nil)
}

// newTestbedConfig is newTestbed with vNIC i's configuration passed
// through edit(i, cfg) first.
func newTestbedConfig(t testing.TB, n int, edit func(int, *device.VNICConfig)) *testbed {
	return newTestbedGuests(t, n, edit, nil)
}

// newTestbedGuests is newTestbedConfig whose guest i connects with the
// configuration guest(i, c) edits (nil: as QEMU and the driver of this
// build).
func newTestbedGuests(t testing.TB, n int, edit func(int, *device.VNICConfig), guest func(int, *guestsim.Config)) *testbed {
	t.Helper()
	return newTestbedFabric(t, n, nil, edit, guest)
}

// newTestbedFabric is newTestbedGuests whose fabric configuration
// fabEdit edits first (nil: the defaults).
func newTestbedFabric(t testing.TB, n int, fabEdit func(*fabric.Config), edit func(int, *device.VNICConfig), guest func(int, *guestsim.Config)) *testbed {
	t.Helper()
	dir := t.TempDir()
	tb := &testbed{dir: dir}
	fc := fabric.Config{RunDir: filepath.Join(dir, "fabric"), Ports: 4}
	if fabEdit != nil {
		fabEdit(&fc)
	}
	fab, err := fabric.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	if err := fab.Start(); err != nil {
		t.Fatal(err)
	}
	tb.fab = fab
	t.Cleanup(func() { fab.Close() })
	sw := fab.Switches()[0]
	for i := 1; i <= n; i++ {
		tb.cfgs = append(tb.cfgs, vnicConfig(dir, i, sw.SocketPath(i)))
		if edit != nil {
			edit(i-1, &tb.cfgs[i-1])
		}
	}
	ctx := testCtx(t)
	srv, err := device.Start(ctx, device.Config{VNICs: tb.cfgs, Control: filepath.Join(dir, "device.sock")})
	if err != nil {
		t.Fatal(err)
	}
	tb.srv = srv
	t.Cleanup(func() { srv.Close() })
	for i := range n {
		var gc guestsim.Config
		if guest != nil {
			guest(i, &gc)
		}
		g := tb.connectConfig(t, i, gc)
		tb.guests = append(tb.guests, g)
	}
	return tb
}

func (tb *testbed) connect(t testing.TB, i int) *guestsim.Guest {
	return tb.connectConfig(t, i, guestsim.Config{})
}

// connectConfig connects a guest to vNIC i with gc's driver settings.
func (tb *testbed) connectConfig(t testing.TB, i int, gc guestsim.Config) *guestsim.Guest {
	t.Helper()
	ctx := testCtx(t)
	c := tb.cfgs[i]
	gc.Socket, gc.RAMPath, gc.RAMSize, gc.Machine = c.Socket, c.RAMPath, c.RAMSize, c.Machine
	g, err := guestsim.Connect(ctx, gc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if err := g.Handshake(ctx); err != nil {
		t.Fatal(err)
	}
	return g
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestHandshakeAndHeader(t *testing.T) {
	tb := newTestbed(t, 1)
	g := tb.guests[0]
	h := g.Header()
	if h.VendorID != 0x1ED5 || h.DeviceID != 0xCA10 || h.MAC != tb.cfgs[0].MAC {
		t.Fatalf("header identity %04x:%04x %x", h.VendorID, h.DeviceID, h.MAC)
	}
	if g.PeerID() != 1 {
		t.Errorf("peer ID %d, want 1", g.PeerID())
	}
	if st := g.DevStatus(); st != device.DevReady|device.DevLive|device.DevLinkUp {
		t.Errorf("dev_status %#x", st)
	}
	if len(g.BAR2()) != device.BAR2Min {
		t.Errorf("BAR2 %d bytes", len(g.BAR2()))
	}
	ctx := testCtx(t)
	da, err := g.QueryDevice(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if da.VendorID != 0x1ED5 || da.VendorPartID != 0xCA10 || da.MaxQP == 0 {
		t.Errorf("query device: %+v", da)
	}
	// The READ and atomic depth of Soft-RoCE, so that a guest connecting
	// to an rxe peer can ask for what rxe offers.
	if h := g.Header(); da.MaxQPRdAtom != 128 || da.MaxQPInitRdAtom != 128 || h.MaxQPRdAtom != 128 {
		t.Errorf("max_qp_rd_atom %d, max_qp_init_rd_atom %d, header's max_qp_rd_atom %d; want 128",
			da.MaxQPRdAtom, da.MaxQPInitRdAtom, h.MaxQPRdAtom)
	}
	// The netdev may go up to a 9000-byte jumbo frame, room for the
	// RoCE MTU 4096 after the RoCEv2 headers.
	if h := g.Header(); h.MaxMTU != 9000 {
		t.Errorf("header's max_mtu %d, want 9000", h.MaxMTU)
	}
	pa, err := g.QueryPort(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pa.State != uint32(rdma.PortActive) || pa.LinkLayer != device.LinkEthernet {
		t.Errorf("query port: %+v", pa)
	}
	gid, err := g.QueryGID(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := netip.AddrFrom4([4]byte{10, 42, 0, 1}).As16(); gid != netip.AddrFrom16(want).As16() &&
		!bytes.Equal(gid[12:], []byte{10, 42, 0, 1}) {
		t.Errorf("GID 1 = %x", gid)
	}
	// The port-active event and the LIVE interrupt arrived.
	evs := g.Events()
	if len(evs) == 0 || evs[0].Type != device.EvPortActive {
		t.Errorf("events %+v", evs)
	}
	st := tb.srv.Status()
	if len(st.VNICs) != 1 || !st.VNICs[0].Guest || st.VNICs[0].State != "live" || st.VNICs[0].Counters.Doorbells == 0 {
		t.Errorf("status %+v", st)
	}
	js, err := device.QueryStatus(ctx, filepath.Join(tb.dir, "device.sock"))
	if err != nil || len(js.VNICs) != 1 || js.VNICs[0].AdminCmds() == 0 {
		t.Errorf("control status %+v, %v", js, err)
	}
}

func TestL2Exchange(t *testing.T) {
	l2Exchange(t, newTestbed(t, 2))
}

// l2Exchange sends guest L2 frames between the testbed's first two
// guests, three each way, and compares each.
func l2Exchange(t *testing.T, tb *testbed) {
	t.Helper()
	ctx := testCtx(t)
	a, err := tb.guests[0].NewL2()
	if err != nil {
		t.Fatal(err)
	}
	b, err := tb.guests[1].NewL2()
	if err != nil {
		t.Fatal(err)
	}
	frame := func(dst, src [6]byte, payload string) []byte {
		f := append(dst[:], src[:]...)
		f = append(f, 0x88, 0xb5)
		return append(f, []byte(payload)...)
	}
	macA, macB := tb.cfgs[0].MAC, tb.cfgs[1].MAC
	// B first, so the switch learns B's MAC; A's frame to B is then
	// unicast.
	for i := range 3 {
		fb := frame(macA, macB, fmt.Sprintf("from B %d ........................................", i))
		if err := b.Send(fb); err != nil {
			t.Fatal(err)
		}
		got, err := a.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, fb) {
			t.Fatalf("A got %x, want %x", got, fb)
		}
		fa := frame(macB, macA, fmt.Sprintf("from A %d ........................................", i))
		if err := a.Send(fa); err != nil {
			t.Fatal(err)
		}
		if got, err = b.Recv(ctx); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, fa) {
			t.Fatalf("B got %x, want %x", got, fa)
		}
	}
}

// rcEnd is one guest's side of an RC connection.
type rcEnd struct {
	g          *guestsim.Guest
	pd         uint32
	scq, rcq   *guestsim.CQ
	qp         *guestsim.QP
	buf        uint64 // GPA of the buffer (also its IOVA)
	size       uint64
	lkey, rkey uint32
	gid        [16]byte
	mac        [6]byte
	access     uint32 // MR and QP access flags
}

const access = uint32(rdma.AccessLocalWrite | rdma.AccessRemoteWrite | rdma.AccessRemoteRead)

func newRCEnd(t testing.TB, g *guestsim.Guest, mac [6]byte, high bool) *rcEnd {
	return newRCEndAccess(t, g, mac, high, access)
}

func newRCEndAccess(t testing.TB, g *guestsim.Guest, mac [6]byte, high bool, acc uint32) *rcEnd {
	t.Helper()
	return newEnd(t, g, mac, high, acc, guestsim.QPTypeRC)
}

// newEnd is newRCEndAccess with a QP of type typ (guestsim.QPTypeRC or
// QPTypeUC).
func newEnd(t testing.TB, g *guestsim.Guest, mac [6]byte, high bool, acc, typ uint32) *rcEnd {
	t.Helper()
	ctx := testCtx(t)
	e := &rcEnd{g: g, size: 64 << 10, mac: mac, access: acc}
	var err error
	if e.pd, err = g.AllocPD(ctx); err != nil {
		t.Fatal(err)
	}
	if e.buf, err = g.Alloc(e.size, 4096, high); err != nil {
		t.Fatal(err)
	}
	if e.lkey, e.rkey, err = g.RegMR(ctx, e.pd, e.buf, e.buf, e.size, e.access); err != nil {
		t.Fatal(err)
	}
	if e.scq, err = g.CreateCQ(ctx, 64, 0); err != nil {
		t.Fatal(err)
	}
	if e.rcq, err = g.CreateCQ(ctx, 64, 1); err != nil {
		t.Fatal(err)
	}
	if e.qp, err = g.CreateQP(ctx, guestsim.QPConfig{PD: e.pd, SendCQ: e.scq, RecvCQ: e.rcq, Type: typ}); err != nil {
		t.Fatal(err)
	}
	idx := uint32(1) // the RoCEv2 GID of the IPv4 address; an IB port has GID 0 only
	if g.Header().LinkLayer == device.LinkInfiniBand {
		idx = 0
	}
	if e.gid, err = g.QueryGID(ctx, idx); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *rcEnd) connect(t testing.TB, r *rcEnd) {
	t.Helper()
	e.connectTimeout(t, r, 14)
}

// connectTimeout is connect with the given local ACK timeout code.
func (e *rcEnd) connectTimeout(t testing.TB, r *rcEnd, timeout uint8) {
	t.Helper()
	ctx := testCtx(t)
	steps := []struct {
		attr device.QPAttr
		mask rdma.QPAttrMask
	}{
		{device.QPAttr{QPState: uint32(rdma.QPStateInit), PortNum: 1, QPAccessFlags: e.access},
			rdma.QPAttrState | rdma.QPAttrPKeyIndex | rdma.QPAttrPort | rdma.QPAttrAccessFlags},
		{device.QPAttr{QPState: uint32(rdma.QPStateRTR), PathMTU: uint32(rdma.MTU1024), DestQPNum: r.qp.QPN,
			RQPSN: 100, MaxDestRDAtomic: 4, MinRNRTimer: 12,
			AH: device.AHAttr{IsGlobal: 1, PortNum: 1, DMAC: r.mac, DGID: r.gid, SGIDIndex: 1, HopLimit: 64}},
			rdma.QPAttrState | rdma.QPAttrAV | rdma.QPAttrPathMTU | rdma.QPAttrDestQPN | rdma.QPAttrRQPSN |
				rdma.QPAttrMaxDestRDAtomic | rdma.QPAttrMinRNRTimer},
		{device.QPAttr{QPState: uint32(rdma.QPStateRTS), SQPSN: 100, Timeout: timeout, RetryCnt: 7, RNRRetry: 7,
			MaxRDAtomic: 4},
			rdma.QPAttrState | rdma.QPAttrSQPSN | rdma.QPAttrTimeout | rdma.QPAttrRetryCnt | rdma.QPAttrRNRRetry |
				rdma.QPAttrMaxQPRDAtomic},
	}
	for _, s := range steps {
		if err := e.g.ModifyQP(ctx, e.qp.QPN, uint32(s.mask), s.attr); err != nil {
			t.Fatalf("modify QP %d to %d: %v", e.qp.QPN, s.attr.QPState, err)
		}
	}
}

func connectPair(t testing.TB, tb *testbed, highA bool) (*rcEnd, *rcEnd) {
	return connectPairAccess(t, tb, highA, access)
}

func connectPairAccess(t testing.TB, tb *testbed, highA bool, acc uint32) (*rcEnd, *rcEnd) {
	a := newRCEndAccess(t, tb.guests[0], tb.cfgs[0].MAC, highA, acc)
	b := newRCEndAccess(t, tb.guests[1], tb.cfgs[1].MAC, false, acc)
	a.connect(t, b)
	b.connect(t, a)
	return a, b
}

func fill(t *testing.T, g *guestsim.Guest, gpa uint64, n int, seed byte) []byte {
	t.Helper()
	p := make([]byte, n)
	for i := range p {
		p[i] = seed + byte(i*7)
	}
	if err := g.RAM().WriteAt(p, gpa); err != nil {
		t.Fatal(err)
	}
	return p
}

func read(t *testing.T, g *guestsim.Guest, gpa uint64, n int) []byte {
	t.Helper()
	p := make([]byte, n)
	if err := g.RAM().ReadAt(p, gpa); err != nil {
		t.Fatal(err)
	}
	return p
}

func wantCQE(t *testing.T, cq *guestsim.CQ, status rdma.WCStatus, opcode rdma.WCOpcode, wrID uint64) device.CQE {
	t.Helper()
	es, err := cq.Wait(testCtx(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	e := es[0]
	if e.Status != uint32(status) || e.Opcode != uint32(opcode) || e.WRID != wrID {
		t.Fatalf("CQE %+v: want status %v opcode %v wr_id %d", e, status, opcode, wrID)
	}
	return e
}

func TestRCSendWriteRead(t *testing.T) {
	tb := newTestbed(t, 2)
	a, b := connectPair(t, tb, false)

	// SEND: 3000 bytes (three 1024-byte packets) from A to B, B's
	// receive buffer at offset 8192.
	const n = 3000
	want := fill(t, a.g, a.buf, n, 1)
	before := uint64(time.Now().UnixNano())
	b.qp.PostRecv(7, []device.SGE{{Addr: b.buf + 8192, Length: 4096, LKey: b.lkey}})
	a.qp.PostSend(device.SendWQE{WRID: 1, Opcode: uint8(rdma.WRSendWithImm), SendFlags: uint16(rdma.SendSignaled),
		ImmData: 0xabcdef}, []device.SGE{{Addr: a.buf, Length: n, LKey: a.lkey}}, nil)
	se := wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCSend, 1)
	e := wantCQE(t, b.rcq, rdma.WCSuccess, rdma.WCRecv, 7)
	after := uint64(time.Now().UnixNano())
	if e.ByteLen != n || e.ImmData != 0xabcdef || e.QPNum != b.qp.QPN || e.WCFlags&uint32(rdma.WCWithImm) == 0 {
		t.Errorf("recv CQE %+v", e)
	}
	// ABI 1.12: the device stamps each CQE with its real-time clock.
	for _, c := range []device.CQE{se, e} {
		if c.Timestamp < before || c.Timestamp > after {
			t.Errorf("CQE timestamp %d outside [%d, %d]", c.Timestamp, before, after)
		}
	}
	if got := read(t, b.g, b.buf+8192, n); !bytes.Equal(got, want) {
		t.Fatal("SEND payload differs")
	}

	// RDMA WRITE from A's buffer to B's buffer at 16 KiB.
	want = fill(t, a.g, a.buf+4096, 5000, 9)
	a.qp.PostSend(device.SendWQE{WRID: 2, Opcode: uint8(rdma.WRRDMAWrite), SendFlags: uint16(rdma.SendSignaled),
		RemoteAddr: b.buf + 16384, RKey: b.rkey}, []device.SGE{{Addr: a.buf + 4096, Length: 5000, LKey: a.lkey}}, nil)
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCRDMAWrite, 2)
	if got := read(t, b.g, b.buf+16384, 5000); !bytes.Equal(got, want) {
		t.Fatal("WRITE payload differs")
	}

	// RDMA READ of B's 32 KiB..36 KiB into A at 40 KiB.
	want = fill(t, b.g, b.buf+32768, 4000, 33)
	a.qp.PostSend(device.SendWQE{WRID: 3, Opcode: uint8(rdma.WRRDMARead), SendFlags: uint16(rdma.SendSignaled),
		RemoteAddr: b.buf + 32768, RKey: b.rkey}, []device.SGE{{Addr: a.buf + 40960, Length: 4000, LKey: a.lkey}}, nil)
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCRDMARead, 3)
	if got := read(t, a.g, a.buf+40960, 4000); !bytes.Equal(got, want) {
		t.Fatal("READ payload differs")
	}

	// Inline SEND.
	b.qp.PostRecv(8, []device.SGE{{Addr: b.buf, Length: 64, LKey: b.lkey}})
	a.qp.PostSend(device.SendWQE{WRID: 4, Opcode: uint8(rdma.WRSend), SendFlags: uint16(rdma.SendSignaled)},
		nil, []byte("inline hello"))
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCSend, 4)
	wantCQE(t, b.rcq, rdma.WCSuccess, rdma.WCRecv, 8)
	if got := read(t, b.g, b.buf, 12); string(got) != "inline hello" {
		t.Fatalf("inline payload %q", got)
	}

	// QPs show in the status.
	st := tb.srv.Status()
	if len(st.VNICs[0].QPs) != 1 || st.VNICs[0].QPs[0].State != "RTS" {
		t.Errorf("status QPs %+v", st.VNICs[0].QPs)
	}
}

// TestRCHighMemory puts A's buffer above 4 GiB in a q35 guest with
// 3 GiB of RAM (2 GiB below 4G, 1 GiB from 4G): the GPA -> file offset
// split of device-facts §2.2 on the data path.
func TestRCHighMemory(t *testing.T) {
	dir := t.TempDir()
	fab, err := fabric.New(fabric.Config{RunDir: filepath.Join(dir, "fabric"), Ports: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := fab.Start(); err != nil {
		t.Fatal(err)
	}
	defer fab.Close()
	sw := fab.Switches()[0]
	tb := &testbed{dir: dir}
	for i := 1; i <= 2; i++ {
		c := vnicConfig(dir, i, sw.SocketPath(i))
		if i == 1 {
			c.RAMSize = 3 << 30 // sparse file
		}
		tb.cfgs = append(tb.cfgs, c)
	}
	srv, err := device.Start(testCtx(t), device.Config{VNICs: tb.cfgs})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	tb.srv = srv
	tb.guests = []*guestsim.Guest{tb.connect(t, 0), tb.connect(t, 1)}
	a, b := connectPair(t, tb, true)
	if a.buf < 4<<30 {
		t.Fatalf("buffer at %#x, not above 4 GiB", a.buf)
	}
	want := fill(t, b.g, b.buf, 6000, 5)
	a.qp.PostSend(device.SendWQE{WRID: 1, Opcode: uint8(rdma.WRRDMARead), SendFlags: uint16(rdma.SendSignaled),
		RemoteAddr: b.buf, RKey: b.rkey}, []device.SGE{{Addr: a.buf, Length: 6000, LKey: a.lkey}}, nil)
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCRDMARead, 1)
	if got := read(t, a.g, a.buf, 6000); !bytes.Equal(got, want) {
		t.Fatal("READ into high memory differs")
	}
	// The bytes are at file offset below_4g + (gpa - 4 GiB).
	off := uint64(2<<30) + a.buf - 4<<30
	if o, err := a.g.RAM().Offset(a.buf, 6000); err != nil || o != off {
		t.Fatalf("offset %#x, %v; want %#x", o, err, off)
	}
}

// TestManyWrites keeps the SQ and the CQ full: 500 signaled WRITEs with
// up to 64 outstanding through a 64-entry SQ and a 64-entry CQ (as
// ibv_post_send allows: outstanding WRs <= max_send_wr <= CQ size), the
// completions in order.
func TestManyWrites(t *testing.T) {
	tb := newTestbed(t, 2)
	a, b := connectPair(t, tb, false)
	ctx := testCtx(t)
	const total = 500
	want := fill(t, a.g, a.buf, 256, 3)
	posted, done := 0, 0
	for done < total {
		for posted < total && posted-done < 64 && a.qp.SQFree() > 0 {
			a.qp.PostSend(device.SendWQE{WRID: uint64(posted), Opcode: uint8(rdma.WRRDMAWrite),
				SendFlags: uint16(rdma.SendSignaled), RemoteAddr: b.buf + uint64(posted%64)*256, RKey: b.rkey},
				[]device.SGE{{Addr: a.buf, Length: 256, LKey: a.lkey}}, nil)
			posted++
		}
		for _, e := range a.scq.Poll() {
			if e.Status != uint32(rdma.WCSuccess) || e.WRID != uint64(done) {
				t.Fatalf("CQE %d: %+v", done, e)
			}
			done++
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of %d done", done, total)
		}
		a.scq.Arm()
		a.scq.WaitIRQ(2 * time.Millisecond)
	}
	if got := read(t, b.g, b.buf+63*256, 256); !bytes.Equal(got, want) {
		t.Fatal("payload differs")
	}
}

// TestNoGoroutineLeak: closing the backend joins every goroutine of its
// vNICs and sessions.
func TestNoGoroutineLeak(t *testing.T) {
	base := runtime.NumGoroutine()
	func() {
		tb := &testbed{dir: t.TempDir()}
		fab, err := fabric.New(fabric.Config{RunDir: filepath.Join(tb.dir, "fabric"), Ports: 4})
		if err != nil {
			t.Fatal(err)
		}
		if err := fab.Start(); err != nil {
			t.Fatal(err)
		}
		defer fab.Close()
		sw := fab.Switches()[0]
		tb.cfgs = []device.VNICConfig{vnicConfig(tb.dir, 1, sw.SocketPath(1)), vnicConfig(tb.dir, 2, sw.SocketPath(2))}
		srv, err := device.Start(testCtx(t), device.Config{VNICs: tb.cfgs, Control: filepath.Join(tb.dir, "c.sock")})
		if err != nil {
			t.Fatal(err)
		}
		tb.srv = srv
		ctx := testCtx(t)
		g, err := guestsim.Connect(ctx, guestsim.Config{Socket: tb.cfgs[0].Socket, RAMPath: tb.cfgs[0].RAMPath,
			RAMSize: testRAM})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Handshake(ctx); err != nil {
			t.Fatal(err)
		}
		srv.Close()
		g.Close()
	}()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, %d before\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRCAtomics: CMP_AND_SWP and FETCH_AND_ADD from one simulated guest on
// a word in the other guest's RAM, through the device backend and HiSwitch;
// the original values come back into the requester's guest memory.
func TestRCAtomics(t *testing.T) {
	tb := newTestbed(t, 2)
	a, b := connectPairAccess(t, tb, false, access|uint32(rdma.AccessRemoteAtomic))
	word := func(g *guestsim.Guest, gpa uint64) uint64 { return binary.LittleEndian.Uint64(read(t, g, gpa, 8)) }
	var init [8]byte
	binary.LittleEndian.PutUint64(init[:], 40)
	if err := b.g.RAM().WriteAt(init[:], b.buf+64); err != nil {
		t.Fatal(err)
	}
	a.qp.PostSend(device.SendWQE{WRID: 1, Opcode: uint8(rdma.WRAtomicCmpAndSwp), SendFlags: uint16(rdma.SendSignaled),
		RemoteAddr: b.buf + 64, RKey: b.rkey, CompareAdd: 40, Swap: 100},
		[]device.SGE{{Addr: a.buf, Length: 8, LKey: a.lkey}}, nil)
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCCompSwap, 1)
	if got := word(a.g, a.buf); got != 40 {
		t.Fatalf("CMP_AND_SWP returned %d, want 40", got)
	}
	a.qp.PostSend(device.SendWQE{WRID: 2, Opcode: uint8(rdma.WRAtomicFetchAndAdd), SendFlags: uint16(rdma.SendSignaled),
		RemoteAddr: b.buf + 64, RKey: b.rkey, CompareAdd: 5},
		[]device.SGE{{Addr: a.buf + 8, Length: 8, LKey: a.lkey}}, nil)
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCFetchAdd, 2)
	if got := word(a.g, a.buf+8); got != 100 {
		t.Fatalf("FETCH_AND_ADD returned %d, want 100", got)
	}
	if got := word(b.g, b.buf+64); got != 105 {
		t.Fatalf("the target word holds %d, want 105", got)
	}
}

// TestCQEventCount: the dbrec's events word (ABI 1.7) counts the
// interrupts of an armed CQ, before each is raised: one per arming that
// a completion met, none for completions of a disarmed CQ, and it goes
// on in the new dbrec of a resize.
func TestCQEventCount(t *testing.T) {
	tb := newTestbed(t, 2)
	a, b := connectPair(t, tb, false)
	ctx := testCtx(t)
	write := func(id uint64) {
		t.Helper()
		a.qp.PostSend(device.SendWQE{WRID: id, Opcode: uint8(rdma.WRRDMAWrite),
			SendFlags: uint16(rdma.SendSignaled), RemoteAddr: b.buf, RKey: b.rkey},
			[]device.SGE{{Addr: a.buf, Length: 64, LKey: a.lkey}}, nil)
	}
	if n := a.scq.Events(); n != 0 {
		t.Fatalf("events %d at creation", n)
	}
	for i := uint32(1); i <= 3; i++ {
		a.scq.Arm()
		write(uint64(i))
		if !a.scq.WaitIRQ(5 * time.Second) {
			t.Fatalf("no interrupt %d", i)
		}
		if n := a.scq.Events(); n != i {
			t.Fatalf("events %d after interrupt %d", n, i)
		}
		if _, err := a.scq.Wait(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	write(9) // not armed: no interrupt, no count
	if _, err := a.scq.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := a.scq.Resize(ctx, 128); err != nil {
		t.Fatal(err)
	}
	if n := a.scq.Events(); n < 3 {
		t.Fatalf("events %d in the resized dbrec, want the count to go on from 3", n)
	}
}
