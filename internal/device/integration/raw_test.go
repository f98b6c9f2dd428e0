package integration

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/device/guestsim"
	"github.com/PacketFive/hinic/internal/rdma"
)

const qpTypeRaw = 8 // IB_QPT_RAW_PACKET

// rawEnd is one guest's raw side: a PD, an MR over a buffer, one CQ.
type rawEnd struct {
	ctx  context.Context
	g    *guestsim.Guest
	pd   uint32
	cq   *guestsim.CQ
	buf  uint64
	lkey uint32
}

func newRawEnd(t *testing.T, g *guestsim.Guest) *rawEnd {
	t.Helper()
	ctx := testCtx(t)
	e := &rawEnd{ctx: ctx, g: g}
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
	if e.cq, err = g.CreateCQ(ctx, 64, 0); err != nil {
		t.Fatal(err)
	}
	return e
}

// qp creates a raw packet QP and takes it to RTS as pyverbs does.
func (e *rawEnd) qp(t *testing.T) *guestsim.QP {
	t.Helper()
	ctx := testCtx(t)
	qp, err := e.g.CreateQP(ctx, guestsim.QPConfig{PD: e.pd, SendCQ: e.cq, RecvCQ: e.cq, Type: qpTypeRaw})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		st   rdma.QPState
		mask rdma.QPAttrMask
	}{
		{rdma.QPStateInit, rdma.QPAttrState | rdma.QPAttrPort},
		{rdma.QPStateRTR, rdma.QPAttrState},
		{rdma.QPStateRTS, rdma.QPAttrState},
	} {
		if err := e.g.ModifyQP(ctx, qp.QPN, uint32(s.mask), device.QPAttr{QPState: uint32(s.st), PortNum: 1}); err != nil {
			t.Fatal(err)
		}
	}
	return qp
}

func (e *rawEnd) flow(a device.CmdCreateFlowArgs) (uint32, error) {
	cmd := device.AdminCmd{Opcode: device.CmdCreateFlow}
	if a.Port == 0 {
		a.Port = 1
	}
	*device.PayloadOf[device.CmdCreateFlowArgs](&cmd) = a
	c, err := e.g.Admin(e.ctx, &cmd)
	return c.Handle, err
}

// send posts frame from the end's buffer at off on qp, signaled.
func (e *rawEnd) send(t *testing.T, qp *guestsim.QP, wrID uint64, off uint64, frame []byte) {
	t.Helper()
	if err := e.g.RAM().WriteAt(frame, e.buf+off); err != nil {
		t.Fatal(err)
	}
	qp.PostSend(device.SendWQE{WRID: wrID, Opcode: uint8(rdma.WRSend), SendFlags: uint16(rdma.SendSignaled)},
		[]device.SGE{{Addr: e.buf + off, Length: uint32(len(frame)), LKey: e.lkey}}, nil)
}

// udpFrame is an Ethernet/IPv4/UDP frame as pyverbs' gen_packet makes
// them (from 1.1.1.1 to 2.2.2.2, ports 1234 to 5678).
func udpFrame(dst, src [6]byte, n int) []byte {
	f := append(append([]byte{}, dst[:]...), src[:]...)
	f = append(f, 0x08, 0x00, 0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2)
	f = binary.BigEndian.AppendUint16(f, 1234)
	f = binary.BigEndian.AppendUint16(f, 5678)
	for len(f) < n {
		f = append(f, 'a')
	}
	binary.BigEndian.PutUint16(f[16:], uint16(len(f)-14))
	binary.BigEndian.PutUint16(f[38:], uint16(len(f)-34))
	return f
}

var (
	pvSrcMAC = [6]byte{0x24, 0x8a, 0x07, 0xa5, 0x28, 0xc8}
	pvDstMAC = [6]byte{0x01, 0x50, 0x56, 0x19, 0x20, 0xa7}
	ones6    = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
)

// TestRawQPFlows: through the admin queue and the rings, a raw QP's
// frames reach a raw QP of the same guest whose flow matches them
// (pyverbs' raw_traffic), the wire otherwise, after the vNIC's source
// check; frames from the wire that a flow matches reach the raw QP
// instead of the netdev.
func TestRawQPFlows(t *testing.T) {
	tb := newTestbed(t, 2)
	ctx := testCtx(t)
	a, b := newRawEnd(t, tb.guests[0]), newRawEnd(t, tb.guests[1])
	macA, macB := tb.cfgs[0].MAC, tb.cfgs[1].MAC
	la, err := a.g.NewL2()
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.g.NewL2()
	if err != nil {
		t.Fatal(err)
	}
	if h := a.g.Header(); h.Caps&device.CapRaw == 0 || h.ABIMinor < 15 {
		t.Fatalf("caps %#x, ABI 1.%d: no raw packet QPs", h.Caps, h.ABIMinor)
	}
	cli, srv := a.qp(t), a.qp(t)
	fl := device.CmdCreateFlowArgs{QPN: srv.QPN, Match: device.FlowEth, DMAC: pvDstMAC, DMACMask: ones6,
		SMAC: pvSrcMAC, SMACMask: pvSrcMAC, EtherType: [2]byte{0x08, 0x00}, EtherTypeMask: [2]byte{0xff, 0xff}}
	if _, err := a.flow(fl); err != nil {
		t.Fatal(err)
	}

	// Loopback, as pyverbs' flow tests run.
	f := udpFrame(pvDstMAC, pvSrcMAC, 1024)
	srv.PostRecv(1, []device.SGE{{Addr: a.buf + 0x8000, Length: 2048, LKey: a.lkey}})
	waitRecvTaken(t, srv)
	a.send(t, cli, 2, 0, f)
	es, err := a.cq.Wait(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		switch e.WRID {
		case 2:
			if e.Status != uint32(rdma.WCSuccess) || e.Opcode != uint32(rdma.WCSend) {
				t.Fatalf("send CQE %+v", e)
			}
		case 1:
			if e.Status != uint32(rdma.WCSuccess) || e.Opcode != uint32(rdma.WCRecv) || e.ByteLen != uint32(len(f)) ||
				e.QPNum != srv.QPN {
				t.Fatalf("recv CQE %+v", e)
			}
		default:
			t.Fatalf("CQE %+v", e)
		}
	}
	if got := read(t, a.g, a.buf+0x8000, len(f)); !bytes.Equal(got, f) {
		t.Fatal("looped-back frame differs")
	}

	// To the wire: a frame with a foreign source is dropped by the
	// vNIC's source check (its send still completes), one from the
	// vNIC's MAC reaches B's netdev, first.
	spoofed := udpFrame(macB, pvSrcMAC, 100)
	honest := udpFrame(macB, macA, 120)
	a.send(t, cli, 3, 0x1000, spoofed)
	a.send(t, cli, 4, 0x2000, honest)
	es, err = a.cq.Wait(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range es {
		if e.Status != uint32(rdma.WCSuccess) || e.Opcode != uint32(rdma.WCSend) || e.WRID != uint64(3+i) {
			t.Fatalf("send CQE %d: %+v", i, e)
		}
	}
	if got, err := lb.Recv(ctx); err != nil || !bytes.Equal(got, honest) {
		t.Fatalf("B's netdev got %x, %v; want the honest frame", got, err)
	}

	// From the wire: B's netdev sends to A; a frame a flow matches goes
	// to the raw QP, others to A's netdev, in order.
	fl2 := device.CmdCreateFlowArgs{QPN: srv.QPN, Match: device.FlowIPv4 | device.FlowUDP,
		SrcIP: [16]byte{1, 1, 1, 1}, SrcIPMask: [16]byte{0xff, 0xff, 0xff, 0xff}, IPProto: 17, IPProtoMask: 0xff,
		DstPort: [2]byte{0x16, 0x2e}, DstPortMask: [2]byte{0xff, 0xff}} // 5678
	h2, err := a.flow(fl2)
	if err != nil {
		t.Fatal(err)
	}
	steered := udpFrame(macA, macB, 200)
	other := udpFrame(macA, macB, 210)
	other[37] = 0x2f // port 5679
	srv.PostRecv(5, []device.SGE{{Addr: a.buf + 0x8000, Length: 2048, LKey: a.lkey}})
	waitRecvTaken(t, srv)
	for _, f := range [][]byte{steered, other} {
		if err := lb.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := la.Recv(ctx); err != nil || !bytes.Equal(got, other) {
		t.Fatalf("A's netdev got %x, %v; want only the frame no flow matches", got, err)
	}
	if e := wantCQE(t, a.cq, rdma.WCSuccess, rdma.WCRecv, 5); e.ByteLen != uint32(len(steered)) {
		t.Fatalf("recv CQE %+v", e)
	}
	if got := read(t, a.g, a.buf+0x8000, len(steered)); !bytes.Equal(got, steered) {
		t.Fatal("steered frame differs")
	}

	// A QP with flows stays until they go, as ib_core orders it.
	wantStatus(t, a.g.Destroy(ctx, device.CmdDestroyQP, srv.QPN), device.StEBUSY)
	if err := a.g.Destroy(ctx, device.CmdDestroyFlow, h2); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, a.g.Destroy(ctx, device.CmdDestroyFlow, h2), device.StENOENT)
}

// TestRawQPCommands: what CREATE_QP and CREATE_FLOW refuse, and the
// per-guest limits of raw QPs and flows.
func TestRawQPCommands(t *testing.T) {
	tb := newTestbed(t, 1)
	ctx := testCtx(t)
	e := newRawEnd(t, tb.guests[0])
	qp := e.qp(t)
	ud, err := e.g.CreateQP(ctx, guestsim.QPConfig{PD: e.pd, SendCQ: e.cq, RecvCQ: e.cq, Type: guestsim.QPTypeUD})
	if err != nil {
		t.Fatal(err)
	}
	eth := device.CmdCreateFlowArgs{QPN: qp.QPN, Match: device.FlowEth}
	for _, c := range []struct {
		name string
		edit func(a *device.CmdCreateFlowArgs)
		st   uint16
	}{
		{"unknown QP", func(a *device.CmdCreateFlowArgs) { a.QPN = 0xabcd }, device.StENOENT},
		{"UD QP", func(a *device.CmdCreateFlowArgs) { a.QPN = ud.QPN }, device.StEOPNOTSUPP},
		{"unknown header", func(a *device.CmdCreateFlowArgs) { a.Match |= 0x20 }, device.StEINVAL},
		{"port 2", func(a *device.CmdCreateFlowArgs) { a.Port = 2 }, device.StEINVAL},
		{"IPv4 and IPv6", func(a *device.CmdCreateFlowArgs) { a.Match = device.FlowIPv4 | device.FlowIPv6 }, device.StEINVAL},
		{"TCP and UDP", func(a *device.CmdCreateFlowArgs) { a.Match = device.FlowTCP | device.FlowUDP }, device.StEINVAL},
		{"IPv4 with 16 bytes", func(a *device.CmdCreateFlowArgs) {
			a.Match, a.SrcIP[15] = device.FlowIPv4, 1
		}, device.StEINVAL},
	} {
		a := eth
		c.edit(&a)
		t.Run(c.name, func(t *testing.T) {
			_, err := e.flow(a)
			wantStatus(t, err, c.st)
		})
	}
	var flows []uint32
	for range device.MaxFlow {
		h, err := e.flow(eth)
		if err != nil {
			t.Fatal(err)
		}
		flows = append(flows, h)
	}
	_, err = e.flow(eth)
	wantStatus(t, err, device.StENOMEM)
	for _, h := range flows {
		if err := e.g.Destroy(ctx, device.CmdDestroyFlow, h); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.g.Destroy(ctx, device.CmdDestroyQP, qp.QPN); err != nil {
		t.Fatal(err)
	}
	// MaxRawQP raw QPs, then ENOMEM; destroying one frees its place.
	var qps []*guestsim.QP
	for range device.MaxRawQP {
		q, err := e.g.CreateQP(ctx, guestsim.QPConfig{PD: e.pd, SendCQ: e.cq, RecvCQ: e.cq, Type: qpTypeRaw,
			SQDepth: 1, RQDepth: 1, MaxSGE: 1})
		if err != nil {
			t.Fatal(err)
		}
		qps = append(qps, q)
	}
	cfg := guestsim.QPConfig{PD: e.pd, SendCQ: e.cq, RecvCQ: e.cq, Type: qpTypeRaw, SQDepth: 1, RQDepth: 1, MaxSGE: 1}
	_, err = e.g.CreateQP(ctx, cfg)
	wantStatus(t, err, device.StENOMEM)
	if err := e.g.Destroy(ctx, device.CmdDestroyQP, qps[0].QPN); err != nil {
		t.Fatal(err)
	}
	if _, err := e.g.CreateQP(ctx, cfg); err != nil {
		t.Fatalf("raw QP after one was destroyed: %v", err)
	}
}

// TestRawRSS: receive work queues (raw QPs without an SQ) and an RSS QP
// over them, as pyverbs' RSS traffic test builds them: frames its flow
// takes spread over the work queues by the Toeplitz hash of their IPv4
// addresses, each whole, in the work queue the hash names.
func TestRawRSS(t *testing.T) {
	tb := newTestbed(t, 1)
	ctx := testCtx(t)
	e := newRawEnd(t, tb.guests[0])
	cq2, err := e.g.CreateCQ(ctx, 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	var wqs []*guestsim.QP
	set := device.CmdSetRSSArgs{LogTable: 3, Fields: rdma.RxHashSrcIPv4 | rdma.RxHashDstIPv4}
	for i := range set.Key {
		set.Key[i] = byte(0x2c + 7*i)
	}
	for i := range 8 {
		cq := []*guestsim.CQ{e.cq, cq2}[i%2]
		wq, err := e.g.CreateQP(ctx, guestsim.QPConfig{PD: e.pd, SendCQ: cq, RecvCQ: cq, Type: qpTypeRaw, NoSQ: true,
			RQDepth: 16, MaxSGE: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []struct {
			st   rdma.QPState
			mask rdma.QPAttrMask
		}{{rdma.QPStateInit, rdma.QPAttrState | rdma.QPAttrPort}, {rdma.QPStateRTR, rdma.QPAttrState}} {
			if err := e.g.ModifyQP(ctx, wq.QPN, uint32(s.mask), device.QPAttr{QPState: uint32(s.st), PortNum: 1}); err != nil {
				t.Fatal(err)
			}
		}
		for j := range 4 {
			wq.PostRecv(uint64(i<<8|j), []device.SGE{{Addr: e.buf + 0x4000 + uint64(i)*2048, Length: 2048, LKey: e.lkey}})
		}
		waitRecvTaken(t, wq)
		set.Table[i] = wq.QPN
		wqs = append(wqs, wq)
	}
	rss, err := e.g.CreateQP(ctx, guestsim.QPConfig{PD: e.pd, Type: qpTypeRaw, NoSQ: true, NoRQ: true})
	if err != nil {
		t.Fatal(err)
	}
	rssCmd := func(a device.CmdSetRSSArgs) error {
		cmd := device.AdminCmd{Opcode: device.CmdSetRSS}
		*device.PayloadOf[device.CmdSetRSSArgs](&cmd) = a
		_, err := e.g.Admin(ctx, &cmd)
		return err
	}
	bad := set
	bad.QPN = wqs[0].QPN
	wantStatus(t, rssCmd(bad), device.StEINVAL) // a work queue is no RSS QP
	bad = set
	bad.QPN, bad.Table[7] = rss.QPN, 0xdead
	wantStatus(t, rssCmd(bad), device.StENOENT)
	set.QPN = rss.QPN
	if err := rssCmd(set); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, rssCmd(set), device.StEINVAL) // once
	wantStatus(t, e.g.Destroy(ctx, device.CmdDestroyQP, wqs[3].QPN), device.StEBUSY)
	fl := device.CmdCreateFlowArgs{QPN: rss.QPN, Match: device.FlowEth, DMAC: pvDstMAC, DMACMask: ones6}
	if _, err := e.flow(fl); err != nil {
		t.Fatal(err)
	}
	cli := e.qp(t)
	hit := map[uint32]int{}
	for i := range 12 {
		f := udpFrame(pvDstMAC, pvSrcMAC, 300)
		src := [4]byte{byte(i), byte(i + 1), byte(i + 2), byte(i + 3)}
		copy(f[26:30], src[:])
		e.send(t, cli, uint64(1000+i), 0, f)
		want := wqs[rdma.Toeplitz(set.Key[:], append(src[:], 2, 2, 2, 2))&7].QPN
		var got []device.CQE
		for len(got) < 2 {
			for _, cq := range []*guestsim.CQ{e.cq, cq2} {
				got = append(got, cq.Poll()...)
			}
			if ctx.Err() != nil {
				t.Fatalf("frame %d: completions %+v", i, got)
			}
		}
		for _, c := range got {
			if c.Status != uint32(rdma.WCSuccess) {
				t.Fatalf("CQE %+v", c)
			}
			if c.Opcode == uint32(rdma.WCRecv) && (c.QPNum != want || c.ByteLen != uint32(len(f))) {
				t.Fatalf("frame %d went to %#x (CQE %+v), want %#x", i, c.QPNum, c, want)
			}
		}
		hit[want]++
		if hit[want] == 4 { // its receives are used up
			break
		}
	}
	if len(hit) < 3 {
		t.Fatalf("12 sources hashed to %d work queues", len(hit))
	}
}
