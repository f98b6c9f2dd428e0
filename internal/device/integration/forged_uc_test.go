package integration

import (
	"bytes"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/device/guestsim"
	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
)

// newUCEnd is newRCEnd with a UC QP: UC has no ACKs and no READs, so
// the MR and the QP allow local and remote writes only.
func newUCEnd(t *testing.T, g *guestsim.Guest, mac [6]byte) *rcEnd {
	t.Helper()
	return newEnd(t, g, mac, false, uint32(rdma.AccessLocalWrite|rdma.AccessRemoteWrite), guestsim.QPTypeUC)
}

// connectUC takes e's UC QP to RTS towards r's, with the attributes IBA
// 11.2.4.2 (table 91) requires of UC: no timeouts, retries or RDMA
// atomic limits. Both directions start at PSN 100.
func (e *rcEnd) connectUC(t *testing.T, r *rcEnd) {
	t.Helper()
	ctx := testCtx(t)
	for _, s := range []struct {
		attr device.QPAttr
		mask rdma.QPAttrMask
	}{
		{device.QPAttr{QPState: uint32(rdma.QPStateInit), PortNum: 1, QPAccessFlags: e.access},
			rdma.QPAttrState | rdma.QPAttrPKeyIndex | rdma.QPAttrPort | rdma.QPAttrAccessFlags},
		{device.QPAttr{QPState: uint32(rdma.QPStateRTR), PathMTU: uint32(rdma.MTU1024), DestQPNum: r.qp.QPN, RQPSN: 100,
			AH: device.AHAttr{IsGlobal: 1, PortNum: 1, DMAC: r.mac, DGID: r.gid, SGIDIndex: 1, HopLimit: 64}},
			rdma.QPAttrState | rdma.QPAttrAV | rdma.QPAttrPathMTU | rdma.QPAttrDestQPN | rdma.QPAttrRQPSN},
		{device.QPAttr{QPState: uint32(rdma.QPStateRTS), SQPSN: 100}, rdma.QPAttrState | rdma.QPAttrSQPSN},
	} {
		if err := e.g.ModifyQP(ctx, e.qp.QPN, uint32(s.mask), s.attr); err != nil {
			t.Fatalf("modify UC QP %d to %d: %v", e.qp.QPN, s.attr.QPState, err)
		}
	}
}

// TestForgedUC is TestForgedWrite for UC, which has no ACK to give a
// forgery away and so relies on the remote-address check alone: guest
// C, with its own MAC and IP, forges a UC RDMA WRITE ONLY and a UC SEND
// ONLY to guest B's UC QP that is connected to guest A, with the PSN B
// expects, B's R_Key and buffer, and a receive posted at B. Each is
// dropped and counted as from a foreign address (rxe's check_addr);
// B's memory and receive queue are untouched. A's own WRITE and SEND,
// with the same PSNs, then land.
func TestForgedUC(t *testing.T) {
	tb := newTestbed(t, 3)
	a := newUCEnd(t, tb.guests[0], tb.cfgs[0].MAC)
	b := newUCEnd(t, tb.guests[1], tb.cfgs[1].MAC)
	a.connectUC(t, b)
	b.connectUC(t, a)
	c, err := tb.guests[2].NewL2()
	if err != nil {
		t.Fatal(err)
	}
	const n = 64
	wbuf, rbuf := b.buf, b.buf+4096 // WRITE target, receive buffer
	b.qp.PostRecv(1, []device.SGE{{Addr: rbuf, Length: n, LKey: b.lkey}})
	before := read(t, b.g, b.buf, 8192)

	evil := bytes.Repeat([]byte{0xe1}, n)
	forge := func(op proto.Opcode, psn proto.PSN, reth *proto.RETHFields) []byte {
		f := proto.PacketFields{Link: proto.LinkEthernet,
			Eth:     proto.EthernetFields{Dst: tb.cfgs[1].MAC, Src: tb.cfgs[2].MAC},
			IP4:     proto.IPv4Fields{TTL: 64, Flags: 0b010, Src: tb.cfgs[2].IPv4[0].As4(), Dst: tb.cfgs[1].IPv4[0].As4()},
			UDP:     proto.UDPFields{SrcPort: 0xc000},
			BTH:     proto.BTHFields{Opcode: op, PKey: 0xffff, DestQP: b.qp.QPN, PSN: psn},
			Payload: evil}
		if reth != nil {
			f.RETH = *reth
		}
		frame := make([]byte, f.Len())
		if _, err := f.Encode(frame); err != nil {
			t.Fatal(err)
		}
		return frame
	}
	ctx := testCtx(t)
	for i, frame := range [][]byte{
		forge(proto.OpUCWriteOnly, 100, &proto.RETHFields{VA: wbuf, RKey: b.rkey, DMALength: n}),
		// What A's SEND will carry: the PSN after its WRITE's.
		forge(proto.OpUCSendOnly, 101, nil),
	} {
		if err := c.Send(frame); err != nil {
			t.Fatal(err)
		}
		for tb.srv.Status().VNICs[1].Engine.RxAddrMismatch < uint64(i+1) {
			if !bytes.Equal(read(t, b.g, b.buf, 8192), before) {
				t.Fatalf("guest C's forged UC packet %d landed in guest B's memory", i+1)
			}
			if ctx.Err() != nil {
				t.Fatalf("the forged UC packet %d was neither taken nor counted as from a foreign address", i+1)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if !bytes.Equal(read(t, b.g, b.buf, 8192), before) {
		t.Fatal("guest B's memory changed")
	}
	if got := b.rcq.Poll(); len(got) != 0 {
		t.Fatalf("guest B completed %+v from the forged SEND", got)
	}

	// A's WRITE (PSN 100) and SEND (101) land: B's receive, still
	// posted, takes A's SEND and not C's.
	wdata := fill(t, a.g, a.buf, n, 7)
	sdata := fill(t, a.g, a.buf+4096, n, 9)
	a.qp.PostSend(device.SendWQE{WRID: 1, Opcode: uint8(rdma.WRRDMAWrite), SendFlags: uint16(rdma.SendSignaled),
		RemoteAddr: wbuf, RKey: b.rkey}, []device.SGE{{Addr: a.buf, Length: n, LKey: a.lkey}}, nil)
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCRDMAWrite, 1)
	a.qp.PostSend(device.SendWQE{WRID: 2, Opcode: uint8(rdma.WRSend), SendFlags: uint16(rdma.SendSignaled)},
		[]device.SGE{{Addr: a.buf + 4096, Length: n, LKey: a.lkey}}, nil)
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCSend, 2)
	if e := wantCQE(t, b.rcq, rdma.WCSuccess, rdma.WCRecv, 1); e.ByteLen != n {
		t.Fatalf("B's receive: %+v, want %d bytes", e, n)
	}
	if got := read(t, b.g, rbuf, n); !bytes.Equal(got, sdata) {
		t.Fatalf("A's SEND: B's receive buffer holds %x", got)
	}
	// UC completes a WRITE at the sender without an ACK, so the data is
	// checked after the SEND behind it has arrived: the two go in order.
	if got := read(t, b.g, wbuf, n); !bytes.Equal(got, wdata) {
		t.Fatalf("A's WRITE: B holds %x", got)
	}
	if m := tb.srv.Status().VNICs[1].Engine.RxAddrMismatch; m != 2 {
		t.Errorf("B counted %d packets from a foreign address; want the 2 forged ones", m)
	}
}
