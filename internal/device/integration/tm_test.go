package integration

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"
	"unsafe"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/device/guestsim"
	"github.com/PacketFive/hinic/internal/rdma"
)

func tmView(e device.CQE) device.CQETM { return *(*device.CQETM)(unsafe.Pointer(&e)) }

// TestTMSRQ: a tag-matching SRQ in guest memory (ABI 1.13). Its ops
// ring adds tags; an eager message lands after its TMH in the tagged
// buffer, an unexpected one whole in an ordinary WQE, and a rendezvous
// is read from the sender, which gets the FIN in its RQ. The CQEs carry
// the tag, app_ctx and handle where the ABI puts them.
func TestTMSRQ(t *testing.T) {
	sb := newSRQBed(t, guestsim.SRQConfig{Depth: 16, MaxSGE: 1, MaxNumTags: 8})
	ctx := testCtx(t)
	attr, err := sb.b.g.QueryDevice(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if attr.TMFlags != rdma.TMCapRC || attr.MaxNumTags != rdma.TMMaxNumTags || attr.MaxRndvHdrSize != rdma.TMMaxRndvHdr ||
		attr.MaxTMOps != rdma.TMMaxOps || attr.MaxTMSGE != 1 {
		t.Fatalf("TM caps %+v", attr)
	}
	tagBuf := sb.b.buf + 32768
	add := func(h uint32, tag uint64, unexp uint32) device.CQETM {
		sb.srq.PostOp(device.TMOpWQE{WRID: 1000 + uint64(h), Opcode: uint32(rdma.TMTagAdd), Flags: uint32(rdma.TMOpSignaled),
			UnexpectedCnt: unexp, Handle: h, RecvWRID: 500 + uint64(h), Tag: tag, Mask: 0xffff,
			SGE: device.SGE{Addr: tagBuf + uint64(h)*1024, Length: 1024, LKey: sb.b.lkey}})
		return tmView(wantCQE(t, sb.b.rcq, rdma.WCSuccess, rdma.WCTMAdd, 1000+uint64(h)))
	}
	send := func(opcode uint8, tag uint64, n int, rvh *rdma.RVHFields) []byte {
		src := sb.a.buf + 16384
		msg := fill(t, sb.a.g, src, n, byte(tag))
		rdma.TMH(msg).Encode(&rdma.TMHFields{Opcode: opcode, Tag: tag, AppCtx: 0x5a})
		if rvh != nil {
			rdma.RVH(msg[16:]).Encode(rvh)
		}
		if err := sb.a.g.RAM().WriteAt(msg, src); err != nil {
			t.Fatal(err)
		}
		sb.s1.PostSend(device.SendWQE{WRID: 9, Opcode: uint8(rdma.WRSend), SendFlags: uint16(rdma.SendSignaled)},
			[]device.SGE{{Addr: src, Length: uint32(n), LKey: sb.a.lkey}}, nil)
		wantCQE(t, sb.a.scq, rdma.WCSuccess, rdma.WCSend, 9)
		return msg
	}
	if e := add(3, 0x33, 0); e.TMHandle != 3 || e.WCFlags != 0 {
		t.Fatalf("TM_ADD %+v", e)
	}
	// cons moves after the operation's completion (the handles in use
	// go first): wait for it.
	for deadline := time.Now().Add(10 * time.Second); sb.srq.OpsTaken() != 1 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if got, busy := sb.srq.OpsTaken(), sb.srq.TagsBusy(); got != 1 || busy != 1<<3 {
		t.Fatalf("device took %d ops, handles in use %#x", got, busy)
	}
	msg := send(rdma.TMHEager, 0x10033, 700, nil)
	e := tmView(wantCQE(t, sb.b.rcq, rdma.WCSuccess, rdma.WCTMRecv, 503))
	if e.Tag != 0x10033 || e.ImmData != 0x5a || e.TMHandle != 3 || e.ByteLen != 700-16 ||
		e.WCFlags != uint32(rdma.WCTMMatch|rdma.WCTMDataValid) || e.QPNum != sb.r1.QPN {
		t.Fatalf("eager CQE %+v", e)
	}
	if !bytes.Equal(read(t, sb.b.g, tagBuf+3*1024, 700-16), msg[16:]) {
		t.Fatal("tagged buffer")
	}
	if busy := sb.srq.TagsBusy(); busy != 0 {
		t.Fatalf("handles in use %#x after the only tag matched", busy)
	}

	// Unexpected: whole message into SRQ WQE 100.
	sb.postSRQ(0, 1)
	msg = send(rdma.TMHEager, 0x77, 300, nil)
	e = tmView(wantCQE(t, sb.b.rcq, rdma.WCSuccess, rdma.WCTMRecv, 100))
	if e.WCFlags != 0 || e.Tag != 0 || e.ByteLen != 300 || !bytes.Equal(read(t, sb.b.g, sb.b.buf, 300), msg) {
		t.Fatalf("unexpected CQE %+v", e)
	}
	if e := add(4, 0x44, 0); e.WCFlags != uint32(rdma.WCTMSyncReq) {
		t.Fatalf("ADD behind the device's unexpected count: %+v", e)
	}
	sb.srq.PostOp(device.TMOpWQE{WRID: 27, Opcode: uint32(rdma.TMTagSync), Flags: uint32(rdma.TMOpSignaled | rdma.TMOpSync),
		UnexpectedCnt: 1})
	if e := tmView(wantCQE(t, sb.b.rcq, rdma.WCSuccess, rdma.WCTMSync, 27)); e.WCFlags != 0 {
		t.Fatalf("sync %+v", e)
	}

	// Rendezvous into handle 4: the sender's buffer at a.buf+40960.
	sb.s1.PostRecv(77, []device.SGE{{Addr: sb.a.buf + 8192, Length: 64, LKey: sb.a.lkey}})
	data := fill(t, sb.a.g, sb.a.buf+40960, 1000, 0x21)
	send(rdma.TMHRndv, 0x44, rdma.TMMaxRndvHdr, &rdma.RVHFields{VA: sb.a.buf + 40960, RKey: sb.a.rkey, Len: 1000})
	// Both completions may be in the ring at once: take them together.
	es, err := sb.b.rcq.Wait(ctx, 2)
	if err != nil || len(es) != 2 {
		t.Fatalf("rendezvous completions %+v: %v", es, err)
	}
	for _, e := range es {
		if e.Status != uint32(rdma.WCSuccess) || e.Opcode != uint32(rdma.WCTMRecv) || e.WRID != 504 {
			t.Fatalf("rendezvous CQE %+v", e)
		}
	}
	e = tmView(es[0])
	if e.WCFlags != uint32(rdma.WCTMMatch) || e.Tag != 0x44 || e.TMHandle != 4 {
		t.Fatalf("rendezvous match %+v", e)
	}
	e = tmView(es[1])
	if e.WCFlags != uint32(rdma.WCTMDataValid) || e.ByteLen != 1000 {
		t.Fatalf("rendezvous data %+v", e)
	}
	if !bytes.Equal(read(t, sb.b.g, tagBuf+4*1024, 1000), data) {
		t.Fatal("rendezvous data not in the tagged buffer")
	}
	fin := wantCQE(t, sb.a.rcq, rdma.WCSuccess, rdma.WCRecv, 77)
	h := read(t, sb.a.g, sb.a.buf+8192, 16)
	if fin.ByteLen != 16 || h[0] != rdma.TMHFin || binary.BigEndian.Uint64(h[8:]) != 0x44 {
		t.Fatalf("FIN %+v, header % x", fin, h)
	}
	if extra := sb.b.scq.Poll(); len(extra) != 0 {
		t.Fatalf("the device's READ and FIN completed on the guest's send CQ: %+v", extra)
	}

	// Bad ops complete with an error whether signaled or not.
	sb.srq.PostOp(device.TMOpWQE{WRID: 5, Opcode: uint32(rdma.TMTagDel), Handle: 6})
	wantCQE(t, sb.b.rcq, rdma.WCTMErr, rdma.WCTMDel, 5)
	sb.srq.PostOp(device.TMOpWQE{WRID: 6, Opcode: uint32(rdma.TMTagAdd), Handle: 99})
	wantCQE(t, sb.b.rcq, rdma.WCTMErr, rdma.WCTMAdd, 6)
	// An unknown opcode breaks the ring: SRQ_ERR.
	sb.b.g.Events()
	sb.srq.PostOp(device.TMOpWQE{WRID: 7, Opcode: 9})
	if ev, err := sb.b.g.WaitEvent(ctx, device.EvSRQErr); err != nil || ev.Handle != sb.srq.SRQN {
		t.Fatalf("event %+v, %v; want SRQ_ERR", ev, err)
	}
}

// TestTMSRQBadCreate: CREATE_SRQ of the TM type checks its fields.
func TestTMSRQBadCreate(t *testing.T) {
	tb := newTestbed(t, 1)
	e := newRCEnd(t, tb.guests[0], tb.cfgs[0].MAC, false)
	ctx := testCtx(t)
	ring, _ := e.g.Alloc(4096, 4096, false)
	for _, tc := range []struct {
		name string
		a    device.CmdCreateSRQArgs
		want uint16
	}{
		{"no CQ", device.CmdCreateSRQArgs{CQ: 999, MaxNumTags: 1, MaxOps: 1, OpsDepth: 2}, device.StENOENT},
		{"too many tags", device.CmdCreateSRQArgs{CQ: e.rcq.CQN, MaxNumTags: rdma.TMMaxNumTags + 1, MaxOps: 1, OpsDepth: 2}, device.StEINVAL},
		{"ops ring below twice max_ops", device.CmdCreateSRQArgs{CQ: e.rcq.CQN, MaxNumTags: 1, MaxOps: 4, OpsDepth: 4}, device.StEINVAL},
		{"ops ring outside RAM", device.CmdCreateSRQArgs{CQ: e.rcq.CQN, MaxNumTags: 1, MaxOps: 1, OpsDepth: 2,
			OpsRingGPA: 1 << 50}, device.StEFAULT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := device.AdminCmd{Opcode: device.CmdCreateSRQ}
			a := tc.a
			a.PD, a.Depth, a.MaxSGE, a.Stride, a.RingGPA, a.DBRecGPA, a.SRQType = e.pd, 4, 1, 32, ring, ring+2048, device.SRQTTM
			if a.OpsRingGPA == 0 {
				a.OpsRingGPA, a.OpsDBRecGPA = ring+1024, ring+2056
			}
			*device.PayloadOf[device.CmdCreateSRQArgs](&cmd) = a
			_, err := e.g.Admin(ctx, &cmd)
			wantStatus(t, err, tc.want)
		})
	}
}

// TestTMSRQBudget: a TM SRQ's tag list counts towards the guest's memory
// budget. With the budget filled by small basic SRQs and one destroyed,
// a basic SRQ fits again, but a TM SRQ of the same size with 64 tags
// does not (ENOMEM), and its failure leaves the room to the basic one.
func TestTMSRQBudget(t *testing.T) {
	tb := newTestbedConfig(t, 1, func(_ int, c *device.VNICConfig) { c.MemBudget = 256 << 10 })
	e := newRCEnd(t, tb.guests[0], tb.cfgs[0].MAC, false)
	ctx := testCtx(t)
	ring, _ := e.g.Alloc(8192, 4096, false)
	create := func(tags uint32) (uint32, error) {
		a := device.CmdCreateSRQArgs{PD: e.pd, Depth: 1, MaxSGE: 1, Stride: 32, RingGPA: ring, DBRecGPA: ring + 4096}
		if tags != 0 {
			a.SRQType, a.CQ, a.MaxNumTags, a.MaxOps, a.OpsDepth = device.SRQTTM, e.rcq.CQN, tags, 1, 2
			a.OpsRingGPA, a.OpsDBRecGPA = ring+1024, ring+4112
		}
		cmd := device.AdminCmd{Opcode: device.CmdCreateSRQ}
		*device.PayloadOf[device.CmdCreateSRQArgs](&cmd) = a
		c, err := e.g.Admin(ctx, &cmd)
		return c.Handle, err
	}
	var last uint32
	for n := 0; ; n++ {
		h, err := create(0)
		if err != nil {
			wantStatus(t, err, device.StENOMEM)
			break
		}
		if n > 10000 {
			t.Fatal("the budget never ran out")
		}
		last = h
	}
	destroy := device.AdminCmd{Opcode: device.CmdDestroySRQ, Handle: last}
	if _, err := e.g.Admin(ctx, &destroy); err != nil {
		t.Fatal(err)
	}
	_, err := create(64)
	wantStatus(t, err, device.StENOMEM)
	if _, err := create(0); err != nil {
		t.Fatalf("a basic SRQ after the TM SRQ's refusal: %v", err)
	}
}
