package integration

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/device/guestsim"
	"github.com/PacketFive/hinic/internal/rdma"
)

const udQKey = 0x11111111

// udEnd is one guest's UD side: a PD, an MR over a buffer, CQs and a UD
// QP in RTS with Q_Key udQKey.
type udEnd struct {
	g        *guestsim.Guest
	pd       uint32
	scq, rcq *guestsim.CQ
	qp       *guestsim.QP
	buf      uint64
	lkey     uint32
	gid      [16]byte
	mac      [6]byte
}

func newUDEnd(t *testing.T, g *guestsim.Guest, mac [6]byte) *udEnd {
	t.Helper()
	ctx := testCtx(t)
	e := &udEnd{g: g, mac: mac}
	var err error
	if e.pd, err = g.AllocPD(ctx); err != nil {
		t.Fatal(err)
	}
	if e.buf, err = g.Alloc(64<<10, 4096, false); err != nil {
		t.Fatal(err)
	}
	if e.lkey, _, err = g.RegMR(ctx, e.pd, e.buf, e.buf, 64<<10, access); err != nil {
		t.Fatal(err)
	}
	if e.scq, err = g.CreateCQ(ctx, 64, 0); err != nil {
		t.Fatal(err)
	}
	if e.rcq, err = g.CreateCQ(ctx, 64, 1); err != nil {
		t.Fatal(err)
	}
	e.qp = e.newQP(t, e.rcq)
	if e.gid, err = g.QueryGID(ctx, 1); err != nil {
		t.Fatal(err)
	}
	return e
}

// newQP creates another UD QP in the end's PD, in RTS, receiving on rcq.
func (e *udEnd) newQP(t *testing.T, rcq *guestsim.CQ) *guestsim.QP {
	t.Helper()
	return e.udQP(t, guestsim.QPConfig{PD: e.pd, SendCQ: e.scq, RecvCQ: rcq, Type: guestsim.QPTypeUD}, 0x55)
}

// udQP creates a UD QP of cfg on the end's guest and takes it to RTS
// (Q_Key udQKey, send PSN sqPSN).
func (e *udEnd) udQP(t *testing.T, cfg guestsim.QPConfig, sqPSN uint32) *guestsim.QP {
	t.Helper()
	ctx := testCtx(t)
	qp, err := e.g.CreateQP(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		attr device.QPAttr
		mask rdma.QPAttrMask
	}{
		{device.QPAttr{QPState: uint32(rdma.QPStateInit), PortNum: 1, QKey: udQKey},
			rdma.QPAttrState | rdma.QPAttrPKeyIndex | rdma.QPAttrPort | rdma.QPAttrQKey},
		{device.QPAttr{QPState: uint32(rdma.QPStateRTR)}, rdma.QPAttrState},
		{device.QPAttr{QPState: uint32(rdma.QPStateRTS), SQPSN: sqPSN}, rdma.QPAttrState | rdma.QPAttrSQPSN},
	} {
		if err := e.g.ModifyQP(ctx, qp.QPN, uint32(s.mask), s.attr); err != nil {
			t.Fatalf("modify UD QP %d to %d: %v", qp.QPN, s.attr.QPState, err)
		}
	}
	return qp
}

// ahTo creates an AH in pd for r's GID 1 (its IPv4 address).
func (e *udEnd) ahTo(t *testing.T, pd uint32, r *udEnd) uint32 {
	t.Helper()
	ah, err := e.g.CreateAH(testCtx(t), pd, device.AHAttr{IsGlobal: 1, PortNum: 1, DMAC: r.mac, DGID: r.gid,
		SGIDIndex: 1, HopLimit: 64})
	if err != nil {
		t.Fatal(err)
	}
	return ah
}

// waitRecvTaken waits until the device moved every receive WQE posted on
// the QPs into the engine: UD has no RNR, a datagram that finds no
// receive is dropped.
func waitRecvTaken(t *testing.T, qps ...*guestsim.QP) {
	t.Helper()
	ctx := testCtx(t)
	for _, qp := range qps {
		for qp.RQTaken() != qp.RQPosted() {
			if ctx.Err() != nil {
				t.Fatalf("QP %d: the device took %d of %d receive WQEs", qp.QPN, qp.RQTaken(), qp.RQPosted())
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
}

func udSend(qp *guestsim.QP, wrID uint64, ah, remoteQPN uint32, imm uint32, sge device.SGE) {
	qp.PostSend(device.SendWQE{WRID: wrID, Opcode: uint8(rdma.WRSendWithImm), SendFlags: uint16(rdma.SendSignaled),
		ImmData: imm, AH: ah, RemoteQPN: remoteQPN, RemoteQKey: udQKey}, []device.SGE{sge}, nil)
}

// checkGRH checks the 40-byte GRH area of a UD receive between GIDs src
// and dst: over RoCEv2/IPv4 (IPv4-mapped GIDs) 20 zero bytes, then the
// IPv4 header; over IPv6 the IPv6 header.
func checkGRH(t *testing.T, area []byte, src, dst [16]byte) {
	t.Helper()
	v4 := bytes.Equal(src[:12], []byte{10: 0xff, 11: 0xff})
	switch {
	case v4 && (!bytes.Equal(area[:20], make([]byte, 20)) || area[20] != 0x45 || area[20+9] != 17 ||
		!bytes.Equal(area[20+12:20+16], src[12:]) || !bytes.Equal(area[20+16:20+20], dst[12:])):
		t.Fatalf("GRH area %x: want 20 zero bytes and an IPv4/UDP header %v > %v", area, src[12:], dst[12:])
	case !v4 && (area[0]>>4 != 6 || area[6] != 17 || !bytes.Equal(area[8:24], src[:]) || !bytes.Equal(area[24:40], dst[:])):
		t.Fatalf("GRH area %x: want an IPv6/UDP header %x > %x", area, src, dst)
	}
}

// TestUDSendRecv: UD datagrams both ways between two guests, with the
// GRH area, the source QP and the immediate in the receive CQE.
func TestUDSendRecv(t *testing.T) {
	tb := newTestbed(t, 2)
	a := newUDEnd(t, tb.guests[0], tb.cfgs[0].MAC)
	b := newUDEnd(t, tb.guests[1], tb.cfgs[1].MAC)
	if qa, err := a.g.QueryQP(testCtx(t), a.qp.QPN); err != nil || qa.QKey != udQKey ||
		qa.QPState != uint32(rdma.QPStateRTS) {
		t.Fatalf("QUERY_QP of the UD QP: %+v, %v", qa, err)
	}
	for i, d := range []struct {
		name             string
		s, r             *udEnd
		length, recvSize uint32
	}{
		{"A to B", a, b, 700, 1024},
		{"B to A", b, a, 984, 1024}, // 40 + 984: the buffer exactly
	} {
		t.Run(d.name, func(t *testing.T) {
			ah := d.s.ahTo(t, d.s.pd, d.r)
			want := fill(t, d.s.g, d.s.buf, int(d.length), byte(i+1))
			recvAt := d.r.buf + 8192
			d.r.qp.PostRecv(uint64(10+i), []device.SGE{{Addr: recvAt, Length: d.recvSize, LKey: d.r.lkey}})
			waitRecvTaken(t, d.r.qp)
			udSend(d.s.qp, uint64(20+i), ah, d.r.qp.QPN, uint32(0xbeef00+i),
				device.SGE{Addr: d.s.buf, Length: d.length, LKey: d.s.lkey})
			wantCQE(t, d.s.scq, rdma.WCSuccess, rdma.WCSend, uint64(20+i))
			e := wantCQE(t, d.r.rcq, rdma.WCSuccess, rdma.WCRecv, uint64(10+i))
			if e.ByteLen != rdma.GRHSize+d.length || e.SrcQP != d.s.qp.QPN || e.QPNum != d.r.qp.QPN ||
				e.ImmData != uint32(0xbeef00+i) || e.WCFlags != uint32(rdma.WCGRH|rdma.WCWithImm) {
				t.Fatalf("recv CQE %+v", e)
			}
			checkGRH(t, read(t, d.r.g, recvAt, rdma.GRHSize), d.s.gid, d.r.gid)
			if got := read(t, d.r.g, recvAt+rdma.GRHSize, int(d.length)); !bytes.Equal(got, want) {
				t.Fatal("UD payload differs")
			}
		})
	}
}

// srqBed is two RC senders on guest A, each connected to a receiver QP
// on guest B; both receivers take their receive WQEs from one SRQ and
// complete on B's receive CQ.
type srqBed struct {
	tb     *testbed
	a, b   *rcEnd
	s1, s2 *guestsim.QP // senders on A
	r1, r2 *guestsim.QP // receivers on B, with the SRQ
	srq    *guestsim.SRQ
}

func newSRQBed(t *testing.T, c guestsim.SRQConfig) *srqBed {
	t.Helper()
	ctx := testCtx(t)
	tb := newTestbed(t, 2)
	sb := &srqBed{tb: tb}
	sb.a = newRCEnd(t, tb.guests[0], tb.cfgs[0].MAC, false)
	sb.b = newRCEnd(t, tb.guests[1], tb.cfgs[1].MAC, false)
	c.PD = sb.b.pd
	if c.MaxNumTags != 0 {
		c.CQ = sb.b.rcq // a TM SRQ's operations complete with its receives
	}
	var err error
	if sb.srq, err = sb.b.g.CreateSRQ(ctx, c); err != nil {
		t.Fatal(err)
	}
	mk := func(e *rcEnd, srq *guestsim.SRQ) *guestsim.QP {
		qp, err := e.g.CreateQP(ctx, guestsim.QPConfig{PD: e.pd, SendCQ: e.scq, RecvCQ: e.rcq, SRQ: srq})
		if err != nil {
			t.Fatal(err)
		}
		return qp
	}
	sb.s1, sb.s2 = sb.a.qp, mk(sb.a, nil)
	sb.r1, sb.r2 = mk(sb.b, sb.srq), mk(sb.b, sb.srq)
	view := func(e *rcEnd, qp *guestsim.QP) *rcEnd {
		v := *e
		v.qp = qp
		return &v
	}
	for _, p := range [][2]*rcEnd{
		{view(sb.a, sb.s1), view(sb.b, sb.r1)}, {view(sb.a, sb.s2), view(sb.b, sb.r2)},
	} {
		p[0].connect(t, p[1])
		p[1].connect(t, p[0])
	}
	return sb
}

// postSRQ posts WQEs first..first+n-1 to the SRQ: wr_id 100+i, 1 KiB of
// B's buffer each.
func (sb *srqBed) postSRQ(first, n int) {
	for i := first; i < first+n; i++ {
		sb.srq.PostRecv(uint64(100+i), []device.SGE{{Addr: sb.b.buf + uint64(i)*1024, Length: 1024, LKey: sb.b.lkey}})
	}
}

// send sends message i (300 bytes, imm i) on s1 or s2 alternately and
// waits for its send completion.
func (sb *srqBed) send(t *testing.T, i int) []byte {
	t.Helper()
	qp := sb.s1
	if i%2 == 1 {
		qp = sb.s2
	}
	src := sb.a.buf + 32768 + uint64(i%16)*512
	want := fill(t, sb.a.g, src, 300, byte(i*3))
	qp.PostSend(device.SendWQE{WRID: uint64(i), Opcode: uint8(rdma.WRSendWithImm),
		SendFlags: uint16(rdma.SendSignaled), ImmData: uint32(i)}, []device.SGE{{Addr: src, Length: 300,
		LKey: sb.a.lkey}}, nil)
	wantCQE(t, sb.a.scq, rdma.WCSuccess, rdma.WCSend, uint64(i))
	return want
}

// recv waits for message i's receive completion on B: the i-th SRQ WQE,
// on the QP that message was sent to.
func (sb *srqBed) recv(t *testing.T, i int, want []byte) {
	t.Helper()
	e := wantCQE(t, sb.b.rcq, rdma.WCSuccess, rdma.WCRecv, uint64(100+i))
	qpn := sb.r1.QPN
	if i%2 == 1 {
		qpn = sb.r2.QPN
	}
	if e.QPNum != qpn || e.ImmData != uint32(i) || e.ByteLen != 300 {
		t.Fatalf("message %d: CQE %+v, want QP %d", i, e, qpn)
	}
	if got := read(t, sb.b.g, sb.b.buf+uint64(i)*1024, 300); !bytes.Equal(got, want) {
		t.Fatalf("message %d: payload differs", i)
	}
}

// TestSRQSharedByTwoRCQPs: two RC QPs take receive WQEs from one SRQ in
// guest memory, each WQE exactly once and in posting order; moving one
// QP to ERR posts LAST_WQE_REACHED.
func TestSRQSharedByTwoRCQPs(t *testing.T) {
	sb := newSRQBed(t, guestsim.SRQConfig{Depth: 16, MaxSGE: 2})
	ctx := testCtx(t)
	attr, err := sb.b.g.QuerySRQ(ctx, sb.srq.SRQN)
	if err != nil || attr.MaxWR != 16 || attr.MaxSGE != 2 || attr.SRQLimit != 0 {
		t.Fatalf("QUERY_SRQ %+v, %v", attr, err)
	}
	sb.postSRQ(0, 8)
	for i := range 8 {
		sb.recv(t, i, sb.send(t, i))
	}
	if extra := sb.b.rcq.Poll(); len(extra) != 0 {
		t.Fatalf("extra receive completions %+v", extra)
	}
	if got := sb.srq.Taken(); got != 8 {
		t.Fatalf("device took %d SRQ WQEs, want 8", got)
	}
	st := sb.tb.srv.Status().VNICs[1]
	if st.Objects.SRQs != 1 || len(st.QPs) != 3 || st.QPs[1].SRQ != sb.srq.SRQN || st.QPs[2].SRQ != sb.srq.SRQN {
		t.Errorf("status objects %+v, QPs %+v", st.Objects, st.QPs)
	}
	// The SRQ QP leaves: IBA 11.6.3.1's last-WQE event names it.
	sb.b.g.Events()
	if err := sb.b.g.ModifyQP(ctx, sb.r1.QPN, uint32(rdma.QPAttrState), device.QPAttr{QPState: uint32(rdma.QPStateErr)}); err != nil {
		t.Fatal(err)
	}
	ev, err := sb.b.g.WaitEvent(ctx, device.EvQPLastWQE)
	if err != nil || ev.Handle != sb.r1.QPN {
		t.Fatalf("event %+v, %v; want QP_LAST_WQE for QP %d", ev, err, sb.r1.QPN)
	}
	// The other QP still takes from the SRQ (message 9 goes to r2).
	sb.postSRQ(9, 1)
	sb.recv(t, 9, sb.send(t, 9))
}

// TestSRQLimitEvent: MODIFY_SRQ arms the limit; the SEND that leaves
// fewer WQEs than the limit brings SRQ_LIMIT into the guest's event
// queue, once, and disarms it.
func TestSRQLimitEvent(t *testing.T) {
	sb := newSRQBed(t, guestsim.SRQConfig{Depth: 16})
	ctx := testCtx(t)
	g := sb.b.g
	if err := sb.srq.ArmLimit(ctx, 17); err == nil {
		t.Fatal("a limit above max_wr was accepted")
	}
	if err := sb.srq.ArmLimit(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if a, err := g.QuerySRQ(ctx, sb.srq.SRQN); err != nil || a.SRQLimit != 4 {
		t.Fatalf("QUERY_SRQ %+v, %v", a, err)
	}
	g.Events()
	sb.postSRQ(0, 8)
	for i := range 4 { // 4 WQEs left: not below the limit
		sb.recv(t, i, sb.send(t, i))
	}
	for _, e := range g.Events() {
		if e.Type == device.EvSRQLimit {
			t.Fatalf("SRQ_LIMIT with 4 WQEs left and limit 4: %+v", e)
		}
	}
	sb.recv(t, 4, sb.send(t, 4))
	ev, err := g.WaitEvent(ctx, device.EvSRQLimit)
	if err != nil || ev.Handle != sb.srq.SRQN {
		t.Fatalf("event %+v, %v; want SRQ_LIMIT for SRQ %d", ev, err, sb.srq.SRQN)
	}
	if a, err := g.QuerySRQ(ctx, sb.srq.SRQN); err != nil || a.SRQLimit != 0 {
		t.Fatalf("after the event: QUERY_SRQ %+v, %v; want the limit disarmed", a, err)
	}
	sb.recv(t, 5, sb.send(t, 5))
	for _, e := range g.Events() {
		if e.Type == device.EvSRQLimit {
			t.Fatalf("a second SRQ_LIMIT without re-arming: %+v", e)
		}
	}
}

// TestSRQResize: MODIFY_SRQ with HICAIN_SRQ_MAX_WR moves the SRQ to a new
// ring; the WQEs of the old ring are kept, in order, and posting goes on
// in the new one.
func TestSRQResize(t *testing.T) {
	sb := newSRQBed(t, guestsim.SRQConfig{Depth: 4})
	ctx := testCtx(t)
	sb.postSRQ(0, 4)
	for sb.srq.Taken() != 4 {
		if ctx.Err() != nil {
			t.Fatal("the device did not take the SRQ WQEs")
		}
		time.Sleep(time.Millisecond)
	}
	sb.postSRQ(4, 2) // waits in the old ring: the engine SRQ holds 4
	sb.recv(t, 0, sb.send(t, 0))
	if err := sb.srq.Resize(ctx, 2); err == nil {
		t.Fatal("a resize below the WQEs held was accepted")
	}
	if err := sb.srq.Resize(ctx, 16); err != nil {
		t.Fatal(err)
	}
	if a, err := sb.b.g.QuerySRQ(ctx, sb.srq.SRQN); err != nil || a.MaxWR != 16 {
		t.Fatalf("QUERY_SRQ %+v, %v", a, err)
	}
	sb.postSRQ(6, 10)
	for i := 1; i < 16; i++ {
		sb.recv(t, i, sb.send(t, i))
	}
	da, err := sb.b.g.QueryDevice(ctx)
	if err != nil || da.DeviceCapFlags&rdma.DeviceSRQResize == 0 {
		t.Fatalf("device_cap_flags %#x, %v: want IBV_DEVICE_SRQ_RESIZE", da.DeviceCapFlags, err)
	}
}

// TestMulticast: a UD sender on guest A, receivers attached to the group
// on A (another QP) and on B; the sender, attached too, does not hear
// itself; a detached QP gets nothing more. Over an IPv4-mapped group
// (01:00:5e MAC) and an IPv6 group (33:33 MAC) sent from the link-local
// GID.
func TestMulticast(t *testing.T) {
	for _, fam := range []struct {
		name  string
		group [16]byte
		sgid  uint8
	}{
		{"ipv4", [16]byte{10: 0xff, 11: 0xff, 12: 239, 13: 1, 14: 2, 15: 3}, 1},
		{"ipv6", [16]byte{0: 0xff, 1: 0x0e, 13: 0x12, 14: 0x34, 15: 0x56}, 0},
	} {
		t.Run(fam.name, func(t *testing.T) { testMulticast(t, fam.group, fam.sgid) })
	}
}

func testMulticast(t *testing.T, group [16]byte, sgidIndex uint8) {
	tb := newTestbed(t, 2)
	ctx := testCtx(t)
	a := newUDEnd(t, tb.guests[0], tb.cfgs[0].MAC)
	b := newUDEnd(t, tb.guests[1], tb.cfgs[1].MAC)
	sgid, err := a.g.QueryGID(ctx, uint32(sgidIndex))
	if err != nil {
		t.Fatal(err)
	}
	// The sender and a2 share a's receive CQ: anything the sender got
	// would show there, in engine order, before a2's next completion.
	a2 := a.newQP(t, a.rcq)
	for _, m := range []struct {
		g   *guestsim.Guest
		qpn uint32
	}{{a.g, a.qp.QPN}, {a.g, a2.QPN}, {b.g, b.qp.QPN}} {
		if err := m.g.AttachMcast(ctx, m.qpn, group); err != nil {
			t.Fatal(err)
		}
	}
	ah, err := a.g.CreateAH(ctx, a.pd, device.AHAttr{IsGlobal: 1, PortNum: 1, DGID: group, SGIDIndex: sgidIndex,
		HopLimit: 8})
	if err != nil {
		t.Fatal(err)
	}
	recv := func(e *udEnd, qp *guestsim.QP, slot int) {
		qp.PostRecv(uint64(slot), []device.SGE{{Addr: e.buf + uint64(slot)*2048, Length: 2048, LKey: e.lkey}})
	}
	for i := range 4 {
		recv(a, a.qp, i)
		recv(a, a2, 8+i)
		recv(b, b.qp, 16+i)
	}
	waitRecvTaken(t, a.qp, a2, b.qp)
	const n = 500
	for m := range 2 {
		want := fill(t, a.g, a.buf+60000, n, byte(7*m+1))
		udSend(a.qp, uint64(m), ah, 0, uint32(m), device.SGE{Addr: a.buf + 60000, Length: n, LKey: a.lkey})
		wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCSend, uint64(m))
		for _, r := range []struct {
			e    *udEnd
			qpn  uint32
			slot int
		}{{a, a2.QPN, 8 + m}, {b, b.qp.QPN, 16 + m}} {
			e := wantCQE(t, r.e.rcq, rdma.WCSuccess, rdma.WCRecv, uint64(r.slot))
			if e.QPNum != r.qpn || e.SrcQP != a.qp.QPN || e.ImmData != uint32(m) || e.ByteLen != rdma.GRHSize+n {
				t.Fatalf("message %d: CQE %+v", m, e)
			}
			at := r.e.buf + uint64(r.slot)*2048
			checkGRH(t, read(t, r.e.g, at, rdma.GRHSize), sgid, group)
			if got := read(t, r.e.g, at+rdma.GRHSize, n); !bytes.Equal(got, want) {
				t.Fatalf("message %d: payload differs on QP %d", m, r.qpn)
			}
		}
	}
	// B leaves the group. The next multicast reaches a2 only; a unicast
	// datagram to B afterwards takes B's next WQE (slot 18), so a
	// multicast copy B wrongly got would show as slot 18 being used.
	if err := b.g.DetachMcast(ctx, b.qp.QPN, group); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, b.g.DetachMcast(ctx, b.qp.QPN, group), device.StEINVAL)
	udSend(a.qp, 2, ah, 0, 2, device.SGE{Addr: a.buf + 60000, Length: n, LKey: a.lkey})
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCSend, 2)
	wantCQE(t, a.rcq, rdma.WCSuccess, rdma.WCRecv, 10)
	uni := a.ahTo(t, a.pd, b)
	udSend(a.qp, 3, uni, b.qp.QPN, 3, device.SGE{Addr: a.buf + 60000, Length: 16, LKey: a.lkey})
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCSend, 3)
	if e := wantCQE(t, b.rcq, rdma.WCSuccess, rdma.WCRecv, 18); e.ImmData != 3 {
		t.Fatalf("B's next completion %+v, want the unicast datagram", e)
	}
	if extra := a.rcq.Poll(); len(extra) != 0 {
		t.Fatalf("the sender or a2 got more: %+v", extra)
	}
}

// TestCQOverrunEvent: a guest that posts more signaled work than its CQ
// and the engine's CQ hold loses completions and learns it from a
// CQ_ERR event naming the CQ.
func TestCQOverrunEvent(t *testing.T) {
	tb := newTestbed(t, 2)
	ctx := testCtx(t)
	a := newRCEnd(t, tb.guests[0], tb.cfgs[0].MAC, false)
	b := newRCEnd(t, tb.guests[1], tb.cfgs[1].MAC, false)
	small, err := a.g.CreateCQ(ctx, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := a.g.CreateQP(ctx, guestsim.QPConfig{PD: a.pd, SendCQ: small, RecvCQ: a.rcq, SQDepth: 32})
	if err != nil {
		t.Fatal(err)
	}
	a.qp = qp
	a.connect(t, b)
	b.connect(t, a)
	a.g.Events()
	for i := range 16 {
		qp.PostSend(device.SendWQE{WRID: uint64(i), Opcode: uint8(rdma.WRRDMAWrite), SendFlags: uint16(rdma.SendSignaled),
			RemoteAddr: b.buf, RKey: b.rkey}, []device.SGE{{Addr: a.buf, Length: 64, LKey: a.lkey}}, nil)
	}
	ev, err := a.g.WaitEvent(ctx, device.EvCQErr)
	if err != nil || ev.Handle != small.CQN || ev.Data != device.CQErrOverrun {
		t.Fatalf("event %+v, %v; want CQ_ERR for CQ %d", ev, err, small.CQN)
	}
	if got := small.Poll(); len(got) != 4 || got[0].WRID != 0 {
		t.Fatalf("the guest ring holds %d CQEs (%+v), want the first 4", len(got), got)
	}
	// The engine CQ (as deep as the ring) held the next 4 while the ring
	// was full: once the guest has consumed, they come, in order, ahead
	// of anything that completed later.
	got, err := small.Wait(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range got[:4] {
		if e.WRID != uint64(4+i) || e.Status != uint32(rdma.WCSuccess) {
			t.Fatalf("CQE %d after the stall: %+v, want wr_id %d", i, e, 4+i)
		}
	}
	if st := tb.srv.Status(); st.VNICs[0].Counters.CQOverflows == 0 || st.VNICs[0].Engine.CQOverflows == 0 {
		t.Errorf("counters %+v, engine %d overflows", st.VNICs[0].Counters, st.VNICs[0].Engine.CQOverflows)
	}
}

// TestPortDown: when the fabric goes away the guest gets PORT_ERR,
// LINK_UP clears and QUERY_PORT says DOWN; the vNIC keeps serving, and a
// guest connecting later sees the link down from the start.
func TestPortDown(t *testing.T) {
	tb := newTestbed(t, 2)
	ctx := testCtx(t)
	g := tb.guests[0]
	g.Events()
	tb.fab.Close()
	ev, err := g.WaitEvent(ctx, device.EvPortErr)
	if err != nil || ev.Handle != 1 {
		t.Fatalf("event %+v, %v; want PORT_ERR for port 1", ev, err)
	}
	if st := g.DevStatus(); st&device.DevLinkUp != 0 || st&device.DevLive == 0 {
		t.Errorf("dev_status %#x: want LIVE without LINK_UP", st)
	}
	pa, err := g.QueryPort(ctx)
	if err != nil || pa.State != uint32(rdma.PortDown) {
		t.Fatalf("QUERY_PORT %+v, %v: want DOWN", pa, err)
	}
	stillServes(t, g)
	stillServes(t, tb.guests[1])
	for _, v := range tb.srv.Status().VNICs {
		if v.LinkUp {
			t.Errorf("%s: link up in the status", v.Name)
		}
	}
	// A guest that connects now: no LINK_UP, no PORT_ACTIVE.
	g.Close()
	deadline := time.Now().Add(5 * time.Second)
	for tb.srv.Status().VNICs[0].Guest {
		if time.Now().After(deadline) {
			t.Fatal("backend did not notice the disconnect")
		}
		time.Sleep(5 * time.Millisecond)
	}
	g2 := tb.connect(t, 0)
	if st := g2.DevStatus(); st&device.DevLinkUp != 0 {
		t.Errorf("new guest: dev_status %#x with LINK_UP", st)
	}
	for _, e := range g2.Events() {
		if e.Type == device.EvPortActive {
			t.Errorf("new guest got PORT_ACTIVE with the link down")
		}
	}
}

// TestQueryDeviceABI11: the SRQ, multicast and AH limits reach the
// guest; a 1.0 driver's 120-byte QUERY_DEVICE still works and gets no
// more than it asked for.
func TestQueryDeviceABI11(t *testing.T) {
	tb := newTestbed(t, 1)
	g := tb.guests[0]
	ctx := testCtx(t)
	if c := g.Header().Caps; c&(device.CapUD|device.CapSRQ|device.CapRC) != device.CapUD|device.CapSRQ|device.CapRC {
		t.Errorf("caps %#x", c)
	}
	da, err := g.QueryDevice(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if da.MaxSRQ != rdma.DefaultMaxSRQ || da.MaxSRQWR != rdma.DefaultMaxSRQWR || da.MaxSRQSGE != rdma.DefaultMaxSGE ||
		da.MaxMcastGrp != rdma.DefaultMaxMcastGrp || da.MaxMcastQPAttach != rdma.DefaultMaxMcastQP ||
		da.MaxTotalMcastQPAttach != rdma.DefaultMaxMcastGrp*rdma.DefaultMaxMcastQP || da.MaxAH != g.Header().MaxAH {
		t.Errorf("device attr %+v", da)
	}
	gpa, err := g.Alloc(256, 64, false)
	if err != nil {
		t.Fatal(err)
	}
	ff := bytes.Repeat([]byte{0xff}, 256)
	if err := g.RAM().WriteAt(ff, gpa); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Admin(ctx, &device.AdminCmd{Opcode: device.CmdQueryDevice, RespGPA: gpa,
		RespLen: device.DeviceAttrV10Size}); err != nil {
		t.Fatal(err)
	}
	got := read(t, g, gpa, 256)
	if !bytes.Equal(got[:device.DeviceAttrV10Size], device.AsBytes(&da)[:device.DeviceAttrV10Size]) ||
		!bytes.Equal(got[device.DeviceAttrV10Size:], ff[device.DeviceAttrV10Size:]) {
		t.Errorf("1.0 QUERY_DEVICE wrote %x", got)
	}
	if binary.LittleEndian.Uint32(got[0x2c:]) != da.MaxQP { // max_qp
		t.Errorf("1.0 QUERY_DEVICE: max_qp %d", binary.LittleEndian.Uint32(got[0x2c:]))
	}
	_, err = g.Admin(ctx, &device.AdminCmd{Opcode: device.CmdQueryDevice, RespGPA: gpa, RespLen: 100})
	wantStatus(t, err, device.StEINVAL)
}

// TestResizeCQ: completions the guest has not polled survive a
// RESIZE_CQ, in order, and the larger CQ takes more; a ring too small for

// waitSQRoom waits until qp's SQ has a free slot, as PostSend requires.
func waitSQRoom(t *testing.T, qp *guestsim.QP) {
	t.Helper()
	ctx := testCtx(t)
	for qp.SQFree() == 0 {
		if ctx.Err() != nil {
			t.Fatalf("QP %d: the device took no send WQE", qp.QPN)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// threePending sends three messages from a to b and waits until the
// device wrote b's three receive CQEs, which stay unpolled.
func threePending(t *testing.T, a, b *rcEnd) {
	t.Helper()
	for i := 0; i < 3; i++ {
		b.qp.PostRecv(uint64(i), []device.SGE{{Addr: b.buf, Length: 64, LKey: b.lkey}})
		a.qp.PostSend(device.SendWQE{WRID: uint64(i), Opcode: uint8(rdma.WRSend)}, []device.SGE{{Addr: a.buf, Length: 8, LKey: a.lkey}}, nil)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		prod, _ := b.g.RAM().Load32(b.rcq.DBRec())
		if prod == 3 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d receive CQEs written, want 3", prod)
		}
		time.Sleep(time.Millisecond)
	}
}

// them is refused.
func TestResizeCQ(t *testing.T) {
	tb := newTestbed(t, 2)
	a, b := connectPair(t, tb, false)
	ctx := testCtx(t)
	threePending(t, a, b)
	if err := b.rcq.Resize(ctx, 2); err == nil {
		t.Fatal("a ring of 2 for 3 pending completions was accepted")
	}
	if err := b.rcq.Resize(ctx, 256); err != nil {
		t.Fatal(err)
	}
	for i := 3; i < 100; i++ {
		waitSQRoom(t, a.qp)
		b.qp.PostRecv(uint64(i), []device.SGE{{Addr: b.buf, Length: 64, LKey: b.lkey}})
		a.qp.PostSend(device.SendWQE{WRID: uint64(i), Opcode: uint8(rdma.WRSend)}, []device.SGE{{Addr: a.buf, Length: 8, LKey: a.lkey}}, nil)
		if i%32 == 0 {
			waitRecvTaken(t, b.qp)
		}
	}
	got, err := b.rcq.Wait(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range got {
		if e.WRID != uint64(i) || e.Status != uint32(rdma.WCSuccess) {
			t.Fatalf("completion %d: %+v", i, e)
		}
	}
}

// TestResizeCQBelowPostedUD is pyverbs' test_resize_cq: UD sends posted
// (doorbell rung) just before RESIZE_CQ complete on the wire, so a ring
// smaller than their completions is refused even when the command
// comes before the engine has sent them.
func TestResizeCQBelowPostedUD(t *testing.T) {
	tb := newTestbed(t, 2)
	a := newUDEnd(t, tb.guests[0], tb.cfgs[0].MAC)
	b := newUDEnd(t, tb.guests[1], tb.cfgs[1].MAC)
	ah := a.ahTo(t, a.pd, b)
	ctx := testCtx(t)
	for round := 0; round < 20; round++ {
		for i := 0; i < 3; i++ {
			udSend(a.qp, uint64(i), ah, b.qp.QPN, 0, device.SGE{Addr: a.buf, Length: 64, LKey: a.lkey})
		}
		if err := a.scq.Resize(ctx, 2); err == nil {
			t.Fatalf("round %d: a ring of 2 for 3 posted UD sends was accepted", round)
		}
		if got, err := a.scq.Wait(ctx, 3); err != nil || len(got) != 3 {
			t.Fatalf("round %d: %d completions, %v", round, len(got), err)
		}
	}
}

// TestPagedCQ: a CQ whose ring is scattered 4 KiB pages named by a page
// table (ABI 1.9). The pending completions move from a contiguous ring
// into a paged one on RESIZE_CQ, and the completions that follow wrap
// around the paged ring across its pages, in order.
func TestPagedCQ(t *testing.T) {
	tb := newTestbed(t, 2)
	a, b := connectPair(t, tb, false)
	ctx := testCtx(t)
	threePending(t, a, b)
	if err := b.rcq.ResizePaged(ctx, 128); err != nil { // 2 pages
		t.Fatal(err)
	}
	next := uint64(0)
	check := func(got []device.CQE) {
		t.Helper()
		for _, e := range got {
			if e.WRID != next || e.Status != uint32(rdma.WCSuccess) {
				t.Fatalf("completion %d: %+v", next, e)
			}
			next++
		}
	}
	got, err := b.rcq.Wait(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	check(got)
	for round := 0; round < 5; round++ { // 500 completions: the ring wraps 3 times
		for i := 0; i < 100; i++ {
			id := uint64(3 + round*100 + i)
			waitSQRoom(t, a.qp)
			b.qp.PostRecv(id, []device.SGE{{Addr: b.buf, Length: 64, LKey: b.lkey}})
			a.qp.PostSend(device.SendWQE{WRID: id, Opcode: uint8(rdma.WRSend)}, []device.SGE{{Addr: a.buf, Length: 8, LKey: a.lkey}}, nil)
			if i%32 == 0 {
				waitRecvTaken(t, b.qp)
			}
		}
		got, err := b.rcq.Wait(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		check(got)
	}
	if next != 503 {
		t.Fatalf("%d completions, want 503", next)
	}
}
