package integration

import (
	"bytes"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/device/guestsim"
	"github.com/PacketFive/hinic/internal/rdma"
)

// The receive doorbells the device does not need (ABI 1.18,
// hicain_wq_dbrec.no_db, internal/device/recvnotify.go). guestsim posts
// as libhicain does: it rings only while the word reads 0.

// cqStream hands out a CQ's completions one by one, in order: Wait
// returns every completion that has arrived.
type cqStream struct {
	cq      *guestsim.CQ
	pending []device.CQE
}

func (c *cqStream) next(t *testing.T, status rdma.WCStatus, opcode rdma.WCOpcode, wrID uint64) device.CQE {
	t.Helper()
	if len(c.pending) == 0 {
		es, err := c.cq.Wait(testCtx(t), 1)
		if err != nil {
			t.Fatal(err)
		}
		c.pending = es
	}
	e := c.pending[0]
	c.pending = c.pending[1:]
	if e.Status != uint32(status) || e.Opcode != uint32(opcode) || e.WRID != wrID {
		t.Fatalf("CQE %+v: want status %v opcode %v wr_id %d", e, status, opcode, wrID)
	}
	return e
}

// waitFor polls cond until it holds or the test's context ends.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx := testCtx(t)
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRecvWithoutDoorbells streams 3000 SENDs into a receiver that
// reposts each buffer as its completion arrives, as perftest and UCX do.
// Every message lands in order and intact, most reposts go without a
// doorbell, and the device fetched the ring by itself when the engine
// ran short.
func TestRecvWithoutDoorbells(t *testing.T) {
	tb := newTestbed(t, 2)
	a, b := connectPair(t, tb, false)
	const depth, n, window, size = 64, 3000, 24, 256
	slot := func(i int) uint64 { return uint64(i%depth) * size }
	post := func(i int) {
		b.qp.PostRecv(uint64(i), []device.SGE{{Addr: b.buf + slot(i), Length: size, LKey: b.lkey}})
	}
	for i := range depth {
		post(i)
	}
	// The device says no_db once it holds half the queue; the rest of
	// the receives may wait in the ring until the engine runs short.
	waitFor(t, "no_db", func() bool { return b.qp.RQNoDB() != 0 })
	src := a.buf + 32<<10
	want := make([][]byte, depth)
	recvs, sends := &cqStream{cq: b.rcq}, &cqStream{cq: a.scq}
	sent, got := 0, 0
	for got < n {
		for sent < n && sent-got < window {
			at := src + slot(sent)
			want[sent%depth] = fill(t, a.g, at, size, byte(sent))
			a.qp.PostSend(device.SendWQE{WRID: uint64(sent), Opcode: uint8(rdma.WRSend),
				SendFlags: uint16(rdma.SendSignaled)}, []device.SGE{{Addr: at, Length: size, LKey: a.lkey}}, nil)
			sent++
		}
		e := recvs.next(t, rdma.WCSuccess, rdma.WCRecv, uint64(got))
		if e.ByteLen != size {
			t.Fatalf("message %d: %d bytes", got, e.ByteLen)
		}
		if p := read(t, b.g, b.buf+slot(got), size); !bytes.Equal(p, want[got%depth]) {
			t.Fatalf("message %d: payload differs", got)
		}
		sends.next(t, rdma.WCSuccess, rdma.WCSend, uint64(got))
		if got+depth < n {
			post(got + depth)
		}
		got++
	}
	skipped := b.g.RecvSkipped.Load()
	fetches := tb.srv.Status().VNICs[1].Counters.RecvFetches
	t.Logf("%d receives posted, %d without a doorbell; the device fetched %d times by itself", n, skipped, fetches)
	if skipped < n/2 {
		t.Errorf("%d of %d receives went without a doorbell, want most", skipped, n)
	}
	if fetches == 0 {
		t.Error("the device never fetched the ring by itself, yet messages kept landing")
	}
	if extra := b.rcq.Poll(); len(extra) != 0 || len(recvs.pending) != 0 {
		t.Fatalf("extra receive completions %+v %+v", extra, recvs.pending)
	}
}

// TestNoDBFlushInError: receives the guest posted without a doorbell,
// still in its ring, complete with WR_FLUSH_ERR when the QP enters ERR,
// after the ones the engine held and in posting order; from then on the
// guest rings for every receive, and each is flushed. RESET turns the
// word off too.
func TestNoDBFlushInError(t *testing.T) {
	_, b := connectPair(t, newTestbed(t, 2), false)
	post := func(i int) {
		b.qp.PostRecv(uint64(i), []device.SGE{{Addr: b.buf + uint64(i)*64, Length: 64, LKey: b.lkey}})
	}
	for i := range 40 { // the device says no_db once it holds half the RQ's 64
		post(i)
	}
	waitFor(t, "no_db after 40 receives", func() bool { return b.qp.RQNoDB() != 0 })
	// Nothing consumes: no_db stays 1 (a doorbell rung before it may
	// still fetch some of these, the rest wait in the ring).
	skipped := b.g.RecvSkipped.Load()
	for i := 40; i < 60; i++ {
		post(i)
	}
	if n := b.g.RecvSkipped.Load() - skipped; n != 20 {
		t.Fatalf("%d of 20 receives skipped their doorbell", n)
	}
	skipped = b.g.RecvSkipped.Load()
	ctx := testCtx(t)
	if err := b.g.ModifyQP(ctx, b.qp.QPN, uint32(rdma.QPAttrState), device.QPAttr{QPState: uint32(rdma.QPStateErr)}); err != nil {
		t.Fatal(err)
	}
	flushed := &cqStream{cq: b.rcq}
	for i := range 60 {
		flushed.next(t, rdma.WCWRFlushErr, rdma.WCRecv, uint64(i))
	}
	if w := b.qp.RQNoDB(); w != 0 {
		t.Fatalf("no_db %d on a QP in ERR", w)
	}
	post(60)
	flushed.next(t, rdma.WCWRFlushErr, rdma.WCRecv, 60)
	if b.g.RecvSkipped.Load() != skipped {
		t.Error("a receive posted in ERR went without a doorbell")
	}
	if err := b.g.ModifyQP(ctx, b.qp.QPN, uint32(rdma.QPAttrState), device.QPAttr{QPState: uint32(rdma.QPStateReset)}); err != nil {
		t.Fatal(err)
	}
	if w := b.qp.RQNoDB(); w != 0 {
		t.Fatalf("no_db %d after RESET", w)
	}
}

// TestNoDBOldDriver: a driver of ABI 1.17 has 8-byte dbrecs; the device
// never writes past them, and every receive rings as before.
func TestNoDBOldDriver(t *testing.T) {
	tb := newTestbedGuests(t, 2, nil, func(i int, c *guestsim.Config) {
		if i == 1 {
			c.DriverMinor = 17
		}
	})
	a := newRCEnd(t, tb.guests[0], tb.cfgs[0].MAC, false)
	b := newRCEnd(t, tb.guests[1], tb.cfgs[1].MAC, false)
	a.connect(t, b)
	b.connect(t, a)
	const sentinel = 0x5a5aa5a5
	b.qp.SetRQNoDB(sentinel) // the next 8 bytes are not the old driver's dbrec
	recvs := &cqStream{cq: b.rcq}
	for i := range 32 {
		b.qp.PostRecv(uint64(i), []device.SGE{{Addr: b.buf + uint64(i)*64, Length: 64, LKey: b.lkey}})
	}
	for i := range 32 {
		at := a.buf + 32<<10
		fill(t, a.g, at, 64, byte(i))
		a.qp.PostSend(device.SendWQE{WRID: uint64(i), Opcode: uint8(rdma.WRSend)},
			[]device.SGE{{Addr: at, Length: 64, LKey: a.lkey}}, nil)
		recvs.next(t, rdma.WCSuccess, rdma.WCRecv, uint64(i))
	}
	if w := b.qp.RQNoDB(); w != sentinel {
		t.Fatalf("the device wrote %#x past a 1.17 driver's 8-byte dbrec", w)
	}
	if f := tb.srv.Status().VNICs[1].Counters.RecvFetches; f != 0 {
		t.Fatalf("%d fetches for a 1.17 driver", f)
	}
}

// TestNoDBSRQ: an SRQ fed without doorbells serves two QPs; arming its
// limit first takes every WQE still in the ring (the limit counts what
// the guest posted) and turns doorbells back on.
func TestNoDBSRQ(t *testing.T) {
	sb := newSRQBed(t, guestsim.SRQConfig{Depth: 64})
	sb.postSRQ(0, 40) // no_db once the device holds half the SRQ's 64
	waitFor(t, "the SRQ's no_db", func() bool { return sb.srq.NoDB() != 0 })
	skipped := sb.b.g.RecvSkipped.Load()
	sb.postSRQ(40, 20)
	if n := sb.b.g.RecvSkipped.Load() - skipped; n != 20 {
		t.Fatalf("%d of 20 SRQ receives skipped their doorbell", n)
	}
	for i := range 10 {
		sb.recv(t, i, sb.send(t, i))
	}
	ctx := testCtx(t)
	if err := sb.srq.ArmLimit(ctx, 8); err != nil {
		t.Fatal(err)
	}
	if got := sb.srq.Taken(); got != 60 {
		t.Fatalf("the device took %d of 60 SRQ WQEs when the limit was armed", got)
	}
	if w := sb.srq.NoDB(); w != 0 {
		t.Fatalf("no_db %d with the limit armed", w)
	}
	g := sb.b.g
	g.Events()
	for i := 10; i < 52; i++ { // 8 left: not below the limit
		sb.recv(t, i, sb.send(t, i))
	}
	for _, e := range g.Events() {
		if e.Type == device.EvSRQLimit {
			t.Fatalf("SRQ_LIMIT with 8 WQEs left and limit 8: %+v", e)
		}
	}
	sb.recv(t, 52, sb.send(t, 52))
	if ev, err := g.WaitEvent(ctx, device.EvSRQLimit); err != nil || ev.Handle != sb.srq.SRQN {
		t.Fatalf("event %+v, %v; want SRQ_LIMIT", ev, err)
	}
}

// TestRecvRefill: receives posted with no doorbell at all are taken when
// the SENDs arrive, the device fetching the ring on the spot for the
// message that found the engine's queue empty: no RNR NAK, every
// message in order.
func TestRecvRefill(t *testing.T) {
	tb := newTestbed(t, 2)
	a, b := connectPair(t, tb, false)
	b.g.NoRecvDoorbells = true
	recvs := &cqStream{cq: b.rcq}
	for round := range 3 {
		for i := range 20 {
			id := uint64(round*20 + i)
			b.qp.PostRecv(id, []device.SGE{{Addr: b.buf + uint64(i)*64, Length: 64, LKey: b.lkey}})
		}
		for i := range 20 {
			id := uint64(round*20 + i)
			a.qp.PostSend(device.SendWQE{WRID: id, Opcode: uint8(rdma.WRSend)},
				[]device.SGE{{Addr: a.buf, Length: 64, LKey: a.lkey}}, nil)
		}
		for i := range 20 {
			recvs.next(t, rdma.WCSuccess, rdma.WCRecv, uint64(round*20+i))
		}
	}
	st := tb.srv.Status().VNICs[1]
	if st.Counters.RecvRefills == 0 {
		t.Error("no refill counted, yet receives never rung for were taken")
	}
	if n := st.Engine.RNRNAKsSent; n != 0 {
		t.Errorf("%d RNR NAKs with the receives in the guest's ring", n)
	}
}
