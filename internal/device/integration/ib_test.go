package integration

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/device/guestsim"
	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/ibsm"
	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
)

// newIBTestbed is newTestbed with InfiniBand vNICs on InfiniBand switch
// ports.
func newIBTestbed(t *testing.T, n int) *testbed {
	t.Helper()
	dir := t.TempDir()
	tb := &testbed{dir: dir}
	fab := startIBFabric(t, dir, n)
	tb.fab = fab
	sw := fab.Switches()[0]
	for i := 1; i <= n; i++ {
		c := vnicConfig(dir, i, sw.SocketPath(i))
		c.LinkLayer, c.IPv4, c.NodeGUID = "ib", nil, 0x0248_4eff_fe00_0000|uint64(i)<<8
		tb.cfgs = append(tb.cfgs, c)
	}
	srv, err := device.Start(testCtx(t), device.Config{VNICs: tb.cfgs, Control: filepath.Join(dir, "device.sock")})
	if err != nil {
		t.Fatal(err)
	}
	tb.srv = srv
	t.Cleanup(func() { srv.Close() })
	for i := range n {
		tb.guests = append(tb.guests, tb.connect(t, i))
	}
	return tb
}

// startIBFabric starts a switch in dir/fabric whose ports 1..n are
// InfiniBand links, and closes it at the end of the test.
func startIBFabric(t *testing.T, dir string, n int) *fabric.Fabric {
	t.Helper()
	sc := fabric.SwitchConfig{Name: fabric.DefaultSwitchName, Ports: 4}
	for i := 1; i <= n; i++ {
		sc.Port = append(sc.Port, fabric.PortConfig{Num: i, Link: "ib"})
	}
	fab, err := fabric.New(fabric.Config{RunDir: filepath.Join(dir, "fabric"), Ports: 4, Switches: []fabric.SwitchConfig{sc}})
	if err != nil {
		t.Fatal(err)
	}
	if err := fab.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fab.Close() })
	return fab
}

// guestMADPort is ibsm.Port over a simulated guest's QP0 and QP1, the
// way OpenSM reaches the subnet through umad and the guest driver.
type guestMADPort struct {
	t        *testing.T
	g        *guestsim.Guest
	pd       uint32
	buf      uint64
	lkey     uint32
	cq       *guestsim.CQ
	qp0, qp1 *guestsim.QP
	ahs      map[uint16]uint32
	wrid     uint64
}

const madSlot = rdma.GRHSize + proto.MADSize

func newGuestMADPort(t *testing.T, g *guestsim.Guest) *guestMADPort {
	t.Helper()
	ctx := testCtx(t)
	p := &guestMADPort{t: t, g: g, ahs: map[uint16]uint32{}}
	var err error
	if p.pd, err = g.AllocPD(ctx); err != nil {
		t.Fatal(err)
	}
	if p.buf, err = g.Alloc(16<<10, 4096, false); err != nil {
		t.Fatal(err)
	}
	if p.lkey, _, err = g.RegMR(ctx, p.pd, p.buf, p.buf, 16<<10, access); err != nil {
		t.Fatal(err)
	}
	if p.cq, err = g.CreateCQ(ctx, 64, 0); err != nil {
		t.Fatal(err)
	}
	for i, smi := range []bool{true, false} {
		qp, err := g.CreateQP(ctx, guestsim.QPConfig{PD: p.pd, SendCQ: p.cq, RecvCQ: p.cq, SMI: smi, Type: guestsim.QPTypeGSI})
		if err != nil {
			t.Fatalf("create QP%d: %v", i, err)
		}
		if qp.QPN != uint32(i) {
			t.Fatalf("special QP %d got number %d", i, qp.QPN)
		}
		qkey := uint32(0)
		if !smi {
			qkey = 0x80010000
		}
		for _, s := range []struct {
			attr device.QPAttr
			mask rdma.QPAttrMask
		}{
			{device.QPAttr{QPState: uint32(rdma.QPStateInit), PortNum: 1, QKey: qkey},
				rdma.QPAttrState | rdma.QPAttrPKeyIndex | rdma.QPAttrPort | rdma.QPAttrQKey},
			{device.QPAttr{QPState: uint32(rdma.QPStateRTR)}, rdma.QPAttrState},
			{device.QPAttr{QPState: uint32(rdma.QPStateRTS)}, rdma.QPAttrState | rdma.QPAttrSQPSN},
		} {
			if err := g.ModifyQP(ctx, qp.QPN, uint32(s.mask), s.attr); err != nil {
				t.Fatalf("modify QP%d: %v", i, err)
			}
		}
		for k := range 8 {
			slot := uint64(i*8 + k)
			qp.PostRecv(slot, []device.SGE{{Addr: p.buf + 4096 + slot*madSlot, Length: madSlot, LKey: p.lkey}})
		}
		if smi {
			p.qp0 = qp
		} else {
			p.qp1 = qp
		}
	}
	return p
}

func (p *guestMADPort) SMP(dlid uint16, mad []byte) ([]byte, error) {
	return p.exchange(p.qp0, dlid, mad)
}
func (p *guestMADPort) GMP(dlid uint16, mad []byte) ([]byte, error) {
	return p.exchange(p.qp1, dlid, mad)
}

// post sends mad on qp to dlid and returns at once; exchange, or a
// later one, takes what answers it.
func (p *guestMADPort) post(qp *guestsim.QP, dlid uint16, mad []byte) error {
	ctx := testCtx(p.t)
	ah, ok := p.ahs[dlid]
	if !ok {
		var err error
		if ah, err = p.g.CreateAH(ctx, p.pd, device.AHAttr{DLID: dlid, PortNum: 1}); err != nil {
			return err
		}
		p.ahs[dlid] = ah
	}
	if err := p.g.RAM().WriteAt(mad, p.buf); err != nil {
		return err
	}
	p.wrid++
	qp.PostSend(device.SendWQE{WRID: 1000 + p.wrid, Opcode: uint8(rdma.WRSend), SendFlags: uint16(rdma.SendSignaled),
		AH: ah, RemoteQPN: qp.QPN, RemoteQKey: 0x80010000}, []device.SGE{{Addr: p.buf, Length: proto.MADSize, LKey: p.lkey}}, nil)
	return nil
}

func (p *guestMADPort) exchange(qp *guestsim.QP, dlid uint16, mad []byte) ([]byte, error) {
	if err := p.post(qp, dlid, mad); err != nil {
		return nil, err
	}
	tid := proto.MAD(mad).TransactionID()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, e := range p.cq.Poll() {
			if e.Status != uint32(rdma.WCSuccess) {
				return nil, fmt.Errorf("MAD completion %+v", e)
			}
			if e.Opcode != uint32(rdma.WCRecv) {
				continue
			}
			addr := p.buf + 4096 + e.WRID*madSlot
			got := make([]byte, proto.MADSize)
			if err := p.g.RAM().ReadAt(got, addr+rdma.GRHSize); err != nil {
				return nil, err
			}
			owner := p.qp0
			if e.WRID >= 8 {
				owner = p.qp1
			}
			owner.PostRecv(e.WRID, []device.SGE{{Addr: addr, Length: madSlot, LKey: p.lkey}})
			if proto.MAD(got).TransactionID() == tid {
				return got, nil
			}
		}
		time.Sleep(50 * time.Microsecond)
	}
	return nil, ibsm.ErrNoAnswer
}

// TestIBSubnetFromAGuest: two InfiniBand vNICs on an IB switch. A subnet
// manager in guest 1, working through the guest's QP0 and QP1 as OpenSM
// does, discovers the subnet, gives LIDs, programs the switch and
// activates every port; then RC moves data between the guests by LID and
// the PMA of guest 2 answers PortCounters.
func TestIBSubnetFromAGuest(t *testing.T) {
	tb := newIBTestbed(t, 2)
	ctx := testCtx(t)
	g1, g2 := tb.guests[0], tb.guests[1]
	h := g2.Header()
	if h.LinkLayer != device.LinkInfiniBand || h.Caps&device.CapL2 != 0 {
		t.Fatalf("header link layer %d caps %#x: want InfiniBand without L2", h.LinkLayer, h.Caps)
	}
	if pa, err := g2.QueryPort(ctx); err != nil || pa.State != uint32(rdma.PortInit) || pa.LID != 0 ||
		pa.LinkLayer != device.LinkInfiniBand {
		t.Fatalf("port before the SM: %+v %v", pa, err)
	}
	sm := ibsm.New(newGuestMADPort(t, g1))
	if err := sm.Bringup(); err != nil {
		t.Fatal(err)
	}
	if len(sm.Nodes) != 3 || len(sm.Switches()) != 1 {
		t.Fatalf("the SM found %d nodes", len(sm.Nodes))
	}
	// Guest 2's port was configured over the wire: its driver hears of
	// the new LID and of Active (and not of Active at LIVE, while the
	// port was still in Init).
	// The backend posts them from its worker, after the engine raised
	// them: wait for the last.
	var evs []uint32
	for deadline := time.Now().Add(5 * time.Second); !slices.Contains(evs, device.EvPortActive) &&
		time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		for _, e := range g2.Events() {
			evs = append(evs, e.Type)
		}
	}
	if !slices.Equal(evs, []uint32{device.EvLIDChange, device.EvPortActive}) {
		t.Fatalf("guest 2's events %v, want LID_CHANGE, PORT_ACTIVE", evs)
	}
	lids := make([]uint16, 2)
	for i, g := range []*guestsim.Guest{g1, g2} {
		pa, err := g.QueryPort(ctx)
		if err != nil || pa.State != uint32(rdma.PortActive) || pa.LID == 0 || pa.SMLID != 1 {
			t.Fatalf("guest %d port after the SM: %+v %v", i+1, pa, err)
		}
		lids[i] = pa.LID
	}
	// RC by LID.
	a := newRCEnd(t, g1, [6]byte{}, false)
	b := newRCEnd(t, g2, [6]byte{}, false)
	a.connectLID(t, b, lids[1])
	b.connectLID(t, a, lids[0])
	want := fill(t, g1, a.buf, 5000, 7)
	b.qp.PostRecv(1, []device.SGE{{Addr: b.buf, Length: 8192, LKey: b.lkey}})
	a.qp.PostSend(device.SendWQE{WRID: 2, Opcode: uint8(rdma.WRSend), SendFlags: uint16(rdma.SendSignaled)},
		[]device.SGE{{Addr: a.buf, Length: 5000, LKey: a.lkey}}, nil)
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCSend, 2)
	if e := wantCQE(t, b.rcq, rdma.WCSuccess, rdma.WCRecv, 1); e.ByteLen != 5000 {
		t.Fatalf("receive %+v", e)
	}
	if got := read(t, g2, b.buf, 5000); !bytes.Equal(got, want) {
		t.Fatal("data differs")
	}
	// perfquery: guest 2's PMA.
	req := make([]byte, proto.PortCountersSize)
	proto.PortCounters(req).Encode(&proto.PortCountersFields{PortSelect: 1})
	data, st, err := sm.Perf(proto.MADMethodGet, lids[1], proto.PMAAttrPortCounters, 0, req)
	if err != nil || st != 0 || proto.PortCounters(data).PortRcvPkts() == 0 {
		t.Fatalf("PortCounters: status %#x, %v", st, err)
	}
}

func (e *rcEnd) connectLID(t *testing.T, r *rcEnd, dlid uint16) {
	t.Helper()
	e.connectLIDDepth(t, r, dlid, 4, 14)
}

// connectLIDDepth is connectLID with rd READs and atomics outstanding
// each way and the local ACK timeout code timeout.
func (e *rcEnd) connectLIDDepth(t *testing.T, r *rcEnd, dlid uint16, rd, timeout uint8) {
	t.Helper()
	ctx := testCtx(t)
	for _, s := range []struct {
		attr device.QPAttr
		mask rdma.QPAttrMask
	}{
		{device.QPAttr{QPState: uint32(rdma.QPStateInit), PortNum: 1, QPAccessFlags: e.access},
			rdma.QPAttrState | rdma.QPAttrPKeyIndex | rdma.QPAttrPort | rdma.QPAttrAccessFlags},
		{device.QPAttr{QPState: uint32(rdma.QPStateRTR), PathMTU: uint32(rdma.MTU1024), DestQPNum: r.qp.QPN,
			RQPSN: 100, MaxDestRDAtomic: rd, MinRNRTimer: 12, AH: device.AHAttr{DLID: dlid, PortNum: 1}},
			rdma.QPAttrState | rdma.QPAttrAV | rdma.QPAttrPathMTU | rdma.QPAttrDestQPN | rdma.QPAttrRQPSN |
				rdma.QPAttrMaxDestRDAtomic | rdma.QPAttrMinRNRTimer},
		{device.QPAttr{QPState: uint32(rdma.QPStateRTS), SQPSN: 100, Timeout: timeout, RetryCnt: 7, RNRRetry: 7,
			MaxRDAtomic: rd},
			rdma.QPAttrState | rdma.QPAttrSQPSN | rdma.QPAttrTimeout | rdma.QPAttrRetryCnt | rdma.QPAttrRNRRetry |
				rdma.QPAttrMaxQPRDAtomic},
	} {
		if err := e.g.ModifyQP(ctx, e.qp.QPN, uint32(s.mask), s.attr); err != nil {
			t.Fatalf("modify QP %d to %d: %v", e.qp.QPN, s.attr.QPState, err)
		}
	}
}

// TestIBFabricRestart: on InfiniBand the port state follows the link.
// When the switch goes away, each port goes Down (PhysState Polling) and
// the guest hears PORT_ERR; when a new switch answers, the port comes
// back in Initialize with its LID, and the guest hears nothing until the
// subnet manager's next sweep takes it to Active (PORT_ACTIVE); then RC
// by LID works again. Before, the port stayed Active through the outage
// and told the guest so while the new switch forwarded nothing.
func TestIBFabricRestart(t *testing.T) {
	tb := newIBTestbed(t, 2)
	ctx := testCtx(t)
	g1, g2 := tb.guests[0], tb.guests[1]
	smPort := newGuestMADPort(t, g1)
	if err := ibsm.New(smPort).Bringup(); err != nil {
		t.Fatal(err)
	}
	waitPortEvent := func(g *guestsim.Guest, typ uint32) {
		t.Helper()
		ev, err := g.WaitEvent(ctx, typ)
		if err != nil || ev.Handle != 1 {
			t.Fatalf("event %+v, %v; want %d for port 1", ev, err, typ)
		}
	}
	lids := make([]uint16, 2)
	for i, g := range tb.guests {
		waitPortEvent(g, device.EvPortActive)
		pa, err := g.QueryPort(ctx)
		if err != nil || pa.State != uint32(rdma.PortActive) {
			t.Fatalf("guest %d before the restart: %+v %v", i+1, pa, err)
		}
		lids[i] = pa.LID
		g.Events()
	}
	tb.fab.Close()
	for i, g := range tb.guests {
		waitPortEvent(g, device.EvPortErr)
		pa, err := g.QueryPort(ctx)
		if err != nil || pa.State != uint32(rdma.PortDown) || pa.PhysState != proto.PortPhysStatePolling {
			t.Fatalf("guest %d with the switch gone: %+v %v; want Down, Polling", i+1, pa, err)
		}
	}
	tb.fab = startIBFabric(t, tb.dir, 2)
	for i, g := range tb.guests {
		var pa device.PortAttr
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			var err error
			if pa, err = g.QueryPort(ctx); err != nil {
				t.Fatal(err)
			}
			if pa.State != uint32(rdma.PortDown) || time.Now().After(deadline) {
				break
			}
		}
		if pa.State != uint32(rdma.PortInit) || pa.PhysState != proto.PortPhysStateLinkUp || pa.LID != lids[i] {
			t.Fatalf("guest %d after the restart: %+v; want Init, LinkUp, LID %#x", i+1, pa, lids[i])
		}
		for _, e := range g.Events() {
			if e.Type == device.EvPortActive {
				t.Fatalf("guest %d: PORT_ACTIVE before the subnet manager swept", i+1)
			}
		}
	}
	if err := ibsm.New(smPort).Bringup(); err != nil {
		t.Fatal(err)
	}
	for i, g := range tb.guests {
		waitPortEvent(g, device.EvPortActive)
		if pa, err := g.QueryPort(ctx); err != nil || pa.State != uint32(rdma.PortActive) {
			t.Fatalf("guest %d after the sweep: %+v %v", i+1, pa, err)
		} else {
			lids[i] = pa.LID
		}
	}
	a := newRCEnd(t, g1, [6]byte{}, false)
	b := newRCEnd(t, g2, [6]byte{}, false)
	a.connectLID(t, b, lids[1])
	b.connectLID(t, a, lids[0])
	want := fill(t, g1, a.buf, 3000, 5)
	b.qp.PostRecv(1, []device.SGE{{Addr: b.buf, Length: 4096, LKey: b.lkey}})
	a.qp.PostSend(device.SendWQE{WRID: 2, Opcode: uint8(rdma.WRSend), SendFlags: uint16(rdma.SendSignaled)},
		[]device.SGE{{Addr: a.buf, Length: 3000, LKey: a.lkey}}, nil)
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCSend, 2)
	wantCQE(t, b.rcq, rdma.WCSuccess, rdma.WCRecv, 1)
	if got := read(t, g2, b.buf, 3000); !bytes.Equal(got, want) {
		t.Fatal("data differs after the restart")
	}
}
